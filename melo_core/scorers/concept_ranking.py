"""``concepts:SPEC``: rank concepts, one surface form each, as the linker shows them.

A corpus of surface forms lists each concept under several labels, and a form-level ranking
spends places on the second and third labels of a concept already shown. This wrapper keeps the
score of each concept's best form and moves every other form of it below all concepts (in their
own order), so the ranking's head is one form per concept, the order ``Linker.link`` presents.
Where every form of a relevant concept counts as relevant (MELO), no query's first relevant rank
can get worse; the paper's baselines rank forms, so compare like with like.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from melo_core.scorers.base import Scorer, ScorerContext, check_concepts
from melo_core.scorers.dense import concept_groups, concept_segments
from melo_core.scorers.registry import create_scorer, register_family
from melo_core.spec import Spec, WrappedSpec

PREFIX = "concepts:"


def one_form_per_concept(scores: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``scores`` (queries, forms) with each concept's best form kept (the first of tied ones)
    and its other forms moved below every kept form, order among them unchanged."""
    scores = np.asarray(scores, dtype=np.float64)
    order, starts, segment = concept_segments(groups)
    by_concept = scores[:, order]
    best = np.maximum.reduceat(by_concept, starts, axis=1)
    is_best = by_concept == best[:, segment]
    # only the first best form of a concept is kept: count best forms within each segment
    seen = np.cumsum(is_best, axis=1)
    before_segment = np.concatenate([np.zeros((len(scores), 1), seen.dtype), seen[:, starts[1:] - 1]], axis=1)
    kept_sorted = is_best & (seen - before_segment[:, segment] == 1)
    kept = np.empty_like(kept_sorted)
    kept[:, order] = kept_sorted
    finite = np.where(np.isfinite(scores), scores, np.nan)
    with np.errstate(all="ignore"):
        span = np.nan_to_num(np.nanmax(finite, axis=1, keepdims=True) - np.nanmin(finite, axis=1, keepdims=True))
    return np.where(kept, scores, scores - span - 1.0)


class ConceptRankingScorer:
    """Any scorer's ranking with one form per concept at its head."""

    fuses_scorers = True  # known mentions lift the inner scorer's parts, not these scores

    def __init__(self, inner: Scorer, concepts: Sequence[str]):
        self.inner = inner
        self.name = PREFIX + inner.name
        self.concepts = tuple(concepts)
        self.groups = np.zeros(0, dtype=np.int64)

    def fit(self, corpus: Sequence[str]) -> None:
        check_concepts(self.concepts, corpus, f"{self.name}: ranking concepts needs")
        self.inner.fit(corpus)
        self.groups, _ = concept_groups(self.concepts)

    def score(self, queries: Sequence[str]) -> np.ndarray:
        return one_form_per_concept(self.inner.score(queries), self.groups)


def _accepts(spec: Spec) -> bool:
    return isinstance(spec, WrappedSpec) and f"{spec.wrapper}:" == PREFIX


@register_family(_accepts, "concepts:SPEC (SPEC's ranking with one form per concept at its head)")
def _create(spec: Spec, context: ScorerContext) -> ConceptRankingScorer:
    assert isinstance(spec, WrappedSpec)
    return ConceptRankingScorer(create_scorer(spec.inner, context), context.concepts)
