"""Strict readers for the benchmark's TSV files and for CSV exports (or an Excel workbook's first
sheet, read as the CSV it would save), and a CSV writer for outputs.

Every problem is reported with the file and 1-based line number, because these files are
often hand-edited or produced by other tools.
"""

from __future__ import annotations

import codecs
import csv
import datetime
import io
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from melo_core.errors import MeloInputError
from melo_core.output import open_output

UTF8_HINT = "save it as UTF-8 text: a spreadsheet's 'CSV UTF-8' (or its 'Unicode Text', UTF-16)"


def text_encoding(head: bytes) -> str:
    """How to decode a text file, from its first bytes: "utf-16" after a UTF-16 byte-order mark
    (what a spreadsheet saves as "Unicode Text"; the mark says it, so nothing is guessed), else
    "utf-8" (its own mark, if any, is dropped by the readers)."""
    return "utf-16" if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) else "utf-8"


XLSX_MAGIC = b"PK\x03\x04"  # an Excel workbook (.xlsx, .xlsm) is a zip archive
XLS_MAGIC = b"\xd0\xcf\x11\xe0"  # Excel 97-2003 (.xls): an OLE2 compound file
# An OpenDocument spreadsheet (.ods) is a zip too; its first entry, stored, names its type.
ODS_MIMETYPE = b"mimetypeapplication/vnd.oasis.opendocument.spreadsheet"


def sheet_text(data: bytes, path: Path, rows: int | None = None) -> str:
    """The first worksheet of an Excel workbook as the CSV text the spreadsheet would save as
    "CSV UTF-8": one line per row (an empty row a blank line, which the readers skip), so a line
    number is the sheet's row number while no cell holds a line break. Formulas give the value
    Excel last computed; a whole number is written without ".0", with the leading zeros a format
    such as "0000" shows (ISCO's "0110"); a date as ISO 8601. ``rows``: the first rows only."""
    from openpyxl import load_workbook  # only for workbooks: 0.2 s to import

    try:
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # a damaged or foreign zip: zipfile, KeyError, openpyxl's own errors
        raise MeloInputError(f"cannot read as an Excel workbook ({type(exc).__name__}: {exc})", path) from None
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    try:
        for row in book.worksheets[0].iter_rows(max_row=rows):
            cells = [_cell_text(cell.value, getattr(cell, "number_format", "General")) for cell in row]
            while cells and not cells[-1]:
                cells.pop()  # formatted but empty cells at the end of the row
            writer.writerow(cells)
    finally:
        book.close()
    return out.getvalue()


_ZEROS = re.compile(r"0+")  # a number format such as "0000": leading zeros shown, as codes need


def _cell_text(value: object, number_format: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 2611.0: a code typed as a number
    if isinstance(value, int):
        return str(value).zfill(len(number_format)) if _ZEROS.fullmatch(number_format) else str(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)


def read_text(path: Path, sheet_rows: int | None = None) -> str:
    """Read a UTF-8 (or marked UTF-16) file, or an Excel workbook's first sheet as CSV text
    (``sheet_text``; ``sheet_rows``: its first rows only); an undecodable byte is reported with its
    line number."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise MeloInputError("file not found", path) from None
    except OSError as exc:
        raise MeloInputError(f"cannot read file ({exc.strerror})", path) from None
    if data.startswith(XLSX_MAGIC) and data.startswith(ODS_MIMETYPE, 30):  # after the zip entry's header
        raise MeloInputError("an OpenDocument spreadsheet (.ods): save it as .xlsx or as 'CSV UTF-8'", path)
    if data.startswith(XLSX_MAGIC):
        return sheet_text(data, path, sheet_rows)
    if data.startswith(XLS_MAGIC):
        raise MeloInputError("an Excel 97-2003 workbook (.xls): save it as .xlsx or as 'CSV UTF-8'", path)
    encoding = text_encoding(data)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        if encoding != "utf-8":
            raise MeloInputError(f"not valid UTF-16 text ({exc.reason} at byte {exc.start})", path) from None
        line = data.count(b"\n", 0, exc.start) + 1
        raise MeloInputError(f"byte 0x{data[exc.start]:02x} is not valid UTF-8 ({UTF8_HINT})", path, line) from None
    return text.removeprefix("\ufeff")


CSV_DELIMITERS = (",", ";", "\t")


def sniff_delimiter(header: str) -> str:
    """A CSV's delimiter from its header line (the first that is not empty): the most frequent of
    comma, semicolon and tab outside quoted names (spreadsheets in many European locales save CSV
    with ';'); a comma when none occurs or on a tie."""
    # past empty lines, as a sheet saves empty rows above its header (no copy of a whole file)
    start = next((i for i, char in enumerate(header) if char not in "\r\n"), len(header))
    end = header.find("\n", start)  # callers may pass a whole file: only its header line is read
    bare = re.sub(r'"[^"]*"', "", header[start:] if end < 0 else header[start:end])
    return max(CSV_DELIMITERS, key=bare.count)  # the first, a comma, on a tie


def header_row(reader: Iterator[list[str]]) -> list[str]:
    """A CSV's header: its first row that is not an empty line, as pyarrow's reader (``link
    --input``) takes it; the reader's ``line_num`` is then the header's line."""
    return next((row for row in reader if row), [])


def read_tsv(path: Path, n_fields: int) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number, fields) of a headerless TSV with exactly ``n_fields`` per line.

    Blank lines are skipped; a trailing carriage return is tolerated.
    """
    for number, raw in enumerate(read_text(path).split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != n_fields:
            raise MeloInputError(f"expected {n_fields} tab-separated fields, found {len(fields)}", path, number)
        yield number, fields


def read_csv_records(path: Path, required: list[str], text: str | None = None) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield (line number, row) of a CSV with a header containing ``required`` columns, separated
    by commas, semicolons or tabs (``sniff_delimiter``).

    The line number is that of the record's first physical line (cells may span lines).
    """
    if text is None:  # a caller that has read it already passes it: a workbook is not parsed twice
        text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sniff_delimiter(text))
    try:
        header = header_row(reader)
        missing = [name for name in required if name not in header]
        if missing:
            raise MeloInputError(
                f"missing column(s) {', '.join(missing)}; found {', '.join(header) or 'no header'}",
                path,
                max(reader.line_num, 1),
            )
        start = reader.line_num + 1
        for cells in reader:  # not csv.DictReader: it skips blank lines unseen, and lines after them were misnumbered
            if cells:
                if len(cells) > len(header):
                    raise MeloInputError("row has more cells than the header", path, start)
                yield start, dict(zip(header, [*cells, *[""] * (len(header) - len(cells))], strict=True))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise MeloInputError(f"malformed CSV ({exc})", path, reader.line_num) from None


def write_csv(path: str | Path, rows: Sequence[Mapping[str, object]], columns: Sequence[str] | None = None) -> None:
    """Write rows (columns: the given ones, else the first row's keys) as CSV to an output path
    (``-`` is stdout; see ``melo_core.output``): a failure leaves any earlier file as it was."""
    fieldnames = list(columns or rows[0])
    with open_output(path) as out:
        writer = csv.DictWriter(out, fieldnames=fieldnames, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
