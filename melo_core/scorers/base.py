"""The one protocol every scorer follows, and the context it is created in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class ScorerContext:
    """The task a scorer is made for: lexical scorers choose their text preparation by language."""

    query_language: str | None = None
    corpus_languages: tuple[str, ...] = ()
    cache_dir: str | None = None  # embedding cache of dense scorers; None: config.cache_dir()
    show_progress: bool = True  # progress bars for long embedding runs

    @property
    def languages(self) -> tuple[str, ...]:
        return ((self.query_language,) if self.query_language else ()) + self.corpus_languages


@runtime_checkable
class Scorer(Protocol):
    """Scores queries against a fixed corpus of surface forms. Higher is better."""

    name: str

    def fit(self, corpus: Sequence[str]) -> None:
        """Index the corpus surface forms."""
        ...

    def score(self, queries: Sequence[str]) -> np.ndarray:
        """Dense scores, shape (len(queries), len(corpus)), float64."""
        ...


@runtime_checkable
class ExtendableScorer(Scorer, Protocol):
    """A fitted scorer that also scores queries against extra texts with the representation it
    fitted (same vocabulary, IDF, document-length norm, encoder): the linker's curator aliases
    become extra surface forms without refitting on the corpus."""

    def score_against(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Scores as if ``texts`` were corpus surface forms, shape (len(queries), len(texts)), float64."""
        ...
