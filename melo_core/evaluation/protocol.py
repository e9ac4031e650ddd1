"""Evaluate a scorer on a MELO dataset without writing run files.

Ranking protocols
- ``trec`` (default): reproduces trec_eval as the MELO paper ran it. The top ``depth``
  elements are taken by full-precision score (ties: corpus file order, as the paper's stable
  sort did), scores are rounded to 5 decimals, and ties are broken by corpus element id in
  descending order. ``depth=0`` ranks the whole corpus.
- ``exact``: full-precision scores, ties broken by corpus file order.

Retrieval depth: the published lexical and mUSE-CNN runs kept the top 100 elements per query
(a first relevant element below rank 100 adds 0 to MRR); the other published semantic runs
ranked the whole corpus. Queries without relevant elements are skipped, as trec_eval does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from melo_core.esco.datasets import MeloDataset
from melo_core.metrics import DEFAULT_KS, rank_matrix, reciprocal_rank, summarize
from melo_core.scorers.base import Scorer

MODES = ("trec", "exact")
TOP_PREDICTIONS = 10


@dataclass(frozen=True)
class Protocol:
    mode: str = "trec"
    depth: int = 100

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if self.depth < 0:
            raise ValueError("depth must be >= 0 (0 ranks the whole corpus)")

    def describe(self) -> str:
        return f"{self.mode}, depth {self.depth or 'all'}"


@dataclass
class EvaluationResult:
    dataset: str
    scorer: str
    protocol: Protocol
    query_ids: list[str]
    ranks: list[np.ndarray]  # per evaluated query: ranks of its retrieved relevant elements
    n_relevant: np.ndarray
    top_ids: list[list[str]]  # per evaluated query: the best TOP_PREDICTIONS corpus ids
    skipped_queries: int
    seconds: float
    metrics: dict[str, float] = field(default_factory=dict)

    def first_ranks(self) -> np.ndarray:
        """Rank of the first relevant element per query (inf when not retrieved)."""
        return rank_matrix(self.ranks)[:, 0]

    def reciprocal_ranks(self) -> np.ndarray:
        """1 / first rank per query (0 when not retrieved): what MRR averages."""
        return reciprocal_rank(self.first_ranks())


def tie_keys(corpus_ids: list[str], mode: str) -> np.ndarray:
    """Integer keys: on equal scores the element with the larger key ranks first."""
    if mode == "trec":  # trec_eval: docno descending
        order = np.argsort(np.array(corpus_ids, dtype=object), kind="stable")
        keys = np.empty(len(corpus_ids), dtype=np.int64)
        keys[order] = np.arange(len(corpus_ids))
        return keys
    return -np.arange(len(corpus_ids), dtype=np.int64)  # earlier in the corpus first


def _candidates(scores: np.ndarray, depth: int, kth_value: float) -> np.ndarray:
    """Indices of the top ``depth`` scores; ties at the cut keep the earliest elements."""
    above = np.flatnonzero(scores > kth_value)
    ties = np.flatnonzero(scores == kth_value)[: depth - above.size]
    return np.concatenate([above, ties])


def rank_batch(
    scores: np.ndarray, relevant: list[np.ndarray], keys: np.ndarray, protocol: Protocol
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per query: ranks of the retrieved relevant elements, and the top predictions' indices."""
    scores = np.where(np.isnan(scores), -np.inf, scores)
    n_corpus = scores.shape[1]
    depth = protocol.depth if 0 < protocol.depth < n_corpus else 0
    kth = np.partition(scores, n_corpus - depth, axis=1)[:, n_corpus - depth] if depth else None
    ranked = np.round(scores, 5) if protocol.mode == "trec" else scores
    all_ranks, all_top = [], []
    for i, rel in enumerate(relevant):
        row = ranked[i]
        if kth is not None:  # a depth cut
            candidates = _candidates(scores[i], depth, kth[i])
            rel = rel[np.isin(rel, candidates)]
        else:
            candidates = None
        pool_scores = row if candidates is None else row[candidates]
        pool_keys = keys if candidates is None else keys[candidates]
        rel_scores = row[rel][:, None]
        rel_keys = keys[rel][:, None]
        better = (pool_scores[None, :] > rel_scores) | (
            (pool_scores[None, :] == rel_scores) & (pool_keys[None, :] > rel_keys)
        )
        all_ranks.append(np.sort(better.sum(axis=1) + 1))
        # Top predictions: shortlist by score, then order by (score desc, key desc).
        pool = np.arange(n_corpus) if candidates is None else candidates
        k = min(TOP_PREDICTIONS, pool.size)
        if pool.size > k:
            cut = np.partition(row[pool], pool.size - k)[pool.size - k]
            pool = pool[row[pool] >= cut]
        order = np.lexsort((-keys[pool], -row[pool]))
        all_top.append(pool[order[:k]])
    return all_ranks, all_top


def evaluate(
    dataset: MeloDataset,
    scorer: Scorer,
    protocol: Protocol | None = None,
    batch_size: int = 256,
    ks: tuple[int, ...] = DEFAULT_KS,
    on_progress: Callable[[int], None] | None = None,
) -> EvaluationResult:
    """Fit ``scorer`` on the dataset's corpus, rank every query, and compute the metrics.

    ``on_progress`` is called with the number of queries just scored (for progress bars).
    """
    protocol = protocol or Protocol()
    start = time.perf_counter()
    relevant_all = dataset.relevant_indices()
    evaluated = [i for i, rel in enumerate(relevant_all) if rel.size]
    keys = tie_keys(dataset.corpus_ids, protocol.mode)
    scorer.fit(dataset.corpus)
    ranks: list[np.ndarray] = []
    top: list[np.ndarray] = []
    for begin in range(0, len(evaluated), batch_size):
        batch = evaluated[begin : begin + batch_size]
        scores = np.asarray(scorer.score([dataset.queries[i] for i in batch]), dtype=np.float64)
        if scores.shape != (len(batch), len(dataset.corpus)):
            raise ValueError(
                f"scorer {scorer.name} returned shape {scores.shape}, expected {(len(batch), len(dataset.corpus))}"
            )
        batch_ranks, batch_top = rank_batch(scores, [relevant_all[i] for i in batch], keys, protocol)
        ranks.extend(batch_ranks)
        top.extend(batch_top)
        if on_progress:
            on_progress(len(batch))
    if on_progress and len(evaluated) < len(dataset.query_ids):
        on_progress(len(dataset.query_ids) - len(evaluated))
    n_relevant = np.array([relevant_all[i].size for i in evaluated])
    result = EvaluationResult(
        dataset=dataset.name,
        scorer=scorer.name,
        protocol=protocol,
        query_ids=[dataset.query_ids[i] for i in evaluated],
        ranks=ranks,
        n_relevant=n_relevant,
        top_ids=[[dataset.corpus_ids[j] for j in t] for t in top],
        skipped_queries=len(dataset.query_ids) - len(evaluated),
        seconds=time.perf_counter() - start,
    )
    result.metrics = summarize(rank_matrix(ranks), n_relevant, ks)
    return result
