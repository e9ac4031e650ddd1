"""Random baseline: uniform scores from a seeded generator (the floor any model must beat)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from melo_core.scorers.base import ScorerContext
from melo_core.scorers.registry import register


class RandomScorer:
    name = "random"

    def __init__(self, seed: int = 0):
        self._rng = np.random.default_rng(seed)
        self._size = 0

    def fit(self, corpus: Sequence[str]) -> None:
        self._size = len(corpus)

    def score(self, queries: Sequence[str]) -> np.ndarray:
        return self._rng.random((len(queries), self._size))

    def score_against(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        return self._rng.random((len(queries), len(texts)))


@register("random")
def _create(context: ScorerContext) -> RandomScorer:
    return RandomScorer()
