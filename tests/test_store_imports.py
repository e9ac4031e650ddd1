"""Imports into the crosswalk store through the CLI (``python -m melo_core import-...``), run
in-process: real data slices, idempotence, and bad files rejected with line and column, exit
code 2 and nothing written."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from db.store import Store
from db.testing import run_cli, run_cli_ok, snapshot
from db.testing import run_cli_refused as rejected
from melo_core.esco.taxonomy import taxonomy_from_esco_csv, taxonomy_from_melo
from tests.conftest import write_workbook

cli, ok = run_cli, run_cli_ok


def counts(url: str) -> dict[str, int]:
    return {name: len(rows) for name, rows in snapshot(url).items() if name != "alembic_version"}


# -- taxonomy ---------------------------------------------------------------------------------


@pytest.fixture
def melo_slice(datasets_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A MELO data folder holding one real dataset (Norwegian corpus)."""
    root = tmp_path / "melo"
    (root / "processed" / "melo").mkdir(parents=True)
    (root / "processed" / "melo" / "nor_q_no_c_no").symlink_to(datasets_dir / "nor_q_no_c_no")
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    return root


def test_import_taxonomy_from_melo_corpora_is_idempotent(store_url: str, melo_slice: Path) -> None:
    out = ok("import-taxonomy", "--data", str(melo_slice), "--db", store_url, "--quiet")
    taxonomy = taxonomy_from_melo(melo_slice)
    n_labels = sum(len(labels.surface_forms()) for c in taxonomy.concepts for labels in c.labels.values())
    assert f"{len(taxonomy)} concepts, {n_labels} labels" in out
    assert counts(store_url)["concepts"] == len(taxonomy) and counts(store_url)["labels"] == n_labels
    with Store(store_url) as store:
        [info] = store.taxonomies()
        assert (info.name, info.version, info.concepts) == ("esco", "melo-union", len(taxonomy))
        concept = taxonomy.concepts[10]
        stored = store.concept(concept.uri)
        assert stored is not None
        assert stored.labels["no"]["preferred"] == [concept.labels["no"].preferred]
        assert stored.labels["no"].get("alternative", []) == list(concept.labels["no"].alternative)
    before = snapshot(store_url)
    code, out, err = cli("import-taxonomy", "--data", str(melo_slice), "--db", store_url)
    assert code == 0 and "unchanged" in out
    assert "importing taxonomy" in err  # the progress bar
    assert snapshot(store_url) == before


@pytest.fixture
def esco_slice(esco_csv: Path, tmp_path: Path) -> Path:
    """A few rows of the real ESCO CSV export, in a folder named as the ESCO portal names it."""
    folder = tmp_path / "ESCO dataset - v1.2.0 - classification - en - csv"
    folder.mkdir()
    for name, keep in (("occupations_en.csv", 25), ("ISCOGroups_en.csv", 20)):
        with (esco_csv / name).open(encoding="utf-8", newline="") as source:
            reader = csv.DictReader(source)
            rows = list(reader)
        chosen = rows[:keep] + [r for r in rows[keep:] if r.get("hiddenLabels", "").strip()]
        with (folder / name).open("w", encoding="utf-8", newline="") as target:
            writer = csv.DictWriter(target, fieldnames=reader.fieldnames or [])
            writer.writeheader()
            writer.writerows(chosen)
    return folder


def test_import_taxonomy_from_esco_csv(store_url: str, esco_slice: Path) -> None:
    ok("import-taxonomy", "--esco-csv", str(esco_slice), "--db", store_url, "--quiet")
    taxonomy = taxonomy_from_esco_csv(esco_slice)
    hidden = [c for c in taxonomy.concepts if c.labels["en"].hidden]
    assert hidden, "the slice should include hidden labels"
    with Store(store_url) as store:
        [info] = store.taxonomies()
        assert (info.version, info.concepts) == ("v1.2.0", len(taxonomy))
        stored = store.concept(hidden[0].uri)
        assert stored is not None
        assert stored.labels["en"]["hidden"] == list(hidden[0].labels["en"].hidden)
        assert stored.description == hidden[0].description and stored.description
        assert stored.isco_code == hidden[0].isco_code
        assert store.concept_labels([hidden[0].uri]) == {hidden[0].uri: hidden[0].labels["en"].preferred}
    before = snapshot(store_url)
    assert "unchanged" in ok("import-taxonomy", "--esco-csv", str(esco_slice), "--db", store_url, "--quiet")
    assert snapshot(store_url) == before
    # Other content under the same name and version replaces the stored one.
    smaller = esco_slice.parent / "smaller"
    smaller.mkdir()
    (smaller / "occupations_en.csv").write_text(
        'conceptUri,iscoGroup,preferredLabel,altLabels\nhttp://data.europa.eu/esco/occupation/x,1234,x,"y\nz"\n',
        encoding="utf-8",
    )
    # (It removes nearly every concept: --replace says so is meant; tests/test_trust_store.py.)
    out = ok("import-taxonomy", "--esco-csv", str(smaller), "--version", "v1.2.0", "--replace", "--db", store_url,
             "--quiet")  # fmt: skip
    assert "replaced" in out
    assert counts(store_url)["concepts"] == 1 and counts(store_url)["labels"] == 3


def test_import_taxonomy_of_a_missing_folder_is_rejected(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    line = rejected("import-taxonomy", "--esco-csv", str(tmp_path / "nowhere"), "--db", url, "--quiet")
    assert "ESCO CSV folder not found" in line
    assert not (tmp_path / "melo.db").exists()  # the store is not even created


# -- terms from CSV ---------------------------------------------------------------------------


def test_import_terms_csv_is_idempotent_and_updates_changed_terms(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "titles.csv"
    path.write_text(
        "code,label,description,lang\nA1,Baker,Bakes,nb\nA 2,Data scientist,,en\nA3,Nurse,Cares,\n", encoding="utf-8"
    )
    out = ok("import-terms", "--scheme", "titles", "--csv", str(path), "--kind", "job-titles", "--db", store_url)
    assert "3 terms added" in out
    before = snapshot(store_url)
    assert "0 terms added, 0 updated, 3 unchanged" in ok(
        "import-terms", "--scheme", "titles", "--csv", str(path), "--db", store_url
    )
    assert snapshot(store_url) == before
    with Store(store_url) as store:
        [scheme] = store.schemes()
        assert (scheme.kind, scheme.language, scheme.terms) == ("job-titles", None, 3)
        term = store.term("titles", "A 2")
        assert term is not None
        assert (term.uri, term.label, term.language) == ("urn:melo:scheme:titles:A%202", "Data scientist", "en")
    # the same terms from a spreadsheet saved with ';' (many European locales) change nothing
    path.write_text('code;label;description;lang\nA1;Baker;Bakes;nb\n"A 2";Data scientist;;en\nA3;Nurse;Cares;\n',
                    encoding="utf-8")  # fmt: skip
    assert "0 terms added, 0 updated, 3 unchanged" in ok(
        "import-terms", "--scheme", "titles", "--csv", str(path), "--db", store_url
    )
    # and from its "Unicode Text": UTF-16 with a byte-order mark, tab-separated
    path.write_text("code\tlabel\tdescription\tlang\nA1\tBaker\tBakes\tnb\nA 2\tData scientist\t\ten\nA3\tNurse\tCares\t\n",
                    encoding="utf-16")  # fmt: skip
    assert "0 terms added, 0 updated, 3 unchanged" in ok(
        "import-terms", "--scheme", "titles", "--csv", str(path), "--db", store_url
    )
    # and from an Excel workbook's first sheet (its header on row 2, empty cells, a row that stops
    # after its description)
    sheet = write_workbook(tmp_path / "titles.xlsx", [[None], ["code", "label", "description", "lang"], ["A1", "Baker", "Bakes", "nb"],
                                                      ["A 2", "Data scientist", None, "en"], ["A3", "Nurse", "Cares"]])  # fmt: skip
    assert "0 terms added, 0 updated, 3 unchanged" in ok(
        "import-terms", "--scheme", "titles", "--csv", str(sheet), "--db", store_url
    )
    path.write_text("code,label\nA1,Master baker\n", encoding="utf-8")
    assert "0 terms added, 1 updated, 0 unchanged" in ok(
        "import-terms", "--scheme", "titles", "--csv", str(path), "--db", store_url
    )
    with Store(store_url) as store:
        a1 = store.term("titles", "A1")
        assert a1 is not None and (a1.label, a1.description, a1.language) == ("Master baker", "Bakes", "nb")
        assert len(store.terms("titles")) == 3  # terms missing from the file stay
    # A scheme's settings are fixed once created.
    line = rejected(
        "import-terms", "--scheme", "titles", "--csv", str(path), "--kind", "terminology", "--db", store_url
    )
    assert "exists with kind 'job-titles'" in line
    # codes typed as numbers in a sheet read as shown: not "2612.0", and "0110" where the format
    # shows four digits; a date reads as ISO 8601
    codes = write_workbook(tmp_path / "codes.xlsx", [["code", "label", "description"], [110, "Officers", None],
                                                     [2611, "Lawyers", None], [2612.0, "Judges", datetime(2024, 5, 1)]],
                           number_formats={"A2": "0000"})  # fmt: skip
    assert "3 terms added" in ok("import-terms", "--scheme", "isco", "--csv", str(codes), "--db", store_url)
    with Store(store_url) as store:
        assert [(t.code, t.description) for t in store.terms("isco")] == [
            ("0110", ""), ("2611", ""), ("2612", "2024-05-01T00:00:00")]  # fmt: skip
    # a bad cell is reported with its row in the sheet
    line = rejected("import-terms", "--scheme", "isco", "--csv",
                    str(write_workbook(tmp_path / "bad.xlsx", [["code", "label"], ["A", "Alpha"], [None, None], ["B", None]])),
                    "--db", store_url)  # fmt: skip
    assert "bad.xlsx:4" in line and "empty label" in line


def test_base_uri_gives_the_terms_uris(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    path = tmp_path / "t.csv"
    path.write_text("code,label\n0110/1,Officer\nhttps://example.org/x,Already a URI\n", encoding="utf-8")
    ok("import-terms", "--scheme", "isco-no", "--csv", str(path), "--base-uri", "https://example.org/no/", "--db", url,
       "--create")  # fmt: skip
    with Store(url) as store:
        assert [t.uri for t in store.terms("isco-no")] == ["https://example.org/no/0110%2F1", "https://example.org/x"]


BAD_CSVS = [
    # (content, line, column or None, words in the message)
    (b"code,title\nA,Alpha\n", 1, "title", "unknown column"),
    (b"\n\ncode,title\nA,Alpha\n", 3, "title", "unknown column"),  # the header after empty lines, as pyarrow reads it
    (b"code,description\nA,Alpha\n", 1, None, "missing column(s) label"),
    (b"code,label,label\nA,Alpha,B\n", 1, "label", "twice"),
    (b"code,label\nA,Alpha\nB,\n", 3, "label", "empty label"),
    (b"code,label\nA,Alpha\n\nB,\n", 4, "label", "empty label"),  # after a blank line (line 3 before)
    (b"code,label\nA,Alpha\n,Beta\n", 3, "code", "empty code"),
    (b"code,label\nA,Alpha\nA,Again\n", 3, "code", "duplicate code 'A' (first on line 2)"),
    (b"code,label,lang\nA,Alpha,no\nB,Beta,english\n", 3, "lang", "not a language code"),
    (b'code,label,description\nA,Alpha,"two\nlines"\nB,,\n', 4, "label", "empty label"),  # line of the record's start
    (b"code,label\nA,Alpha,extra\n", 2, None, "more cells than the header"),
    (b"code,label\nA,Caf\xe9\n", 2, None, "not valid UTF-8"),
    (b'code,label\nA,"unclosed\nB,Beta\n', 2, "label", "a quote opened on this line is never closed"),
    (b"code,label\n", 1, None, "no terms"),
]


@pytest.mark.parametrize(("content", "line", "column", "words"), BAD_CSVS)
def test_a_bad_terms_csv_names_line_and_column_and_writes_nothing(
    store_url: str, tmp_path: Path, content: bytes, line: int, column: str | None, words: str
) -> None:
    good = tmp_path / "good.csv"
    good.write_text("code,label\nG1,Good\n", encoding="utf-8")
    ok("import-terms", "--scheme", "s", "--csv", str(good), "--db", store_url)
    before = snapshot(store_url)
    bad = tmp_path / "bad.csv"
    bad.write_bytes(content)
    message = rejected("import-terms", "--scheme", "s", "--csv", str(bad), "--db", store_url)
    assert message.startswith(f"error: {bad}:{line}: ")
    if column:
        assert f"column {column!r}" in message
    assert words in message
    assert snapshot(store_url) == before


# -- terms and decisions from a crosswalk ---------------------------------------------------


def test_import_real_crosswalk_with_decisions_is_idempotent(store_url: str, melo_data: Path) -> None:
    source = melo_data / "raw" / "crosswalks_standard" / "nor_no" / "crosswalk.json"
    raw = json.loads(source.read_text(encoding="utf-8"))
    n_matches = sum(len(entry["matches"]) for entry in raw.values())
    args = ("import-terms", "--scheme", "nor_no", "--crosswalk", "nor_no", "--data", str(melo_data))
    out = ok(*args, "--with-decisions", "--db", store_url)
    assert f"{len(raw)} terms added" in out and f"{n_matches} decisions added" in out
    before = snapshot(store_url)
    out = ok(*args, "--with-decisions", "--db", store_url)
    assert f"0 decisions added, {n_matches} already there" in out
    assert snapshot(store_url) == before
    ok(*args, "--db", store_url)  # terms only: nothing new either
    assert snapshot(store_url) == before
    with Store(store_url) as store:
        [scheme] = store.schemes()
        assert (scheme.name, scheme.language, scheme.terms, scheme.done) == ("nor_no", "no", len(raw), len(raw))
        code, entry = next(iter(raw.items()))
        term = store.term("nor_no", code)
        assert term is not None and (term.uri, term.label) == (code, entry["title"])  # codes are URIs here
        current = store.current(term.id)
        assert {d.concept_uri: d.outcome for d in current} == entry["matches"]
        assert {d.curator for d in current} == {"import:crosswalk.json"}
        assert store.decisions_per_hour() == []  # imports are not curator work


def test_crosswalk_terms_without_uri_codes_get_urns(tmp_path: Path, melo_data: Path) -> None:
    raw = json.loads((melo_data / "raw" / "crosswalks_standard" / "deu_de" / "crosswalk.json").read_text("utf-8"))
    part = dict(list(raw.items())[:20])
    path = tmp_path / "deu_part.json"
    path.write_text(json.dumps(part, ensure_ascii=False, indent=2), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    ok("import-terms", "--scheme", "deu_de", "--crosswalk", str(path), "--with-decisions", "--lang", "de", "--db", url,
       "--create")  # fmt: skip
    with Store(url) as store:
        terms = store.terms("deu_de")
        assert terms[0].uri == "urn:melo:scheme:deu_de:" + terms[0].code.replace(" ", "%20")
        assert {d.curator for t in terms for d in store.current(t.id)} == {"import:deu_part.json"}


def _crosswalk_text() -> str:
    return json.dumps(
        {
            "T1": {"title": "Baker", "description": "", "matches": {"http://e.org/o/1": "exactMatch"}},
            "T2": {
                "title": "Nurse",
                "description": "",
                "matches": {"http://e.org/o/2": "closeMatch", "http://e.org/o/3": "sameAs"},
            },
        },
        indent=4,
    )


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


BAD_CROSSWALKS = [
    # (edit of the good text, needle whose line is expected, words)
    (lambda t: t, '"http://e.org/o/3"', "unknown relation 'sameAs'"),
    (lambda t: t.replace('"sameAs"', '"exactMatch"').replace('"Nurse"', '""'), '"title": ""', 'field "title"'),
    (lambda t: t.replace('"sameAs"', '"exactMatch"').replace('"http://e.org/o/3"', '"not a uri"'), '"not a uri"', "not a URI"),
    (lambda t: t.replace('"sameAs"', '"exactMatch"').replace('"T2"', '"T1"'), '"T1": {\n        "title": "Nurse"', "appears twice"),
    (lambda t: t.replace('"sameAs"', '"exactMatch"').replace('"closeMatch",', '"closeMatch",,'), '"closeMatch",,', "invalid JSON"),
    (lambda t: '["not", "an object"]', '["not"', "expected a non-empty JSON object"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "needle", "words"), BAD_CROSSWALKS)
def test_a_bad_crosswalk_names_the_line_and_writes_nothing(
    tmp_path: Path, edit: Callable[[str], str], needle: str, words: str
) -> None:
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    text = edit(_crosswalk_text())
    path = tmp_path / "cw.json"
    path.write_text(text, encoding="utf-8")
    message = rejected("import-terms", "--scheme", "cw", "--crosswalk", str(path), "--with-decisions", "--db", url)
    assert message.startswith(f"error: {path}:{_line_of(text, needle)}: "), message
    assert words in message
    assert not (tmp_path / "melo.db").exists()


def test_with_decisions_needs_a_crosswalk(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("code,label\nA,B\n", encoding="utf-8")
    assert "--with-decisions" in rejected("import-terms", "--scheme", "s", "--csv", str(path), "--with-decisions")


# -- terms and decisions from our SKOS CSV --------------------------------------------------

SKOS_HEADER = "source_uri,source_code,source_label,relation,target_uri,target_label,curator,decided_at\n"

BAD_SKOS = [
    ("urn:x:A,A,Alpha,skos:sameAs,http://e.org/1,,ann,2025-01-01T00:00:00Z\n", "relation", "unknown relation"),
    ("urn:x:A,A,Alpha,skos:exactMatch,http://e.org/1,,ann,yesterday\n", "decided_at", "not a date"),
    ("urn:x:A,A,Alpha,skos:exactMatch,http://e.org/1,,ann,2025-01-01T00:00:00\n", "decided_at", "no time zone"),
    ("urn:x:A,A,Alpha,skos:exactMatch,http://e.org/1,,,2025-01-01T00:00:00Z\n", "curator", "empty curator"),
    ("urn:x:A,A,Alpha,skos:exactMatch,,,ann,2025-01-01T00:00:00Z\n", "target_uri", "empty URI"),
    ("urn:x:A,A,Other,,,,,\n", "source_label", "differs"),
    ("urn:x:B,A,Alpha,,,,,\n", "source_uri", "differs"),
    ("urn:x:A,B,Beta,,,,,\n", "source_uri", "already used by code 'A'"),
    ("urn:x:B,B,Beta,,http://e.org/1,,,\n", "target_uri", "a value without a relation"),
    ("urn:x:A,A,Alpha,skos:exactMatch,http://e.org/0,,bob,2025-01-01T00:00:00Z\n", "target_uri", "already on line 2"),
]


@pytest.mark.parametrize(("bad_row", "column", "words"), BAD_SKOS)
def test_a_bad_skos_csv_names_line_and_column(tmp_path: Path, bad_row: str, column: str, words: str) -> None:
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    path = tmp_path / "x.csv"
    path.write_text(
        SKOS_HEADER + "urn:x:A,A,Alpha,skos:exactMatch,http://e.org/0,Zero,ann,2025-01-01T00:00:00Z\n" + bad_row,
        encoding="utf-8",
    )
    message = rejected("import-terms", "--scheme", "x", "--skos-csv", str(path), "--db", url)
    assert message.startswith(f"error: {path}:3: column {column!r}: "), message
    assert words in message


def test_a_skos_csv_conflicting_with_the_store_writes_nothing(store_url: str, tmp_path: Path) -> None:
    terms = tmp_path / "t.csv"
    terms.write_text("code,label\nA,Alpha\n", encoding="utf-8")
    ok("import-terms", "--scheme", "s", "--csv", str(terms), "--db", store_url)
    before = snapshot(store_url)
    path = tmp_path / "x.csv"
    path.write_text(
        SKOS_HEADER
        + "urn:new:X,X,Fine,skos:exactMatch,http://e.org/1,,ann,2025-01-01T00:00:00Z\n"
        + "urn:melo:scheme:s:A,Y,Takes A's URI,,,,,\n",
        encoding="utf-8",
    )
    message = rejected("import-terms", "--scheme", "s", "--skos-csv", str(path), "--db", store_url)
    assert message.startswith(f"error: {path}:3: ") and "already belongs to term 'A'" in message
    assert snapshot(store_url) == before  # the first row's term and decision were rolled back
