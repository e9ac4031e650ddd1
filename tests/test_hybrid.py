"""Hybrid scorers: reciprocal-rank fusion and weighted sums of lexical and dense scorers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from melo_core import MeloDataset, Protocol, ScorerContext, create_scorer, evaluate, load_dataset
from melo_core.scorers.hybrid import POOL, RRF_K, HybridScorer, fuse, top_pool

ENGLISH = ScorerContext("en", ("en",))


# --- specs ---------------------------------------------------------------------------------------


def test_bad_component_is_reported_when_the_scorer_is_made() -> None:
    with pytest.raises(ValueError, match="unknown scorer 'tfidf'"):
        create_scorer("rrf:tfidf+bm25", ENGLISH)


# --- arithmetic ----------------------------------------------------------------------------------


def test_rrf_by_hand() -> None:
    ranks = np.array([[1.0, 2.0, np.inf], [np.inf, 1.0, 2.0]])
    scores = np.zeros_like(ranks)  # ignored by RRF
    assert RRF_K == 60
    np.testing.assert_allclose(fuse("rrf", (1, 1), scores, ranks), [1 / 61, 1 / 62 + 1 / 61, 1 / 62])
    np.testing.assert_allclose(fuse("rrf", (2, 0.5), scores, ranks), [2 / 61, 2 / 62 + 0.5 / 61, 0.5 / 62])


def test_weighted_sum_by_hand() -> None:
    scores = np.array([[1.0, 2.0, 5.0], [0.3, 0.3, 0.3], [-2.0, 0.0, -1.0]])
    ranks = np.ones_like(scores)  # ignored by the weighted sum
    # min-max per component: [0, .25, 1], constant row (span 0) -> [0, 0, 0], [0, 1, .5]
    fused = fuse("wsum", (0.2, 5.0, 0.8), scores, ranks)
    np.testing.assert_allclose(fused, [0.0, 0.2 * 0.25 + 0.8 * 1.0, 0.2 * 1.0 + 0.8 * 0.5])


def test_top_pool_is_best_first() -> None:
    row = np.array([0.1, 0.9, 0.5, 0.7, 0.3, 0.2])
    assert top_pool(row, 3).tolist() == [1, 3, 2]
    assert top_pool(row, 6).tolist() == [1, 3, 2, 4, 5, 0]
    assert top_pool(row, 50).tolist() == [1, 3, 2, 4, 5, 0]
    assert top_pool(np.array([0.5, 0.9, 0.5]), 5).tolist() == [1, 0, 2]  # whole row: ties in corpus order


# --- the scorer ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def english_corpus(datasets_dir: Path) -> list[str]:
    """Five hundred real ESCO surface forms: more than one pool, so some elements are left out."""
    lines = (datasets_dir / "usa_q_en_c_en" / "corpus_elements.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t")[1] for line in lines[:500]]


def test_rrf_scores_only_the_pooled_elements(english_corpus: list[str]) -> None:
    scorer = create_scorer("rrf:char-tfidf+bm25", ENGLISH)
    assert isinstance(scorer, HybridScorer) and scorer.name == "rrf:1*char-tfidf+1*bm25"
    assert [c.name for c in scorer.components] == ["char-tfidf", "bm25"]
    scorer.fit(english_corpus)
    counts = {t: english_corpus.count(t) for t in english_corpus}
    exact = next(t for t in english_corpus if counts[t] == 1 and len(t.split()) >= 3)
    queries = [exact, "chef de cuisine", "software developer"]
    fused = scorer.score(queries)
    assert fused.shape == (len(queries), len(english_corpus)) and fused.dtype == np.float64

    lexical = [c.score(queries) for c in scorer.components]
    for q in range(len(queries)):
        pools = [set(top_pool(m[q], POOL).tolist()) for m in lexical]
        finite = set(np.flatnonzero(np.isfinite(fused[q])).tolist())
        assert finite == pools[0] | pools[1]
        assert len(finite) < len(english_corpus) and np.isneginf(fused[q][list(set(range(500)) - finite)]).all()
        assert (fused[q][list(finite)] > 0).all()

    best = int(np.argmax(fused[0]))
    assert english_corpus[best] == exact
    assert fused[0, best] == pytest.approx(2 / (RRF_K + 1))  # first in both components


def test_a_smaller_pool_leaves_more_out(english_corpus: list[str]) -> None:
    scorer = create_scorer("rrf:char-tfidf+bm25", ENGLISH)
    assert isinstance(scorer, HybridScorer)
    scorer.pool = 5
    scorer.fit(english_corpus)
    fused = scorer.score(["armed forces officer"])[0]
    assert 5 <= np.isfinite(fused).sum() <= 10
    assert np.isfinite(fused).sum() < 500


def test_weighted_sum_of_lexical_and_dense_end_to_end(tmp_path: Path) -> None:
    context = ScorerContext("en", ("en",), cache_dir=str(tmp_path))
    corpus = ["Bäcker", "Krankenpfleger", "Softwareentwickler", "Lehrer", "Tischler"]
    queries = ["baker", "nurse", "software developer", "Lehrer", "teacher", "carpenter"]
    scorer = create_scorer("wsum:0.3*char-tfidf+0.7*muse@threads=1", context)
    assert scorer.name == "wsum:0.3*char-tfidf+0.7*muse@threads=1"
    scorer.fit(corpus)
    fused = scorer.score(queries)
    assert fused.shape == (6, 5) and np.isfinite(fused).all()  # five elements: all in every pool
    assert fused.argmax(axis=1).tolist() == [0, 1, 2, 3, 3, 4]
    assert fused[3, 3] == pytest.approx(1.0)  # exact match: top of both components
    assert (fused >= 0).all() and (fused <= 1.0 + 1e-12).all()
    assert any(tmp_path.iterdir())  # embeddings went to the given cache, nowhere else

    lexical_only = create_scorer("char-tfidf", context)
    lexical_only.fit(corpus)
    # Characters alone pick Tischler for teacher and Softwareentwickler for carpenter: the dense side fixes them.
    assert lexical_only.score(["teacher", "carpenter"]).argmax(axis=1).tolist() == [4, 2]

    again = create_scorer("wsum:0.3*char-tfidf+0.7*muse@threads=1", context)
    again.fit(corpus)
    np.testing.assert_array_equal(again.score(queries), fused)


# --- evaluation ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def norwegian(datasets_dir: Path) -> MeloDataset:
    return load_dataset(datasets_dir / "nor_q_no_c_no").subset(20)


def test_hybrid_evaluation(norwegian: MeloDataset) -> None:
    context = ScorerContext(norwegian.query_language, norwegian.corpus_languages)
    result = evaluate(norwegian, create_scorer("rrf:char-tfidf+bm25", context), Protocol("trec", 100))
    assert result.scorer == "rrf:1*char-tfidf+1*bm25"
    assert len(result.query_ids) == 20
    assert 0 < result.metrics["mrr"] < 1
    first = result.first_ranks()
    assert np.isfinite(first).any() and (first[np.isfinite(first)] <= 100).all()
    assert result.metrics["mrr"] == pytest.approx(np.mean(np.where(np.isfinite(first), 1 / first, 0.0)))


def test_weighted_sum_with_one_zero_weight_ranks_like_the_other_component(norwegian: MeloDataset) -> None:
    """``wsum:1*A+0*B`` scores A's pool by (a - min) / (max - min): an increasing map of A's own
    scores, so within the pool it ranks exactly like A. Two things could still differ: a tie
    group of A straddling A's pool boundary (the pool keeps an arbitrary part of it) and, under
    the trec protocol, rounding to 5 decimals on a different scale. So the exact protocol is
    compared, after checking that A's 100th best score beats its (POOL+1)th on every query."""
    context = ScorerContext(norwegian.query_language, norwegian.corpus_languages)
    char = create_scorer("char-tfidf", context)
    char.fit(norwegian.corpus)
    ordered = -np.sort(-char.score(norwegian.queries), axis=1)
    assert (ordered[:, 99] > ordered[:, POOL]).all()  # no tie group straddles the pool boundary
    assert (ordered[:, 0] > ordered[:, -1]).all()  # span > 0

    protocol = Protocol("exact", 100)
    alone = evaluate(norwegian, create_scorer("char-tfidf", context), protocol)
    fused = evaluate(norwegian, create_scorer("wsum:1*char-tfidf+0*bm25", context), protocol)
    np.testing.assert_array_equal(fused.first_ranks(), alone.first_ranks())
    assert fused.top_ids == alone.top_ids
    assert fused.metrics == pytest.approx(alone.metrics)
    assert np.isfinite(alone.first_ranks()).sum() >= 10  # a real comparison, not inf == inf
