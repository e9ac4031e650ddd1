"""Edit distance baseline: rapidfuzz's normalised Indel similarity on lowercased strings."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from rapidfuzz import fuzz, process

from melo_core.scorers.base import ScorerContext
from melo_core.scorers.registry import register


class EditDistanceScorer:
    name = "edit-distance"

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self._corpus: list[str] = []

    def fit(self, corpus: Sequence[str]) -> None:
        # As published: lowercase only, no ASCII folding.
        self._corpus = [c.lower() for c in corpus]

    def score(self, queries: Sequence[str]) -> np.ndarray:
        return process.cdist(
            [q.lower() for q in queries], self._corpus, scorer=fuzz.ratio, dtype=np.float64, workers=self.workers
        )

    def score_against(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        return process.cdist([q.lower() for q in queries], [t.lower() for t in texts], scorer=fuzz.ratio,
                             dtype=np.float64, workers=self.workers)  # fmt: skip


@register("edit-distance")
def _create(context: ScorerContext) -> EditDistanceScorer:
    return EditDistanceScorer()
