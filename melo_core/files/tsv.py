"""Strict readers for the benchmark's TSV files and for CSV exports (or an Excel workbook's first
sheet, read as the CSV it would save), and a CSV writer for outputs.

Every problem is reported with the file and 1-based line number, because these files are
often hand-edited or produced by other tools. Every CSV import reads through ``csv_rows``, strict
about quotes: a quote left open stops at the line where it opened, not after swallowing rows.
"""

from __future__ import annotations

import codecs
import csv
import datetime
import io
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from melo_core.errors import MeloInputError
from melo_core.files.output import open_output

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
    from openpyxl.cell.read_only import ReadOnlyCell

    try:
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # a damaged or foreign zip: zipfile, KeyError, openpyxl's own errors
        raise MeloInputError(f"cannot read as an Excel workbook ({type(exc).__name__}: {exc})", path) from None
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    blank: list[tuple[int, int]] = []  # cells written in the file without a value: formatted, or a formula
    try:
        for row in book.worksheets[0].iter_rows(max_row=rows):
            cells = [_cell_text(cell.value, getattr(cell, "number_format", "General")) for cell in row]
            blank += [(cell.row, cell.column) for cell in row if cell.value is None and isinstance(cell, ReadOnlyCell)]
            while cells and not cells[-1]:
                cells.pop()  # formatted but empty cells at the end of the row
            writer.writerow(cells)
    finally:
        book.close()
    if blank:
        _no_formula_without_value(data, path, blank)
    return out.getvalue()


def _no_formula_without_value(data: bytes, path: Path, blank: list[tuple[int, int]]) -> None:
    """Refuse a workbook with a formula whose value was never computed (a workbook written by a
    program, not saved by a spreadsheet): its cell would read as empty, and a row of it alone be
    lost. The first such cell is named."""
    from openpyxl import load_workbook
    from openpyxl.utils import get_column_letter

    wanted = set(blank)
    book = load_workbook(io.BytesIO(data), read_only=True, data_only=False)
    try:
        first, last = blank[0][0], blank[-1][0]
        for row in book.worksheets[0].iter_rows(min_row=first, max_row=last):
            for cell in row:
                if cell.data_type == "f" and (cell.row, cell.column) in wanted:
                    raise MeloInputError(
                        f"cell {get_column_letter(cell.column)}{cell.row}: a formula without a computed value "
                        f"({str(cell.value)[:40]}): open the workbook in a spreadsheet and save it, or save the "
                        "sheet as 'CSV UTF-8'", path, cell.row)  # fmt: skip
    finally:
        book.close()


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


MAX_CELL_CHARS = 32 << 20  # as link --input's read block: a longer cell is a quote left open
_KEPT_CHARS = 1 << 20  # of a record's lines, kept to place a quote error


class _RecordLines:
    """The physical lines a ``csv.reader`` takes, the current record's first ones kept, so that a
    quote error can name the cell and the line where the quote opened."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self.kept: list[str] = []
        self._size = 0

    def __iter__(self) -> _RecordLines:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        if self._size < _KEPT_CHARS:
            self.kept.append(line)
            self._size += len(line)
        return line

    def restart(self) -> None:
        self.kept.clear()
        self._size = 0


def _line_breaks(text: str) -> int:
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def _quote_fault(record: str, delimiter: str) -> tuple[int, int | None]:
    """Where a strict ``csv.reader`` failed in a record's text: the cell (0-based) and the offset of
    the quote that opened it (None: the cell is not quoted). A quote opens a cell only at its
    start; in it, ``""`` is a quote; the closing quote must be followed by the delimiter or a line
    break. The first cell whose quote is never closed, or is followed by text, is at fault."""
    cell, at_start, index = 0, True, 0
    while index < len(record):
        char = record[index]
        if at_start and char == '"':
            opened, search = index, index + 1
            while True:
                close = record.find('"', search)
                if close < 0:
                    return cell, opened  # never closed
                if record.startswith('"', close + 1):
                    search = close + 2  # a doubled quote inside the cell
                    continue
                if record[close + 1 : close + 2] not in (delimiter, "\n", "\r", ""):
                    return cell, opened  # text after the closing quote
                index = close + 1
                break
            at_start = False
            continue
        if char == delimiter:
            cell, at_start = cell + 1, True
        elif char not in "\r\n":
            at_start = False
        index += 1
    return cell, None


def csv_rows(path: Path, lines: Iterable[str], delimiter: str,
             single_line: Collection[str] = ()) -> Iterator[tuple[int, list[str]]]:  # fmt: skip
    """Yield (line number, cells) of each record of a CSV that is not an empty line, the header
    first; the line is the record's first physical line (a quoted cell may span lines, as ESCO's
    altLabels and descriptions do).

    A quote left open swallows the rows after it into one cell, so the reader is strict, and the
    line where the quote opened and its column are named, for a quote never closed (to the end of
    the file), one closed by a later quote with text after it (``"a ... b"c``), a cell longer than
    ``MAX_CELL_CHARS``, and a line break in a cell of a ``single_line`` column (a code, a label, a
    title: there it is a quote left open that a later quote closed).

    ``lines``: a text opened with ``newline=""`` (or ``io.StringIO(text, newline="")``)."""
    if csv.field_size_limit() < MAX_CELL_CHARS:  # the default, 131,072, is less than a 10 MB title
        csv.field_size_limit(MAX_CELL_CHARS)
    source = _RecordLines(lines)
    reader = csv.reader(source, delimiter=delimiter, strict=True)
    header: list[str] | None = None
    checked: list[tuple[int, str]] = []
    start = 1
    while True:
        source.restart()
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise _malformed(path, str(exc), start, reader.line_num, "".join(source.kept), delimiter,
                             header) from None  # fmt: skip
        if cells:
            if header is None:
                header = cells
                checked = [(index, name) for index, name in enumerate(header) if name in single_line]
            for index, name in checked:
                if index < len(cells) and ("\n" in cells[index] or "\r" in cells[index]):
                    opened = start + sum(_line_breaks(cell) for cell in cells[:index])
                    raise MeloInputError(f"column {name!r}: line break inside the cell, up to line "
                                         f"{reader.line_num} (a quote left open?)", path, opened)  # fmt: skip
            yield start, cells
        start = reader.line_num + 1


def _malformed(path: Path, error: str, start: int, end: int, record: str, delimiter: str,
               header: list[str] | None) -> MeloInputError:  # fmt: skip
    cell, opened = _quote_fault(record, delimiter)
    column = repr(header[cell]) if header is not None and cell < len(header) else f"#{cell + 1}"
    line = start + _line_breaks(record[: opened or 0])
    if "field larger than field limit" in error:
        return MeloInputError(f"column {column}: a cell longer than {MAX_CELL_CHARS:,} characters from this line "
                              "(a quote left open?)", path, line)  # fmt: skip
    if opened is None:
        return MeloInputError(f"malformed CSV ({error})", path, end)
    if "unexpected end of data" in error:
        return MeloInputError(f"column {column}: a quote opened on this line is never closed (it would swallow "
                              f"the {end - line} line(s) after it)", path, line)  # fmt: skip
    closes = "" if end == line else f" on line {end}"
    return MeloInputError(f"column {column}: a quote opened on this line closes{closes} with text after it "
                          '(a quote left open, or a quote inside a quoted cell not doubled as "")', path, line)  # fmt: skip


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


def read_csv_records(path: Path, required: list[str], text: str | None = None,
                     single_line: Collection[str] = ()) -> Iterator[tuple[int, dict[str, str]]]:  # fmt: skip
    """Yield (line number, row) of a CSV with a header containing ``required`` columns, separated
    by commas, semicolons or tabs (``sniff_delimiter``), read by ``csv_rows`` (strict about quotes;
    no line break in a ``single_line`` column).

    The line number is that of the record's first physical line (cells may span lines).
    """
    if text is None:  # a caller that has read it already passes it: a workbook is not parsed twice
        text = read_text(path)
    rows = csv_rows(path, io.StringIO(text, newline=""), sniff_delimiter(text), single_line)
    header_line, header = next(rows, (1, []))
    missing = [name for name in required if name not in header]
    if missing:
        raise MeloInputError(
            f"missing column(s) {', '.join(missing)}; found {', '.join(header) or 'no header'}", path, header_line
        )
    # not csv.DictReader: it skips blank lines unseen, and lines after them were misnumbered
    for start, cells in rows:
        if len(cells) > len(header):
            raise MeloInputError("row has more cells than the header", path, start)
        yield start, dict(zip(header, [*cells, *[""] * (len(header) - len(cells))], strict=True))


def write_csv(path: str | Path, rows: Sequence[Mapping[str, object]], columns: Sequence[str] | None = None) -> None:
    """Write rows (columns: the given ones, else the first row's keys) as CSV to an output path
    (``-`` is stdout; see ``melo_core.files.output``): a failure leaves any earlier file as it was."""
    fieldnames = list(columns or rows[0])
    with open_output(path) as out:
        writer = csv.DictWriter(out, fieldnames=fieldnames, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
