"""Query forms (gender markers, paired titles), concept-centroid mixing and soft pooling over a
concept's forms (``@pool``) of dense scorers."""

from __future__ import annotations

import csv
import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from melo_core.esco.datasets import load_dataset
from melo_core.esco.taxonomy import taxonomy_from_melo
from melo_core.evaluation.experiments.grids import fusion as fusion_grid
from melo_core.evaluation.experiments.grids.pools import first_occurrences
from melo_core.evaluation.protocol import Protocol, evaluate
from melo_core.linking.linker import Linker
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.dense import DenseScorer
from melo_core.scorers.hybrid import candidate_pools
from melo_core.scorers.text import drop_gender_markers, title_variants

ROOT = Path(__file__).resolve().parent.parent


def test_title_variants() -> None:
    assert title_variants("Boucher (h/f/x)") == ["Boucher"]
    assert drop_gender_markers("Koch (m./w.) Kantine") == "Koch Kantine"
    assert title_variants("Monteur / Monteuse de meubles") == [
        "Monteur / Monteuse de meubles", "Monteur de meubles", "Monteuse de meubles"]  # fmt: skip
    assert title_variants("Schlächter/in") == ["Schlächter/in", "Schlächter", "Schlächterin"]
    assert title_variants("Au-pair/Au-pair") == ["Au-pair/Au-pair", "Au-pair"]
    assert title_variants("baker") == ["baker"]
    assert title_variants("(m/w)") == ["(m/w)"]  # nothing but a marker: kept as it is


def _muse(spec: str, cache: Path, concepts: tuple[str, ...] = ()) -> DenseScorer:
    scorer = create_scorer(spec, ScorerContext("fr", ("fr",), cache_dir=str(cache), concepts=concepts))
    assert isinstance(scorer, DenseScorer)
    return scorer


def test_forms_score_each_form_and_keep_the_best(tmp_path: Path) -> None:
    corpus = ["monteuse de meubles", "boucher", "charpentier"]
    asis, variants = _muse("muse", tmp_path), _muse("muse@forms=variants", tmp_path)
    asis.fit(corpus)
    variants.fit(corpus)
    paired = "Monteur / Monteuse de meubles"
    got = variants.score([paired, "boucher (h/f/x)"])
    expected = np.maximum.reduce([asis.score([form])[0] for form in title_variants(paired)])
    np.testing.assert_allclose(got[0], expected, rtol=1e-6)
    assert got[0][0] > asis.score([paired])[0][0]  # the feminine form alone matches the label
    np.testing.assert_allclose(got[1], asis.score(["boucher"])[0], rtol=1e-6)
    markers = _muse("muse@forms=markers", tmp_path)
    markers.fit(corpus)
    np.testing.assert_allclose(markers.score(["boucher (h/f/x)"])[0], asis.score(["boucher"])[0], rtol=1e-6)
    with pytest.raises(ValueError, match="forms must be one of"):
        _muse("muse@forms=all", tmp_path)


def test_centroid_mixes_each_form_with_its_concept(tmp_path: Path) -> None:
    corpus = ["boulanger", "boulangère", "mitron", "boucher", "bouchère"]
    concepts = ("bake", "bake", "bake", "butcher", "butcher")
    plain, mixed = _muse("muse", tmp_path), _muse("muse@centroid=0.4", tmp_path, concepts)
    plain.fit(corpus)
    mixed.fit(corpus)
    query = plain.embed(["ouvrier boulanger"], "query")[0]
    vectors = plain.embed(corpus, "passage")
    centroid = {}
    for concept in set(concepts):
        total = vectors[[i for i, c in enumerate(concepts) if c == concept]].sum(axis=0)
        centroid[concept] = total / np.linalg.norm(total)
    expected = [0.6 * (query @ v) + 0.4 * (query @ centroid[c]) for v, c in zip(vectors, concepts, strict=True)]
    np.testing.assert_allclose(mixed.score(["ouvrier boulanger"])[0], expected, rtol=1e-5)
    # "mitron" (a baker's boy) moves towards its concept's score
    assert abs(mixed.score(["boulanger"])[0][2] - plain.score(["boulanger"])[0][0]) < abs(
        plain.score(["boulanger"])[0][2] - plain.score(["boulanger"])[0][0]
    )
    with pytest.raises(ValueError, match="needs the concept of each"):
        _muse("muse@centroid=0.4", tmp_path).fit(corpus)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        _muse("muse@centroid=1.5", tmp_path, concepts)


def test_pool_scores_a_concept_by_the_log_sum_exp_of_its_forms(tmp_path: Path) -> None:
    corpus = ["boulanger", "boulangère", "mitron", "boucher", "bouchère", "charcutier"]
    concepts = ("bake", "bake", "bake", "butcher", "butcher", "deli")
    plain, pooled = _muse("muse", tmp_path), _muse("muse@pool=0.05", tmp_path, concepts)
    plain.fit(corpus)
    pooled.fit(corpus)
    query = "ouvrier boulanger"
    raw, got = plain.score([query])[0], pooled.score([query])[0]
    for concept in set(concepts):
        members = [i for i, c in enumerate(concepts) if c == concept]
        lse = 0.05 * np.log(np.exp(raw[members] / 0.05).sum())
        best = members[int(np.argmax(raw[members]))]
        assert got[best] == pytest.approx(lse, abs=1e-6)  # the concept's best form: its log-sum-exp
        # every form of the concept moves by the same amount: its order within the concept stays
        np.testing.assert_allclose(got[members] - raw[members], lse - raw[best], atol=1e-6)
        assert lse - raw[best] >= 0 and (len(members) > 1 or lse == pytest.approx(raw[best]))
    off = _muse("muse@pool=0", tmp_path, concepts)
    off.fit(corpus)
    np.testing.assert_allclose(off.score([query])[0], raw, rtol=1e-6)
    with pytest.raises(ValueError, match="@pool needs the concept of each"):
        _muse("muse@pool=0.05", tmp_path).fit(corpus)
    with pytest.raises(ValueError, match=r"@pool must be in \[0, 1\]"):
        _muse("muse@pool=1.5", tmp_path, concepts)


def test_linker_pools_searched_candidates_as_it_pools_every_form(nor_data: Path, tmp_path: Path) -> None:
    """With @pool, HNSW search pools each candidate over all its concept's forms, not only the
    forms the index returned: same concepts and scores as exact search, which scores every form.
    Its own cache: vectors embedded in other batches (the run's cache) differ by float noise, and
    a score near a rounding boundary then rounds the other way."""
    taxonomy = taxonomy_from_melo(nor_data)
    spec = "muse@centroid=0.2@pool=0.03"
    exact = Linker(taxonomy, spec, languages=["no"], cache_dir=tmp_path, index_kind="exact")
    searched = Linker(taxonomy, spec, languages=["no"], cache_dir=tmp_path)
    plain = Linker(taxonomy, "muse@centroid=0.2", languages=["no"], cache_dir=tmp_path, index_kind="exact")
    queries = ["lege", "sykepleier", "tømrer", "butikkmedarbeider"]
    for got, want, unpooled in zip(searched.link(queries, top_k=5), exact.link(queries, top_k=5),
                                   plain.link(queries, top_k=5), strict=True):  # fmt: skip
        assert [(c.concept_uri, round(c.score, 5)) for c in got] == [(c.concept_uri, round(c.score, 5)) for c in want]
        top = {c.concept_uri: c.score for c in unpooled}
        for c in want:  # pooling only raises a concept's score
            assert c.concept_uri not in top or c.score >= top[c.concept_uri] - 1e-9
    pairs = zip(exact.link(queries, top_k=1), plain.link(queries, top_k=1), strict=True)
    assert any(w[0].score > p[0].score + 1e-6 for w, p in pairs)  # a concept with several matching labels


def test_eval_passes_the_dataset_concepts(nor_data: Path, run_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.csv"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MELO_CACHE": str(run_cache)}
    result = subprocess.run(
        [sys.executable, "-m", "melo_core", "eval", "--data", str(nor_data), "--datasets", "nor_q_no_c_no",
         "--scorers", "muse,muse@centroid=0.4@forms=variants", "--limit-queries", "30", "--depth", "0",
         "--out", str(out), "--quiet"],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    plain, mixed = list(csv.DictReader(out.open(encoding="utf-8")))
    assert (plain["scorer"], mixed["scorer"]) == ("muse", "muse@centroid=0.4@forms=variants")
    assert plain["mrr"] != mixed["mrr"]  # the concepts of nor_q_no_c_no's corpus reached the scorer


def test_pool_mrr_of_the_fusion_grid_matches_the_evaluation(melo_data: Path, run_cache: Path) -> None:
    """The benchmark selects on pooled candidates only; on a real slice that agrees with the full
    evaluation of the same spec, ties included."""
    dataset = load_dataset(melo_data / "processed" / "melo" / "nor_q_no_c_no").subset(60)
    context = dataclasses.replace(ScorerContext.for_dataset(dataset, show_progress=False), cache_dir=str(run_cache))
    grid = fusion_grid.grid_mrr(dataset, "char-tfidf", ["muse"], [0.0, 0.4], ["asis"], context)
    assert len(grid) == 2 * 9
    for spec in ("wsum:0.3*char-tfidf+0.7*muse", "wsum:0.6*char-tfidf+0.4*muse@centroid=0.4"):
        exact = evaluate(dataset, create_scorer(spec, context), Protocol("trec", 0)).metrics["mrr"]
        assert grid[spec] == pytest.approx(exact, abs=2e-3)
    assert len({round(v, 6) for v in grid.values()}) > 1
    pools = candidate_pools([np.array([[0.9, 0.1, 0.5]]), np.array([[0.2, 0.8, 0.5]])], pool=2)
    assert first_occurrences(pools.candidates).sum() == 3  # element 2 pooled twice counts once


def test_linker_scores_forms_and_centroids_like_the_scorer(nor_data: Path, tmp_path: Path) -> None:
    """The app's linker: a title with a gender marker and a paired form links like its plain
    forms, and a concept's score mixes its best label with its centroid as the scorer does."""
    taxonomy = taxonomy_from_melo(nor_data)
    plain = Linker(taxonomy, "muse", languages=["no"], cache_dir=tmp_path, index_kind="exact")
    mixed = Linker(taxonomy, "muse@centroid=0.4@forms=variants", languages=["no"], cache_dir=tmp_path,
                   index_kind="exact")  # fmt: skip
    # Same vectors: one snapshot; exact search scores every form, so no faiss index is built.
    assert len(list((tmp_path / "linker").glob("*.npy"))) == 1 and not (tmp_path / "indexes").exists()
    searched = Linker(taxonomy, "muse@centroid=0.4@forms=variants", languages=["no"], cache_dir=tmp_path)
    Linker(taxonomy, "muse", languages=["no"], cache_dir=tmp_path)
    assert len(list((tmp_path / "indexes").glob("*.faiss"))) == 1  # same vectors, one HNSW index
    assert [c.concept_uri for c in searched.link(["lege"], top_k=3)[0]] == [
        c.concept_uri for c in mixed.link(["lege"], top_k=3)[0]]  # fmt: skip
    assert [c.concept_uri for c in mixed.link(["lege (m/k)"], top_k=5)[0]] == [
        c.concept_uri for c in mixed.link(["lege"], top_k=5)[0]]  # fmt: skip
    paired = mixed.link(["sykepleier/jordmor"], top_k=3)[0]
    nurse, midwife = (plain.link([t], top_k=1)[0][0].concept_uri for t in ("sykepleier", "jordmor"))
    assert {nurse, midwife} <= {c.concept_uri for c in paired}
    best = mixed.link(["lege"], top_k=1)[0][0]
    concept = taxonomy.by_uri[best.concept_uri]
    encoder = plain.components[0].encoder
    labels = list(dict.fromkeys(concept.labels["no"].surface_forms()))
    vectors = encoder.encode(labels, "passage")
    query = encoder.encode(["lege"], "query")[0]
    centroid = vectors.sum(axis=0) / np.linalg.norm(vectors.sum(axis=0))
    assert best.score == pytest.approx(0.6 * float((vectors @ query).max()) + 0.4 * float(centroid @ query), abs=1e-5)
