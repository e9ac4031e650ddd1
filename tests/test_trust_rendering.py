"""Nothing a user typed reaches a browser as markup, and exports guard and check what they write
(issue 87): the markdown escaping helper (``ui.safe``), a structural guard over every page, and the
SSSOM / SKOS CSV / Turtle exports of a store holding formula-like text and IRIs that are not ones.
Real stores (SQLite, and PostgreSQL when configured), real files, the real ``sssom`` validator."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from db.exports import validate_sssom
from db.store import Store
from db.testing import run_cli_ok
from tests.test_store_exports import _header_and_rows
from tests.test_store_imports import rejected

FORMULA_TERMS = {  # code -> label: cells a spreadsheet would run
    "T1": '=HYPERLINK("http://evil.example","click")',
    "T2": "+47 telefonvakt",
    "T3": "Plain label",
}
ESCO = "http://data.europa.eu/esco/occupation/"


def _terms(store_url: str, tmp_path: Path, scheme: str = "s") -> list[int]:
    """The formula terms imported into ``scheme``; their ids in import order."""
    source = tmp_path / "terms.csv"
    with source.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["code", "label"])
        writer.writerows(FORMULA_TERMS.items())
    run_cli_ok("import-terms", "--scheme", scheme, "--csv", str(source), "--db", store_url)
    with Store(store_url) as store:
        return [t.id for t in store.terms(scheme)]


@pytest.fixture
def formula_store(store_url: str, tmp_path: Path) -> str:
    """Terms and decisions whose labels, curator, comment and concept label start with =, +, -, @."""
    t1, t2, t3 = _terms(store_url, tmp_path)
    with Store(store_url) as store:
        store.decide(t1, ESCO + "a1", "exactMatch", "@curator", comment="-2+3", concept_label="=1+1")
        store.decide(t2, ESCO + "b2", "narrowMatch", "bob", concept_label="@SUM(A1:A9)", scorer="=cmd", score=0.5)
        store.decide(t3, ESCO + "c3", "closeMatch", "carol", concept_label="Plain concept")
    return store_url


def _export(url: str, fmt: str, out: Path, *extra: str) -> str:
    run_cli_ok("export", "--scheme", "s", "--format", fmt, "--out", str(out), "--db", url, *extra)
    return out.read_text(encoding="utf-8")


def test_sssom_free_text_cells_are_guarded_and_the_file_still_validates(formula_store: str, tmp_path: Path) -> None:
    text = _export(formula_store, "sssom", tmp_path / "s.sssom.tsv", "--validate")
    assert validate_sssom(text) == []
    _, rows = _header_and_rows(text)
    by_subject = {r["subject_label"]: r for r in rows}
    first = by_subject["'" + FORMULA_TERMS["T1"]]
    assert (first["object_label"], first["author_label"], first["comment"]) == ("'=1+1", "'@curator", "'-2+3")
    second = by_subject["'+47 telefonvakt"]
    assert (second["object_label"], second["similarity_measure"]) == ("'@SUM(A1:A9)", "'=cmd")
    assert by_subject["Plain label"]["object_label"] == "Plain concept"  # only what a spreadsheet would run
    # The ids are CURIEs of declared prefixes: never guarded, never starting with a formula character.
    cells = [r[c] for r in rows for c in ("subject_id", "predicate_id", "object_id", "mapping_justification")]
    assert all(cell[:1].isalpha() for cell in cells)
    free_text = [v for r in rows for k, v in r.items() if not k.endswith("_id") and v]
    assert not [v for v in free_text if v[:1] in ("=", "+", "-", "@")]


def test_no_formula_guard_writes_sssom_and_skos_csv_cells_as_they_are(formula_store: str, tmp_path: Path) -> None:
    _, rows = _header_and_rows(_export(formula_store, "sssom", tmp_path / "raw.tsv", "--no-formula-guard"))
    assert {r["subject_label"] for r in rows} == set(FORMULA_TERMS.values())
    assert "@curator" in {r["author_label"] for r in rows}
    skos = _export(formula_store, "skos-csv", tmp_path / "raw.csv", "--no-formula-guard")
    labels = {row[2] for row in list(csv.reader(io.StringIO(skos, newline="")))[1:]}
    assert labels == set(FORMULA_TERMS.values())
    guarded = _export(formula_store, "skos-csv", tmp_path / "guarded.csv")
    assert "'" + FORMULA_TERMS["T1"].replace('"', '""') in guarded  # the default is unchanged
    message = rejected("export", "--scheme", "s", "--format", "turtle", "--out", str(tmp_path / "x.ttl"),
                       "--db", formula_store, "--no-formula-guard")  # fmt: skip
    assert "--no-formula-guard goes with --format skos-csv or sssom" in message
    assert not (tmp_path / "x.ttl").exists()


@pytest.mark.parametrize("fmt", ["turtle", "sssom"])
@pytest.mark.parametrize("option", ["--mapping-set-id", "--license"])
def test_an_id_that_is_not_an_absolute_iri_is_refused_before_anything_is_written(
    formula_store: str, tmp_path: Path, fmt: str, option: str
) -> None:
    out = tmp_path / "out"
    message = rejected("export", "--scheme", "s", "--format", fmt, "--out", str(out), "--db", formula_store,
                       option, "not a uri")  # fmt: skip
    assert message == f"error: {option} must be an absolute IRI (such as https://example.org/...), got 'not a uri'"
    assert not out.exists()
    _export(formula_store, fmt, out, option, "https://example.org/a-set")  # an IRI passes


@pytest.mark.parametrize("fmt", ["turtle", "sssom"])
def test_a_concept_uri_that_is_not_an_iri_is_refused_naming_the_mapping(
    store_url: str, tmp_path: Path, fmt: str
) -> None:
    t1, _, _ = _terms(store_url, tmp_path)
    with Store(store_url) as store:
        store.decide(t1, "not a uri", "exactMatch", "alice")
    out = tmp_path / "out"
    message = rejected("export", "--scheme", "s", "--format", fmt, "--out", str(out), "--db", store_url)
    assert "mapping 1 (" in message and "'not a uri'" in message
    assert not out.exists()


def test_sssom_refuses_an_object_iri_it_cannot_write_as_a_curie(store_url: str, tmp_path: Path) -> None:
    """``http://example.org/`` has nothing after its last ``/``: no CURIE of any declared prefix.
    The exporter used to write the IRI itself as ``object_id``, and ``sssom``'s validator passed it
    (it skips any value not shaped like a CURIE)."""
    t1, t2, _ = _terms(store_url, tmp_path)
    with Store(store_url) as store:
        store.decide(t1, ESCO + "a1", "exactMatch", "alice")
        store.decide(t2, "http://example.org/", "exactMatch", "alice")
    for extra in ((), ("--validate",)):
        out = tmp_path / "out.tsv"
        message = rejected("export", "--scheme", "s", "--format", "sssom", "--out", str(out), "--db", store_url,
                           *extra)  # fmt: skip
        assert message.startswith("error: mapping 2 ('+47 telefonvakt' -> 'http://example.org/'): the object_id")
        assert "cannot be written as a CURIE" in message
        assert not out.exists()
    # Turtle writes IRIs, not CURIEs: the same decision is a valid IRI there.
    assert "<http://example.org/>" in _export(store_url, "turtle", tmp_path / "s.ttl", "--validate")


def test_validate_sssom_refuses_ids_that_are_no_curie_of_the_curie_map(formula_store: str, tmp_path: Path) -> None:
    text = _export(formula_store, "sssom", tmp_path / "s.tsv")
    assert validate_sssom(text) == []
    for bad in ("http://example.org/", "'esco:a1", "nope:a1"):
        problems = validate_sssom(text.replace("esco:a1", bad))  # sssom itself names the missing prefix 'nope'
        assert f"row 1: object_id {bad!r} is not a CURIE with a prefix of the curie_map" in problems
