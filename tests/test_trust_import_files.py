"""Issue 87, reading files: one strict CSV reader for every import, so a quote left open stops the
import at its line and column instead of swallowing the rows after it; a workbook's formula
without a computed value is refused, not dropped; titles and labels are checked on reading (one
length limit, no control characters); a SKOS CSV round trip keeps labels byte for byte.

Real data: the Norwegian crosswalk (nor_no), the ESCO CSV export, through the CLI on SQLite and
PostgreSQL; ``link --input`` on the Norwegian MELO corpus with the `lexical` pipeline."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from db.imports import ImportReport, check_accounted, read_term_file
from db.testing import run_cli, run_cli_ok, snapshot
from db.testing import run_cli_refused as rejected
from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import load_crosswalk
from melo_core.esco.taxonomy import taxonomy_from_esco_csv
from melo_core.files.text_limits import MAX_LABEL
from melo_core.files.tsv import read_csv_records
from melo_core.linking.bulk import InputBatches
from tests.conftest import write_workbook

cli, ok = run_cli, run_cli_ok


@pytest.fixture(scope="module")
def nor_titles(melo_data: Path) -> dict[str, str]:
    """Code -> title of the Norwegian crosswalk (real terms)."""
    raw = json.loads((melo_data / "raw/crosswalks_standard/nor_no/crosswalk.json").read_text(encoding="utf-8"))
    return {code: entry["title"].strip() for code, entry in raw.items() if entry.get("title", "").strip()}


def csv_lines(rows: list[list[str]]) -> list[str]:
    """Each row as the CSV text a spreadsheet writes for it (quoted where needed)."""
    lines = []
    for row in rows:
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerow(row)
        lines.append(out.getvalue())
    return lines


def open_quote(line: str, cell: str) -> str:
    """``line`` with a quote opened before ``cell`` (an unquoted cell of it) and never closed there."""
    assert f",{cell}," in line or line.startswith(f"{cell},") or line.endswith(f",{cell}\n"), (line, cell)
    if line.startswith(f"{cell},"):
        return '"' + line
    if f",{cell}," in line:
        return line.replace(f",{cell},", f',"{cell},', 1)
    return line[: -len(cell) - 1] + f'"{cell}\n'


# -- a quote left open --------------------------------------------------------------------------


def test_an_open_quote_in_a_terms_csv_description_stops_at_its_line_not_after_one_term(
    store_url: str, nor_titles: dict[str, str], tmp_path: Path
) -> None:
    terms = list(nor_titles.items())[:4]
    rows = [["code", "label", "description"], *([code, title, f"described {n}"] for n, (code, title) in
                                                 enumerate(terms))]  # fmt: skip
    lines = csv_lines(rows)
    lines[2] = open_quote(lines[2], "described 1")  # the rows after it became one description
    bad = tmp_path / "terms.csv"
    bad.write_text("".join(lines), encoding="utf-8")
    before = snapshot(store_url)
    message = rejected("import-terms", "--scheme", "nor", "--csv", str(bad), "--db", store_url)
    assert message == (f"error: {bad}:3: column 'description': a quote opened on this line is never closed "
                       "(it would swallow the 2 line(s) after it)")  # fmt: skip
    assert snapshot(store_url) == before  # nothing written
    # A description holding line breaks, quoted as a spreadsheet writes it, is read whole.
    rows[2][2] = "first line\nsecond line, with a comma"
    good = tmp_path / "good.csv"
    good.write_text("".join(csv_lines(rows)), encoding="utf-8")
    assert "4 terms added, 0 updated, 0 unchanged (4 read from" in ok(
        "import-terms", "--scheme", "nor", "--csv", str(good), "--db", store_url
    )


def test_a_quote_closed_by_a_later_quote_names_the_line_it_opened_on(tmp_path: Path) -> None:
    """The quote left open is closed by the next quote of the file: text follows it."""
    path = tmp_path / "terms.csv"
    path.write_text('code,label,description\n1,lege,"opened\n2,sykepleier,plain\n3,kokk,"quoted"\n', encoding="utf-8")
    with pytest.raises(MeloInputError) as caught:
        list(read_csv_records(path, ["code", "label"]))
    assert (caught.value.line, caught.value.message) == (2, "column 'description': a quote opened on this line "
            'closes on line 4 with text after it (a quote left open, or a quote inside a quoted cell not doubled as "")')  # fmt: skip


def esco_slice(esco_csv: Path, folder: Path, occupations: int) -> tuple[Path, list[list[str]]]:
    """A folder with the first ``occupations`` rows of the real ``occupations_en.csv``."""
    with (esco_csv / "occupations_en.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))[: occupations + 1]
    folder.mkdir()
    (folder / "occupations_en.csv").write_text("".join(csv_lines(rows)), encoding="utf-8")
    return folder, rows


def test_an_open_quote_in_an_esco_csv_stops_the_import_and_the_real_export_reads_as_before(
    store_url: str, esco_csv: Path, tmp_path: Path
) -> None:
    folder, rows = esco_slice(esco_csv, tmp_path / "esco", 5)
    lines = csv_lines(rows)
    lines[3] = open_quote(lines[3], rows[3][rows[0].index("status")])
    # the line of the quote: the third occupation's altLabels before it span lines
    opened_on = 1 + "".join(lines[:3]).count("\n") + lines[3][: lines[3].index(',"released')].count("\n")
    assert lines[3].count("\n") > 1 and opened_on > 1 + "".join(lines[:3]).count("\n")
    (folder / "occupations_en.csv").write_text("".join(lines), encoding="utf-8")
    before = snapshot(store_url)
    message = rejected("import-taxonomy", "--esco-csv", str(folder), "--db", store_url, "--quiet")
    assert message.startswith(f"error: {folder / 'occupations_en.csv'}:{opened_on}: column 'status': a quote opened ")
    assert snapshot(store_url) == before
    # The real export, whose altLabels, descriptions and scheme lists span lines, reads as a
    # lenient reader reads it: every concept, every label.
    taxonomy = taxonomy_from_esco_csv(esco_csv)
    lenient: dict[str, list[str]] = {}
    for name in ("ISCOGroups_en.csv", "occupations_en.csv"):
        with (esco_csv / name).open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                alt = [a.strip() for a in row["altLabels"].split("\n") if a.strip()]
                lenient[row["conceptUri"]] = [row["preferredLabel"].strip(), *alt]
    assert len(taxonomy.concepts) == len(lenient) == 3561
    assert {c.uri: [c.labels["en"].preferred, *c.labels["en"].alternative] for c in taxonomy.concepts} == lenient


def test_an_open_quote_in_a_skos_csv_source_label_stops_the_import(store_url: str, melo_data: Path,
                                                                    tmp_path: Path) -> None:  # fmt: skip
    ok("import-terms", "--scheme", "nor_no", "--crosswalk", "nor_no", "--data", str(melo_data), "--with-decisions",
       "--db", store_url)  # fmt: skip
    exported = tmp_path / "nor.csv"
    ok("export", "--scheme", "nor_no", "--format", "skos-csv", "--out", str(exported), "--db", store_url)
    with exported.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    lines = csv_lines(rows)
    assert "".join(lines) == exported.read_text(encoding="utf-8")  # one line per row: line = index + 1
    # A term's first row whose cells need no quotes, with rows after it and no quote in them: the
    # quote opened there runs to the end of the file, one label swallowing the rows (silent before).
    plain = next(i for i in range(len(rows) - 3, 0, -1)
                 if lines[i] == ",".join(rows[i]) + "\n" and '"' not in "".join(lines[i + 1 :])
                 and rows[i][1] != rows[i - 1][1])  # a term's first row: its label is taken as given  # fmt: skip
    lines[plain] = open_quote(lines[plain], rows[plain][2])
    bad = tmp_path / "bad.csv"
    bad.write_text("".join(lines), encoding="utf-8")
    before = snapshot(store_url)
    message = rejected("import-terms", "--scheme", "copy", "--skos-csv", str(bad), "--db", store_url)
    assert message.startswith(f"error: {bad}:{plain + 1}: column 'source_label': a quote opened on this line ")
    assert snapshot(store_url) == before


def titles_csv(path: Path, titles: list[str]) -> Path:
    path.write_text("".join(csv_lines([["code", "title"], *([str(n), t] for n, t in enumerate(titles))])),
                    encoding="utf-8")  # fmt: skip
    return path


def link_args(data: Path, source: Path, out: Path, *more: str) -> list[str]:
    return ["link", "--data", str(data), "--pipeline", "lexical", "--input", str(source), "--column", "title",
            "--out", str(out), "--top", "3", "--quiet", *more]  # fmt: skip


def test_link_input_with_an_open_quote_stops_at_its_line_instead_of_merging_titles(
    nor_data: Path, nor_titles: dict[str, str], tmp_path: Path
) -> None:
    source = titles_csv(tmp_path / "ads.csv", list(nor_titles.values())[:5])
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2].replace(",", ',"', 1)  # the second title's quote is never closed
    source.write_text("".join(lines), encoding="utf-8")
    for out in (tmp_path / "links.csv", tmp_path / "folder"):
        message = rejected(*link_args(nor_data, source, out))
        assert message == (f"error: {source}:3: column 'title': a quote opened on this line is never closed "
                           "(it would swallow the 3 line(s) after it)")  # fmt: skip
        assert not out.exists()
    # Closed by a later quote: the title holds line breaks (a title is one line).
    lines[5] = lines[5].replace(",", ',"', 1).replace("\n", '"\n')
    source.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(MeloInputError) as caught:
        InputBatches(source, "title", 2)
    assert (caught.value.line, caught.value.message) == (3, "column 'title': a quote opened on this line closes "
            'on line 6 with text after it (a quote left open, or a quote inside a quoted cell not doubled as "")')  # fmt: skip
    lines[5] = lines[5].replace(',"', ",", 1)  # now closed at the end of line 6: a title of 4 lines
    source.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(MeloInputError) as caught:
        InputBatches(source, "title", 2)
    assert (caught.value.line, caught.value.message) == (
        3, "column 'title': line break inside the cell, up to line 6 (a quote left open?)")  # fmt: skip


def test_a_multi_line_cell_in_another_column_of_link_input_is_read_and_counted(tmp_path: Path) -> None:
    source = tmp_path / "ads.csv"
    source.write_text('title,text\nlege,"ad text\nover lines"\nkokk,short\n', encoding="utf-8")
    batches = InputBatches(source, "title", 10)
    assert batches.total_rows == 2
    assert [t.column("title").to_pylist() for _, t in batches] == [["lege", "kokk"]]


# -- a workbook's formula without a computed value ----------------------------------------------


def test_a_workbook_formula_without_a_computed_value_is_refused_naming_its_cell(
    store_url: str, nor_data: Path, tmp_path: Path
) -> None:
    """openpyxl (and other programs) write formulas without computing them: the cell reads as
    empty, and a row holding only it was dropped uncounted."""
    sheet = write_workbook(tmp_path / "ads.xlsx", [["title"], ["lege"], ['=CONCAT("syke", "pleier")'], ["kokk"]])
    message = rejected(*link_args(nor_data, sheet, tmp_path / "links.csv"))
    assert message.startswith(f"error: {sheet}:3: cell A3: a formula without a computed value (=CONCAT(")
    assert not (tmp_path / "links.csv").exists()
    terms = write_workbook(tmp_path / "terms.xlsx", [["code", "label"], ["1", "lege"], ["2", "=B2"]])
    before = snapshot(store_url)
    message = rejected("import-terms", "--scheme", "nor", "--csv", str(terms), "--db", store_url)
    assert message.startswith(f"error: {terms}:3: cell B3: a formula without a computed value (=B2)")
    assert snapshot(store_url) == before
    # Formatted cells without a value are empty cells, as before.
    styled = write_workbook(tmp_path / "styled.xlsx", [["title"], ["lege"]], styled_empty_column=2)
    assert [t.column("title").to_pylist() for _, t in InputBatches(styled, "title", 10)] == [["lege"]]


# -- titles and labels checked on reading -------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "reason"),
    [
        ("lege " * 2_000_000, f"longer than {MAX_LABEL} characters"),
        ("lege\nkokk", "holds a line break"),
        ("lege\x00", "holds a control character U+0000"),
    ],
    ids=["10MB", "newline", "NUL"],
)
def test_a_crosswalk_json_with_a_bad_title_is_refused_with_its_line_and_nothing_written(
    store_url: str, nor_titles: dict[str, str], tmp_path: Path, title: str, reason: str
) -> None:
    entries = {code: {"title": t, "description": "", "matches": {}} for code, t in list(nor_titles.items())[:3]}
    code = list(entries)[1]
    entries[code]["title"] = title
    path = tmp_path / "crosswalk.json"
    path.write_text(json.dumps(entries, ensure_ascii=False, indent=1), encoding="utf-8")
    text = path.read_text(encoding="utf-8")
    title_line = 1 + text[: text.index(json.dumps(title))].count("\n")
    before = snapshot(store_url)
    message = rejected("import-terms", "--scheme", "nor", "--crosswalk", str(path), "--db", store_url)
    assert message.startswith(f'error: {path}:{title_line}: term {code!r}: field "title": title {reason}')
    assert snapshot(store_url) == before
    with pytest.raises(MeloInputError, match=f'term {code!r}: field "title"'):
        load_crosswalk(path)


@pytest.mark.parametrize(
    ("label", "words"),
    [
        ("x" * (MAX_LABEL + 1), f"longer than {MAX_LABEL} characters"),
        ("lege\tkokk", "control character U+0009"),
        ("lege\x1b[31m", "control character U+001B"),
    ],
    ids=["long", "tab", "escape"],
)
def test_a_terms_csv_with_a_bad_label_is_refused(store_url: str, tmp_path: Path, label: str, words: str) -> None:
    path = tmp_path / "terms.csv"
    path.write_text("".join(csv_lines([["code", "label"], ["1", "lege"], ["2", label]])), encoding="utf-8")
    before = snapshot(store_url)
    message = rejected("import-terms", "--scheme", "nor", "--csv", str(path), "--db", store_url)
    assert message.startswith(f"error: {path}:3: column 'label': label ") and words in message
    assert snapshot(store_url) == before


def test_an_esco_csv_row_repeating_a_concept_is_refused_not_merged(esco_csv: Path, tmp_path: Path) -> None:
    """A second row of one concept replaced the first's labels: two rows read, one concept kept."""
    folder, rows = esco_slice(esco_csv, tmp_path / "esco", 3)
    lines = csv_lines([*rows, rows[1]])
    (folder / "occupations_en.csv").write_text("".join(lines), encoding="utf-8")
    with pytest.raises(MeloInputError) as caught:
        taxonomy_from_esco_csv(folder)
    assert caught.value.line == 1 + "".join(lines[:4]).count("\n")
    assert caught.value.message == f"column 'conceptUri': {rows[1][1]} already on line 2"


def test_an_import_that_does_not_account_for_every_row_read_fails(tmp_path: Path) -> None:
    """The CLI checks that every term and decision read was imported or already there."""
    path = tmp_path / "terms.csv"
    path.write_text("code,label\n1,lege\n2,kokk\n", encoding="utf-8")
    source = read_term_file(path, "csv")
    assert (source.rows, len(source.terms)) == (2, 2)
    check_accounted(source, ImportReport("scheme s", added=1, unchanged=1))
    with pytest.raises(MeloInputError, match="2 rows read gave 2 terms and 0 decisions, but the import accounts "
                       "for 1 and 0"):  # fmt: skip
        check_accounted(source, ImportReport("scheme s", added=1))


def test_an_esco_csv_with_a_bad_label_is_refused(store_url: str, esco_csv: Path, tmp_path: Path) -> None:
    folder, rows = esco_slice(esco_csv, tmp_path / "esco", 3)
    column = rows[0].index("altLabels")
    rows[2][column] += "\nsjef\x07"
    (folder / "occupations_en.csv").write_text("".join(csv_lines(rows)), encoding="utf-8")
    line = 1 + sum(text.count("\n") for text in csv_lines(rows[:2]))
    before = snapshot(store_url)
    message = rejected("import-taxonomy", "--esco-csv", str(folder), "--db", store_url, "--quiet")
    assert message.startswith(f"error: {folder / 'occupations_en.csv'}:{line}: column 'altLabels': label ")
    assert "control character U+0007" in message
    assert snapshot(store_url) == before


def test_link_input_rejects_titles_with_control_characters_and_counts_every_row(
    nor_data: Path, nor_titles: dict[str, str], tmp_path: Path
) -> None:
    """Read == linked + rejected, for the file output (--rejects) and the folder output."""
    good = list(nor_titles.values())[:3]
    titles = [good[0], "lege\x00", good[1], "kokk\x1b", "x" * (MAX_LABEL + 1), good[2]]
    sheet_titles = [good[0], "lege\nkokk", good[1]]  # a cell's line break (Alt+Enter) is no quote left open
    source = titles_csv(tmp_path / "ads.csv", titles)
    sheet = write_workbook(tmp_path / "ads.xlsx", [["title"], *([t] for t in sheet_titles)])
    expected = {source: [("1", "holds a control character U+0000"), ("3", "holds a control character U+001B"),
                         ("4", f"longer than {MAX_LABEL} characters")],
                sheet: [("1", "holds a line break")]}  # fmt: skip
    for path, rows in ((source, titles), (sheet, sheet_titles)):
        rejects = tmp_path / f"rejects-{path.suffix[1:]}.csv"
        out = tmp_path / f"links-{path.suffix[1:]}.csv"
        code, _, err = cli(*[a for a in link_args(nor_data, path, out, "--rejects", str(rejects)) if a != "--quiet"])
        assert code == 0, err
        listed = [(r["row"], r["reason"]) for r in csv.DictReader(rejects.open(encoding="utf-8"))]
        assert listed == expected[path]
        linked = {int(r["row"]) for r in csv.DictReader(out.open(encoding="utf-8"))}
        assert len(linked) + len(listed) == len(rows)
        assert f"linked {len(rows) - len(listed)} of {len(rows)} row(s); {len(listed)} rejected" in err


# -- the SKOS CSV round trip --------------------------------------------------------------------


SKOS_HEADER = ("source_uri,source_code,source_label,relation,target_uri,target_label,curator,decided_at,"
               "original_author,original_date")  # fmt: skip


@pytest.fixture
def spaced_skos(tmp_path: Path) -> Iterator[Path]:
    """A SKOS CSV whose labels start or end with spaces (kept), one decided."""
    path = tmp_path / "spaced.csv"
    path.write_text(
        f"{SKOS_HEADER}\n"
        "urn:x:1,1,  sykepleier ,skos:exactMatch,http://data.europa.eu/esco/occupation/a,  nurse,alice,"
        "2025-01-31T09:30:00Z,,\n"
        "urn:x:2,2, lege,,,,,,,\n"
        "urn:x:3,3,kokk  ,,,,,,,\n",
        encoding="utf-8",
    )
    yield path


def test_a_skos_csv_round_trip_keeps_labels_with_spaces_byte_for_byte(
    store_url: str, spaced_skos: Path, tmp_path: Path
) -> None:
    ok("import-terms", "--scheme", "first", "--skos-csv", str(spaced_skos), "--db", store_url)
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    ok("export", "--scheme", "first", "--format", "skos-csv", "--undecided", "--out", str(first), "--db", store_url)
    ok("import-terms", "--scheme", "second", "--skos-csv", str(first), "--db", store_url)
    ok("export", "--scheme", "second", "--format", "skos-csv", "--undecided", "--out", str(second), "--db", store_url)
    labels = [(r["source_label"], r["target_label"]) for r in rows(first)]
    assert labels == [("  sykepleier ", "  nurse"), (" lege", ""), ("kokk  ", "")]
    # The same file but for who imported it and when (each import is its own curator).
    imported = ("curator", "decided_at")
    assert [{k: v for k, v in r.items() if k not in imported} for r in rows(second)] == [
        {k: v for k, v in r.items() if k not in imported} for r in rows(first)
    ]


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_label_with_a_tab_never_enters_the_store_so_never_leaves_it(
    store_url: str, spaced_skos: Path, tmp_path: Path
) -> None:
    """A tab is a control character: refused by every reader (the formula guard's ``'\\t...``
    included), so the exporter never writes one."""
    text = spaced_skos.read_text(encoding="utf-8")
    for label in ("'\tlege", "lege\t", "'\t lege"):
        bad = tmp_path / "tab.csv"
        bad.write_text(text.replace(" lege", label, 1), encoding="utf-8")
        before = snapshot(store_url)
        message = rejected("import-terms", "--scheme", "s", "--skos-csv", str(bad), "--db", store_url)
        assert message.startswith(f"error: {bad}:3: column 'source_label': label holds a control character U+0009")
        assert snapshot(store_url) == before
