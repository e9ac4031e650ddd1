"""Ranking metrics computed from the ranks of each query's relevant elements (numpy).

A query is described by the 1-based ranks of its relevant elements that were retrieved
(ranks beyond the retrieval depth are absent) and by its number of relevant elements. The
definitions are trec_eval's: ``recip_rank`` (MRR), ``success_k`` (top-k accuracy), ``map``,
``P_k``, ``recall_k``, ``Rprec``, and ``ndcg_cut_k`` with binary gains. Reciprocal rank and
acc@k are computed here only (``reciprocal_rank``): evaluation, training and the grids call it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

DEFAULT_KS = (1, 5, 10, 20, 100)


def rank_matrix(ranks: Sequence[np.ndarray]) -> np.ndarray:
    """Pad per-query rank arrays into a (queries, max relevant) matrix, sorted, inf-padded."""
    width = max((len(r) for r in ranks), default=0) or 1
    matrix = np.full((len(ranks), width), np.inf)
    for i, r in enumerate(ranks):
        matrix[i, : len(r)] = np.sort(np.asarray(r, dtype=np.float64))
    return matrix


def reciprocal_rank(first_ranks: np.ndarray | float) -> np.ndarray:
    """1 / the rank of the first relevant element, elementwise; 0 where none was found (inf or NaN)."""
    ranks = np.asarray(first_ranks, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(ranks), 1.0 / ranks, 0.0)


def reciprocal_ranks(ranks: np.ndarray) -> np.ndarray:
    return reciprocal_rank(ranks[:, 0])


def mean_reciprocal_rank(first_ranks: Sequence[float] | np.ndarray) -> float:
    """MRR of the first relevant ranks (inf: not found); 0 for no query."""
    first = np.asarray(first_ranks, dtype=np.float64)
    return float(reciprocal_rank(first).mean()) if len(first) else 0.0


def first_rank_accuracy(first_ranks: Sequence[float] | np.ndarray, k: int) -> float:
    """acc@k: the share of queries whose first relevant element ranks k or better."""
    first = np.asarray(first_ranks, dtype=np.float64)
    return float((first <= k).mean()) if len(first) else 0.0


def mrr(ranks: np.ndarray) -> float:
    return mean_reciprocal_rank(ranks[:, 0]) if len(ranks) else 0.0


def accuracy_at_k(ranks: np.ndarray, k: int) -> float:
    return first_rank_accuracy(ranks[:, 0], k) if len(ranks) else 0.0


def precision_at_k(ranks: np.ndarray, k: int) -> float:
    return float(((ranks <= k).sum(axis=1) / k).mean()) if len(ranks) else 0.0


def recall_at_k(ranks: np.ndarray, n_relevant: np.ndarray, k: int) -> float:
    return float(((ranks <= k).sum(axis=1) / n_relevant).mean()) if len(ranks) else 0.0


def r_precision(ranks: np.ndarray, n_relevant: np.ndarray) -> float:
    return float(((ranks <= n_relevant[:, None]).sum(axis=1) / n_relevant).mean()) if len(ranks) else 0.0


def average_precision(ranks: np.ndarray, n_relevant: np.ndarray) -> np.ndarray:
    position = np.arange(1, ranks.shape[1] + 1)[None, :]
    precision = np.where(np.isfinite(ranks), position / ranks, 0.0)
    return precision.sum(axis=1) / n_relevant


def mean_average_precision(ranks: np.ndarray, n_relevant: np.ndarray) -> float:
    return float(average_precision(ranks, n_relevant).mean()) if len(ranks) else 0.0


def ndcg_at_k(ranks: np.ndarray, n_relevant: np.ndarray, k: int) -> float:
    if not len(ranks):
        return 0.0
    gains = np.where(ranks <= k, 1.0 / np.log2(ranks + 1.0), 0.0).sum(axis=1)
    ideal_discounts = np.cumsum(1.0 / np.log2(np.arange(2, k + 2)))
    ideal = ideal_discounts[np.minimum(n_relevant, k) - 1]
    return float((gains / ideal).mean())


def summarize(ranks: np.ndarray, n_relevant: np.ndarray, ks: Iterable[int] = DEFAULT_KS) -> dict[str, float]:
    """All metrics, keyed as in the evaluation CSV (``mrr``, ``acc@k``, ``map``, ...)."""
    n_relevant = np.asarray(n_relevant)
    out = {"mrr": mrr(ranks), "map": mean_average_precision(ranks, n_relevant), "rprec": r_precision(ranks, n_relevant)}
    for k in ks:
        out[f"acc@{k}"] = accuracy_at_k(ranks, k)
        out[f"p@{k}"] = precision_at_k(ranks, k)
        out[f"r@{k}"] = recall_at_k(ranks, n_relevant, k)
        out[f"ndcg@{k}"] = ndcg_at_k(ranks, n_relevant, k)
    return out


# trec_eval names of the published summary files -> our metric keys.
TREC_NAMES = {
    "recip_rank": "mrr",
    "map": "map",
    "Rprec": "rprec",
    **{f"success_{k}": f"acc@{k}" for k in (1, 5, 10)},
    **{f"P_{k}": f"p@{k}" for k in (5, 10, 20)},
    **{f"recall_{k}": f"r@{k}" for k in (5, 10, 20)},
}
