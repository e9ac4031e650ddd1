"""Metrics on hand-checked rankings (ties included), and agreement with trec_eval (pytrec_eval)."""

from __future__ import annotations

import numpy as np
import pytest

from melo_core.evaluation.protocol import Protocol, rank_batch, tie_keys
from melo_core.metrics import rank_matrix, summarize


def test_hand_checked_metrics() -> None:
    # q1: relevant at ranks 1 and 3 (2 relevant); q2: relevant at rank 4 only; q3: not retrieved.
    ranks = rank_matrix([np.array([3, 1]), np.array([4]), np.array([])])
    n_rel = np.array([2, 1, 1])
    m = summarize(ranks, n_rel, ks=(1, 3, 5))
    assert m["mrr"] == pytest.approx((1 + 1 / 4 + 0) / 3)
    assert m["acc@1"] == pytest.approx(1 / 3)
    assert m["acc@3"] == pytest.approx(1 / 3)
    assert m["acc@5"] == pytest.approx(2 / 3)
    assert m["map"] == pytest.approx(((1 / 1 + 2 / 3) / 2 + 1 / 4 + 0) / 3)
    assert m["p@3"] == pytest.approx((2 / 3 + 0 + 0) / 3)
    assert m["r@5"] == pytest.approx((1 + 1 + 0) / 3)
    assert m["rprec"] == pytest.approx((1 / 2 + 0 + 0) / 3)
    # nDCG@3 of q1: (1 + 1/log2(4)) / (1 + 1/log2(3)).
    ndcg_q1 = (1 + 0.5) / (1 + 1 / np.log2(3))
    assert m["ndcg@3"] == pytest.approx(ndcg_q1 / 3)


def test_trec_mode_breaks_ties_by_id_descending_after_rounding() -> None:
    ids = ["C1", "C2", "C3", "C4"]
    # C2 and C4 differ only below the 5th decimal: trec mode treats them as tied.
    scores = np.array([[0.5, 0.9000001, 0.1, 0.9000002]])
    rel = [np.array([1])]  # C2
    trec, _ = rank_batch(scores, rel, tie_keys(ids, "trec"), Protocol("trec", 0))
    exact, _ = rank_batch(scores, rel, tie_keys(ids, "exact"), Protocol("exact", 0))
    assert trec[0].tolist() == [2]  # C4 > C2 by id
    assert exact[0].tolist() == [2]  # C4 has the higher raw score
    scores_equal = np.array([[0.5, 0.9, 0.1, 0.9]])
    exact_equal, _ = rank_batch(scores_equal, rel, tie_keys(ids, "exact"), Protocol("exact", 0))
    assert exact_equal[0].tolist() == [1]  # exact mode: earlier corpus element first


def test_depth_drops_relevant_elements_below_the_cut() -> None:
    ids = [f"C{i}" for i in range(10)]
    scores = np.linspace(1.0, 0.1, 10)[None, :]
    rel = [np.array([0, 7])]
    ranks, top = rank_batch(scores, rel, tie_keys(ids, "trec"), Protocol("trec", 5))
    assert ranks[0].tolist() == [1]
    assert top[0].tolist() == [0, 1, 2, 3, 4]
    ranks_all, _ = rank_batch(scores, rel, tie_keys(ids, "trec"), Protocol("trec", 0))
    assert ranks_all[0].tolist() == [1, 8]


def test_agrees_with_pytrec_eval_on_random_runs_with_ties() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(7)
    n_queries, n_corpus = 40, 60
    ids = [f"E{rng.integers(0, 10**6):07d}_{i}" for i in range(n_corpus)]
    scores = np.round(rng.random((n_queries, n_corpus)) * 4) / 4  # heavy ties
    relevant = [rng.choice(n_corpus, size=rng.integers(1, 4), replace=False) for _ in range(n_queries)]
    depth = 20
    ranks, _ = rank_batch_trec(scores, relevant, ids, depth)
    ours = summarize(rank_matrix(ranks), np.array([len(r) for r in relevant]), ks=(1, 5, 10))

    # The run trec_eval saw: the top `depth` per query by score (stable), as the paper wrote it.
    run = {}
    for q in range(n_queries):
        order = np.argsort(-scores[q], kind="stable")[:depth]
        run[f"q{q}"] = {ids[i]: float(scores[q, i]) for i in order}
    qrels = {f"q{q}": {ids[i]: 1 for i in rel} for q, rel in enumerate(relevant)}
    measures = {"recip_rank", "map", "success", "P", "recall", "Rprec"}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)

    def mean(name: str) -> float:
        return float(np.mean([per_query[q][name] for q in qrels]))

    assert ours["mrr"] == pytest.approx(mean("recip_rank"), abs=1e-9)
    assert ours["map"] == pytest.approx(mean("map"), abs=1e-9)
    assert ours["acc@1"] == pytest.approx(mean("success_1"), abs=1e-9)
    assert ours["acc@5"] == pytest.approx(mean("success_5"), abs=1e-9)
    assert ours["p@10"] == pytest.approx(mean("P_10"), abs=1e-9)
    assert ours["r@5"] == pytest.approx(mean("recall_5"), abs=1e-9)
    assert ours["rprec"] == pytest.approx(mean("Rprec"), abs=1e-9)


def rank_batch_trec(
    scores: np.ndarray, relevant: list[np.ndarray], ids: list[str], depth: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    return rank_batch(scores, relevant, tie_keys(ids, "trec"), Protocol("trec", depth))
