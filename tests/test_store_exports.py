"""Exports of the crosswalk store (``python -m melo_core export``), parsed back: SKOS CSV and
SSSOM TSV (YAML header and rows), the byte-identical SKOS round trip through an empty store, and
spreadsheet formula neutralisation. Real data: the Norwegian crosswalk and ESCO labels from the
Norwegian MELO corpus."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from db.exports import export_fingerprint, turtle_text
from db.formats import neutralise, unneutralise
from db.imports import import_taxonomy
from db.store import Store
from db.testing import empty_store_url, run_cli, run_cli_ok, snapshot
from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import crosswalk_path
from melo_core.esco.datasets import load_dataset
from melo_core.esco.taxonomy import taxonomy_from_datasets
from tests.conftest import BACKENDS_UNDER_TEST

SKOS_HEADER = [
    "source_uri",
    "source_code",
    "source_label",
    "relation",
    "target_uri",
    "target_label",
    "curator",
    "decided_at",
    "original_author",
    "original_date",
    "esco_version",
    "review_status",
    "reviewer",
    "reviewed_at",
    "comments",
]
TRICKY_TERMS = {  # code -> label a spreadsheet would run, or that looks like a guarded one
    "=1+1": '=HYPERLINK("http://evil.example","click")',
    "F2": "+47 telefonvakt",
    "F3": "-1 nivå",
    "F4": "@SUM(A1:A9)",
    "F5": "'=already quoted",
    "F6": 'Ordinary, with a comma and "quotes"',
}


cli, ok = run_cli, run_cli_ok


@pytest.fixture(scope="module", params=BACKENDS_UNDER_TEST)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def curated(
    backend: str, melo_data: Path, datasets_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A store with ESCO labels, the Norwegian crosswalk imported with its decisions, curators'
    decisions on top (rejections, scores, an undo) and terms with spreadsheet-formula labels."""
    folder = tmp_path_factory.mktemp("curated")
    with empty_store_url(backend, folder) as url:
        with Store(url, create=True) as store:
            taxonomy = taxonomy_from_datasets([load_dataset(datasets_dir / "nor_q_no_c_no")])
            import_taxonomy(store, taxonomy, "esco", "nor-slice")
        ok(
            "import-terms",
            "--scheme",
            "nor_no",
            "--crosswalk",
            "nor_no",
            "--data",
            str(melo_data),
            "--with-decisions",
            "--db",
            url,
        )
        tricky = folder / "tricky.csv"
        with tricky.open("w", encoding="utf-8", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["code", "label"])
            writer.writerows(TRICKY_TERMS.items())
        ok("import-terms", "--scheme", "nor_no", "--csv", str(tricky), "--db", url)
        with Store(url) as store:
            terms = store.terms("nor_no")
            first, second = terms[0], terms[1]
            dropped = store.current(first.id)[1]
            store.decide(first.id, dropped.concept_uri, "rejected", "@alice", comment="=too broad")
            store.decide(
                second.id, taxonomy.concepts[5].uri, "exactMatch", "bob", scorer="char-tfidf", score=0.8123, rank=1
            )
            store.decide(second.id, taxonomy.concepts[6].uri, "unsure", "bob")
            store.decide(second.id, taxonomy.concepts[7].uri, "closeMatch", "bob")
            store.undo(second.id, taxonomy.concepts[7].uri, "bob")  # back to undecided
            f2 = store.term("nor_no", "F2")
            assert f2 is not None
            store.decide(
                f2.id,
                taxonomy.concepts[8].uri,
                "narrowMatch",
                "-carol-",
                decided_at=datetime(2025, 2, 3, 4, 5, 6, 789, tzinfo=UTC),
            )
        yield url


def export(url: str, fmt: str, out: Path, *extra: str) -> str:
    ok("export", "--scheme", "nor_no", "--format", fmt, "--out", str(out), "--db", url, *extra)
    return out.read_text(encoding="utf-8")


def test_skos_csv_export_parses_back(curated: str, tmp_path: Path) -> None:
    text = export(curated, "skos-csv", tmp_path / "nor.csv", "--undecided")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0] == SKOS_HEADER
    records = [dict(zip(SKOS_HEADER, r, strict=True)) for r in rows[1:]]
    with Store(curated) as store:
        current = store.crosswalk("nor_no")
        terms = store.terms("nor_no")
    mapped = [r for r in records if r["relation"]]
    assert len(mapped) == len(current)
    assert {(r["source_uri"], r["target_uri"], r["relation"]) for r in mapped} == {
        (d.term_uri, d.concept_uri, f"skos:{d.outcome}") for d in current
    }
    unmapped = [r for r in records if not r["relation"]]
    assert len(unmapped) == len(terms) - len({d.term_id for d in current})  # each once, relation left empty
    assert all(r["target_uri"] == r["curator"] == r["decided_at"] == "" for r in unmapped)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["decided_at"]) for r in mapped)
    # Labels from the stored taxonomy, in the scheme's language (Norwegian).
    with Store(curated) as store:
        some = next(r for r in mapped if store.concept(r["target_uri"]) is not None)
        assert some["target_label"] == store.concept(some["target_uri"]).labels["no"]["preferred"][0]  # type: ignore[union-attr]
    assert "melo:rejected" not in text and "skos:closeMatch" in text
    assert "melo:rejected" in export(curated, "skos-csv", tmp_path / "neg.csv", "--negatives")
    assert "skos:closeMatch" in export(curated, "skos-csv", tmp_path / "decided.csv")


def test_formula_cells_are_neutralised(curated: str, tmp_path: Path) -> None:
    text = export(curated, "skos-csv", tmp_path / "nor.csv", "--negatives", "--undecided")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    cells = [cell for row in rows for cell in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")]
    by_code = {row[1]: row for row in rows[1:]}
    assert by_code["'=1+1"][2] == "'" + TRICKY_TERMS["=1+1"]
    assert by_code["F2"][2] == "'+47 telefonvakt" and by_code["F2"][6] == "'-carol-"
    assert by_code["F3"][2] == "'-1 nivå" and by_code["F4"][2] == "'@SUM(A1:A9)"
    assert by_code["F5"][2] == "''=already quoted"  # guarded too, so that reading back is exact
    assert by_code["F6"][2] == TRICKY_TERMS["F6"]
    assert any(row[6] == "'@alice" for row in rows)  # a curator name is a cell like any other


@pytest.mark.parametrize("cell", ["", "plain", "=1", "+1", "-", "@x", "'", "'=", "''=x", "'plain", "\tx", "a=b"])
def test_neutralise_is_undone_exactly(cell: str) -> None:
    guarded = neutralise(cell)
    assert not guarded.startswith(("=", "+", "-", "@", "\t"))
    assert unneutralise(guarded) == cell


@pytest.mark.parametrize("negatives", [False, True])
def test_skos_round_trip_through_an_empty_store_keeps_every_row_and_what_the_file_claimed(
    curated: str, backend: str, tmp_path: Path, negatives: bool
) -> None:
    """The copy holds the same terms and mappings; its decisions are signed by the import, now,
    and keep the first file's curator and date as original_author / original_date."""
    flag = ("--undecided", "--negatives") if negatives else ("--undecided",)
    first = export(curated, "skos-csv", tmp_path / "first.csv", *flag)
    with empty_store_url(backend, tmp_path) as empty:
        ok("import-terms", "--scheme", "nor_no", "--skos-csv", str(tmp_path / "first.csv"), "--db", empty, "--create")
        again = export(empty, "skos-csv", tmp_path / "second.csv", *flag)
        first_rows = list(csv.reader(io.StringIO(first, newline="")))
        again_rows = list(csv.reader(io.StringIO(again, newline="")))
        assert again_rows[0] == first_rows[0] == SKOS_HEADER and len(again_rows) == len(first_rows)
        for old, new in zip(first_rows[1:], again_rows[1:], strict=True):
            assert new[:6] == old[:6]
            if old[3]:  # a decision: signed by the import, the first file's claims kept apart
                assert new[6] == "import:first.csv" and new[8:10] == old[6:8]
                assert new[10:] == ["", "proposed", "", "", ""]  # no target taxonomy; reviews stay behind
            else:
                assert new == old
        with Store(empty) as copy:
            assert {t.code: t.label for t in copy.terms("nor_no") if t.code in TRICKY_TERMS} == TRICKY_TERMS
            assert copy.taxonomies() == []  # target labels travelled with the decisions
        before = snapshot(empty)
        out = ok("import-terms", "--scheme", "nor_no", "--skos-csv", str(tmp_path / "first.csv"), "--db", empty)
        assert "0 terms added" in out and "0 decisions added" in out
        # The copy's own export claims what the first file did: already there too.
        out = ok("import-terms", "--scheme", "nor_no", "--skos-csv", str(tmp_path / "second.csv"), "--db", empty)
        assert "0 terms added" in out and "0 decisions added" in out
        assert snapshot(empty) == before


def _header_and_rows(text: str) -> tuple[dict[str, object], list[dict[str, str]]]:
    lines = text.splitlines(keepends=True)
    header = [line[1:] for line in lines if line.startswith("#")]
    body = "".join(line for line in lines if not line.startswith("#"))
    return yaml.safe_load("".join(header)), list(csv.DictReader(io.StringIO(body, newline=""), delimiter="\t"))


def _expand(curie: str, curie_map: dict[str, str]) -> str:
    prefix, local = curie.split(":", 1)
    assert prefix in curie_map, curie
    return curie_map[prefix] + local


def test_sssom_export_parses_back(curated: str, tmp_path: Path) -> None:
    metadata, rows = _header_and_rows(export(curated, "sssom", tmp_path / "nor.sssom.tsv"))
    assert metadata["mapping_set_id"] == "urn:melo:mapping-set:nor_no"
    assert metadata["license"] == "https://creativecommons.org/licenses/by/4.0/"
    curie_map = metadata["curie_map"]
    assert isinstance(curie_map, dict)
    assert curie_map["skos"] == "http://www.w3.org/2004/02/skos/core#"
    assert curie_map["semapv"] == "https://w3id.org/semapv/vocab/"
    assert "predicate_modifier" not in rows[0]
    with Store(curated) as store:
        current = store.crosswalk("nor_no")
    assert len(rows) == len(current)
    assert {
        (_expand(r["subject_id"], curie_map), _expand(r["predicate_id"], curie_map), _expand(r["object_id"], curie_map))
        for r in rows
    } == {(d.term_uri, "http://www.w3.org/2004/02/skos/core#" + d.outcome, d.concept_uri) for d in current}
    assert {r["mapping_justification"] for r in rows} == {"semapv:ManualMappingCuration"}
    scored = next(r for r in rows if r["similarity_measure"])
    assert (scored["similarity_score"], scored["similarity_measure"], scored["author_label"]) == (
        "0.8123",
        "char-tfidf",
        "bob",
    )
    assert next(r for r in rows if r["author_label"] == "'-carol-")["mapping_date"] == "2025-02-03"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d", r["mapping_date"]) for r in rows)


def test_sssom_negatives_are_negative_mappings(curated: str, tmp_path: Path) -> None:
    metadata, rows = _header_and_rows(
        export(curated, "sssom", tmp_path / "neg.tsv", "--negatives", "--mapping-set-id", "https://example.org/m")
    )
    assert metadata["mapping_set_id"] == "https://example.org/m"
    negative = [r for r in rows if r["predicate_modifier"]]
    assert len(negative) == 1
    [row] = negative
    assert (row["predicate_modifier"], row["predicate_id"], row["author_label"], row["comment"]) == (
        "Not",
        "skos:mappingRelation",
        "'@alice",
        "'=too broad",  # free text gets the spreadsheet guard, as in SKOS CSV
    )
    assert all(r["predicate_modifier"] == "" for r in rows if r is not row)


def test_export_of_an_unknown_scheme_is_rejected(curated: str, tmp_path: Path) -> None:
    code, _, err = cli("export", "--scheme", "nope", "--format", "sssom", "--out", str(tmp_path / "x"), "--db", curated)
    assert code == 2 and err.strip().splitlines() == ["error: no source scheme 'nope' in the store (schemes: nor_no)"]
    assert not (tmp_path / "x").exists()


def test_export_fingerprint_changes_exactly_when_an_export_would(
    melo_data: Path, datasets_dir: Path, tmp_path: Path
) -> None:
    """The Crosswalk page keeps its downloads while the fingerprint holds: a comment, a review, a
    decision and a term re-imported with a new label change them all (the exports carry reviews
    and comments)."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    with Store(url, create=True) as store:
        taxonomy = taxonomy_from_datasets([load_dataset(datasets_dir / "nor_q_no_c_no")])
        import_taxonomy(store, taxonomy, "esco", "nor-slice")
    # The first 60 of nor_no's 420 terms: each state below writes Turtle twice (rdflib: 3.3 s for all 420).
    whole = json.loads(crosswalk_path(melo_data, "nor_no").read_text(encoding="utf-8"))
    sliced = tmp_path / "nor_no" / "crosswalk.json"
    sliced.parent.mkdir()
    sliced.write_text(json.dumps(dict(list(whole.items())[:60]), ensure_ascii=False), encoding="utf-8")
    ok("import-terms", "--scheme", "nor_no", "--crosswalk", str(sliced), "--with-decisions", "--db", url)

    def state(store: Store) -> tuple[str, str, str, str]:
        return (export_fingerprint(store, "nor_no"), turtle_text(store, "nor_no"),
                export_fingerprint(store, "nor_no", confirmed_only=True),
                turtle_text(store, "nor_no", confirmed_only=True))  # fmt: skip

    with Store(url) as store:
        first = store.terms("nor_no")[0]
        decision = store.current(first.id)[0]
        start, commented = state(store), store.discussion_fingerprint()
        assert state(store) == start  # read twice, the same
        store.add_comment(decision.id, "rita", "checked against the 2023 edition")
        remarked = state(store)
        assert remarked[0] != start[0] and "checked against the 2023 edition" in remarked[1]
        assert store.discussion_fingerprint() != commented  # the review queue counts comments

        store.review([decision.id], "rita", "confirmed")
        reviewed = state(store)
        assert reviewed[0] != remarked[0] and reviewed[1] != remarked[1]
        assert reviewed[2] != remarked[2] and reviewed[3] != remarked[3]

        store.decide(first.id, taxonomy.concepts[3].uri, "closeMatch", "bob")
        decided = state(store)
        assert decided[0] != reviewed[0] and decided[1] != reviewed[1]

    relabelled = tmp_path / "relabelled.csv"
    relabelled.write_text(f"code,label\n{first.code},{first.label} (revised)\n", encoding="utf-8")
    ok("import-terms", "--scheme", "nor_no", "--csv", str(relabelled), "--db", url)
    with Store(url) as store:
        revised = state(store)
        assert revised[0] != decided[0] and revised[1] != decided[1] and "(revised)" in revised[1]
        with pytest.raises(MeloInputError, match="no source scheme 'nope'"):
            export_fingerprint(store, "nope")
