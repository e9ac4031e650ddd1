"""Exports a curator can hand on (issue 90): only decided terms unless the undecided are asked for,
each term's code as its scheme writes it (not its URI), the ESCO release said honestly, and the
review status, reviewer, review date and comments in SKOS CSV, SSSOM TSV and Turtle. Real data:
the Norwegian crosswalk (keyed by URIs) and the ESCO labels of the Norwegian MELO corpus, on
SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from rdflib import Graph, Literal, Namespace, URIRef
from rdflib.namespace import RDFS, SKOS, XSD
from streamlit.testing.v1 import AppTest

from db.exports import validate_sssom
from db.imports import import_taxonomy
from db.quickstart import start_curation
from db.store import Store
from db.testing import run_cli_ok, snapshot
from melo_core.esco.datasets import load_dataset
from melo_core.esco.taxonomy import Taxonomy, taxonomy_from_datasets
from tests.conftest import ROOT

SSSOM = Namespace("https://w3id.org/sssom/")
NOR_URI = "http://data.europa.eu/esco/concept/norwegian-occupations/"


@pytest.fixture(scope="module")
def nor_taxonomy(datasets_dir: Path) -> Taxonomy:
    return taxonomy_from_datasets([load_dataset(datasets_dir / "nor_q_no_c_no")])


@pytest.fixture
def handed(store_url: str, melo_data: Path, nor_taxonomy: Taxonomy) -> Iterator[str]:
    """The nor_no terms (no decisions imported) against the MELO corpora union, a few decided:
    one confirmed with comments (one a formula), one rejected by a reviewer, one proposed, and a
    rejection. Most terms stay undecided, as after a curator's first hour."""
    with Store(store_url) as store:
        import_taxonomy(store, nor_taxonomy, "esco", "melo-union")
    run_cli_ok("import-terms", "--scheme", "nor_no", "--crosswalk", "nor_no", "--data", str(melo_data),
               "--db", store_url)  # fmt: skip
    concepts = nor_taxonomy.concepts
    with Store(store_url) as store:
        terms = store.terms("nor_no")
        confirmed = store.decide(terms[0].id, concepts[1].uri, "exactMatch", "alice", comment="=SUM of both\nlines")
        refused = store.decide(terms[1].id, concepts[2].uri, "closeMatch", "bob")
        store.decide(terms[2].id, concepts[3].uri, "broadMatch", "alice")
        store.decide(terms[3].id, concepts[4].uri, "rejected", "alice", comment="not a soldier")
        store.review([confirmed.id], "@rita", "confirmed", comment="agreed with the notes")
        store.review([refused.id], "@rita", "rejected", comment="too broad")
        store.add_comment(confirmed.id, "bob", "+1, same as the 2023 edition")
    yield store_url


def export(url: str, fmt: str, *extra: str) -> str:
    return run_cli_ok("export", "--scheme", "nor_no", "--format", fmt, "--out", "-", "--db", url, *extra)


def skos_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


def sssom_parts(text: str) -> tuple[dict[str, object], list[dict[str, str]]]:
    lines = text.splitlines(keepends=True)
    metadata = yaml.safe_load("".join(line[1:] for line in lines if line.startswith("#")))
    body = "".join(line for line in lines if not line.startswith("#"))
    return metadata, list(csv.DictReader(io.StringIO(body, newline=""), delimiter="\t"))


def test_skos_csv_holds_the_decided_terms_unless_the_undecided_are_asked_for(handed: str) -> None:
    decided = skos_rows(export(handed, "skos-csv"))
    assert [(r["relation"], r["curator"]) for r in decided] == [
        ("skos:exactMatch", "alice"),
        ("skos:closeMatch", "bob"),
        ("skos:broadMatch", "alice"),
    ]
    confirmed = skos_rows(export(handed, "skos-csv", "--confirmed-only"))
    assert [r["relation"] for r in confirmed] == ["skos:exactMatch"]
    with_rejections = skos_rows(export(handed, "skos-csv", "--negatives"))
    assert [r["relation"] for r in with_rejections][-1] == "melo:rejected" and len(with_rejections) == 4
    everything = skos_rows(export(handed, "skos-csv", "--undecided"))
    with Store(handed) as store:
        terms = store.terms("nor_no")
    assert len(everything) == len(terms) > 400  # each undecided term once, relation left empty
    assert sum(1 for r in everything if r["relation"]) == 3


def test_source_code_is_the_schemes_code_and_a_round_trip_finds_its_terms(handed: str, tmp_path: Path) -> None:
    """The nor_no crosswalk is keyed by URIs (.../norwegian-occupations/1111): its code is the
    last segment. Imported back into the same store, the file finds its terms by their URIs."""
    rows = skos_rows(export(handed, "skos-csv", "--undecided", "--negatives"))
    with Store(handed) as store:
        terms = store.terms("nor_no")
    assert [r["source_uri"] for r in rows if not r["relation"]][:3] == [t.uri for t in terms[4:7]]
    # Most are Norwegian codes, a few ESCO's ISCO groups (http://data.europa.eu/esco/isco/C0110).
    assert all(r["source_uri"].rsplit("/", 1)[1] == r["source_code"] for r in rows)
    assert sum(r["source_uri"] == NOR_URI + r["source_code"] for r in rows) > len(rows) / 2
    assert rows[0]["source_code"] == terms[0].uri.rsplit("/", 1)[1] != terms[0].code
    graph = Graph().parse(data=export(handed, "turtle"), format="turtle")
    assert graph.value(URIRef(terms[0].uri), SKOS.notation) == Literal(rows[0]["source_code"])

    file = tmp_path / "nor.csv"
    file.write_text("".join(export(handed, "skos-csv", "--undecided", "--negatives")), encoding="utf-8")
    before = snapshot(handed)
    out = run_cli_ok("import-terms", "--scheme", "nor_no", "--skos-csv", str(file), "--db", handed)
    assert "0 terms added" in out and "0 decisions added" in out
    assert snapshot(handed) == before


def test_the_esco_release_is_named_or_said_unknown(handed: str, nor_taxonomy: Taxonomy) -> None:
    """The MELO corpora union names no ESCO release: no format pretends "melo-union" is one. A
    decision made against an imported ESCO release (v1.2.0) carries it in every format."""
    assert {r["esco_version"] for r in skos_rows(export(handed, "skos-csv"))} == {"unknown (MELO corpora union)"}
    sssom, turtle = export(handed, "sssom"), export(handed, "turtle")
    assert "melo-union" not in sssom and "melo-union" not in turtle
    metadata, rows = sssom_parts(sssom)
    assert {r["object_source_version"] for r in rows} == {""}
    assert "no ESCO release named" in str(metadata["mapping_set_description"])

    with Store(handed) as store:
        import_taxonomy(store, nor_taxonomy, "esco", "v1.2.0")
        store.migrate_scheme("nor_no", "v1.2.0")
        later = store.decide(store.terms("nor_no")[5].id, nor_taxonomy.concepts[9].uri, "exactMatch", "carol")
    [row] = [r for r in skos_rows(export(handed, "skos-csv")) if r["target_uri"] == later.concept_uri]
    assert row["esco_version"] == "v1.2.0"
    metadata, rows = sssom_parts(export(handed, "sssom"))
    assert [r["object_source_version"] for r in rows if r["author_label"] == "carol"] == ["v1.2.0"]
    assert "(esco v1.2.0)" in str(metadata["mapping_set_description"])
    graph = Graph().parse(data=export(handed, "turtle"), format="turtle")
    assert Literal("v1.2.0") in set(graph.objects(None, SSSOM.object_source_version))


def test_review_status_reviewer_and_comments_in_skos_csv(handed: str) -> None:
    rows = {r["curator"] + r["relation"]: r for r in skos_rows(export(handed, "skos-csv", "--negatives"))}
    confirmed, refused = rows["aliceskos:exactMatch"], rows["bobskos:closeMatch"]
    proposed, rejection = rows["aliceskos:broadMatch"], rows["alicemelo:rejected"]
    assert (confirmed["review_status"], confirmed["reviewer"]) == ("confirmed", "'@rita")  # formula guard
    assert confirmed["reviewed_at"].endswith("Z") and confirmed["reviewed_at"] >= confirmed["decided_at"]
    # The decision's comment (on one line), the review's, the discussion's; guarded as a formula.
    assert confirmed["comments"] == (
        "'=SUM of both lines | @rita (confirmed): agreed with the notes | bob: +1, same as the 2023 edition"
    )
    assert (refused["review_status"], refused["comments"]) == ("rejected", "'@rita (rejected): too broad")
    assert (proposed["review_status"], proposed["reviewer"], proposed["reviewed_at"], proposed["comments"]) == (
        "proposed",
        "",
        "",
        "",
    )
    assert (rejection["review_status"], rejection["comments"]) == ("proposed", "not a soldier")


def test_review_status_reviewer_and_comments_in_valid_sssom(handed: str) -> None:
    text = export(handed, "sssom", "--negatives", "--validate")
    assert validate_sssom(text) == []
    metadata, rows = sssom_parts(text)
    assert metadata["curie_map"]["melouser"] == "urn:melo:user:"  # type: ignore[index]
    by_predicate = {r["predicate_id"]: r for r in rows}
    confirmed, refused = by_predicate["skos:exactMatch"], by_predicate["skos:closeMatch"]
    proposed = by_predicate["skos:broadMatch"]
    assert (confirmed["author_id"], confirmed["author_label"]) == ("melouser:alice", "alice")
    assert (confirmed["reviewer_id"], confirmed["reviewer_label"], confirmed["reviewer_agreement"]) == (
        "melouser:%40rita",  # an id, never guarded
        "'@rita",
        "1.0",
    )
    assert len(confirmed["review_date"]) == len(confirmed["mapping_date"]) == 10
    assert confirmed["comment"].startswith("'=SUM of both lines | @rita (confirmed)")
    assert (refused["reviewer_agreement"], refused["comment"]) == ("-1.0", "'@rita (rejected): too broad")
    assert (proposed["reviewer_id"], proposed["review_date"], proposed["reviewer_agreement"]) == ("", "", "")


def test_review_status_reviewer_and_comments_in_turtle(handed: str) -> None:
    graph = Graph().parse(data=export(handed, "turtle", "--validate"), format="turtle")
    nodes = {str(graph.value(n, SSSOM.author_label)) + str(graph.value(n, SSSOM.other)): n
             for n in graph.subjects(SSSOM.mapping_justification, None)}  # fmt: skip
    confirmed = nodes["alicereview_status=confirmed"]
    assert graph.value(confirmed, SSSOM.author_id) == URIRef("urn:melo:user:alice")
    assert graph.value(confirmed, SSSOM.reviewer_id) == URIRef("urn:melo:user:%40rita")
    assert graph.value(confirmed, SSSOM.reviewer_label) == Literal("@rita")
    assert graph.value(confirmed, SSSOM.reviewer_agreement) == Literal(1.0, datatype=XSD.double)
    assert graph.value(confirmed, SSSOM.review_date).datatype == XSD.date  # type: ignore[union-attr]
    assert set(graph.objects(confirmed, RDFS.comment)) == {
        Literal("=SUM of both lines"),
        Literal("@rita (confirmed): agreed with the notes"),
        Literal("bob: +1, same as the 2023 edition"),
    }
    refused = nodes["bobreview_status=rejected"]
    assert graph.value(refused, SSSOM.reviewer_agreement) == Literal(-1.0, datatype=XSD.double)
    proposed = nodes["alicereview_status=proposed"]
    assert graph.value(proposed, SSSOM.reviewer_id) is None


def test_crosswalk_page_offers_the_undecided_and_rewrites_files_on_a_comment(
    nor_data: Path, esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    for name, value in (("MELO_DATA", nor_data), ("MELO_ESCO", esco_csv), ("MELO_CACHE", tmp_path / "cache"),
                        ("MELO_DB_URL", url)):  # fmt: skip
        monkeypatch.setenv(name, str(value))
    monkeypatch.chdir(ROOT)
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
        term = store.terms("nor_no")[0]
        decision = store.decide(term.id, store.find_concepts("lege")[0].uri, "exactMatch", "alice")
    app = AppTest.from_file(str(ROOT / "pages" / "3_Crosswalk.py"), default_timeout=60)
    app.session_state["curator"] = "alice"
    app.run()
    assert not app.exception
    files = {d.label: d.proto.url for d in app.download_button}
    app.checkbox(key="cw_undecided").check().run()
    undecided = {d.label: d.proto.url for d in app.download_button}
    assert undecided["SKOS CSV"] != files["SKOS CSV"] and undecided["SSSOM TSV"] == files["SSSOM TSV"]
    with Store(url) as store:
        store.add_comment(decision.id, "bob", "seen")
    commented = {d.label: d.proto.url for d in app.run().download_button}
    assert all(commented[label] != undecided[label] for label in commented), (undecided, commented)
