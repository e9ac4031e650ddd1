"""Grids for leave-one-out experiments: each scores every configuration of a grid on a dataset
(``score``: configuration -> MRR used for choosing) and evaluates a chosen configuration
(``evaluate``). A new grid is one module here with a ``create(options, data_dir)``, listed in
``_BUILTIN``; a grid from elsewhere registers itself with ``register_grid``.

- ``specs``: a list of scorer specs, each evaluated in full;
- ``hybrid``: fusions of one lexical and dense scorers, in tenths and by RRF;
- ``fusion``: fusions times centroid mixing, query forms and known-mention weights (pool MRR);
- ``mention-variants``: mention weights split by scorer kind and language (pool MRR).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from melo_core.errors import MeloInputError
from melo_core.esco.datasets import MeloDataset
from melo_core.evaluation.experiments.grids import fusion, hybrid, mention_variants, specs
from melo_core.evaluation.protocol import EvaluationResult


class Grid(Protocol):
    def score(self, dataset: MeloDataset) -> dict[str, float]:
        """Every configuration's MRR on ``dataset`` (what the selection compares)."""
        ...

    def evaluate(self, dataset: MeloDataset, configuration: str) -> EvaluationResult:
        """The chosen configuration evaluated on ``dataset``: as ``eval`` would where it is a scorer
        spec, else its metric says what it is (``pool_mrr``). A grid that evaluates something
        other than the configuration chosen (an ablation) has ``label(configuration)`` naming it."""
        ...


GridFactory = Callable[[dict, Path], Grid]  # (options of the experiment file, data folder)
_BUILTIN: dict[str, GridFactory] = {"specs": specs.create, "hybrid": hybrid.create, "fusion": fusion.create,
                                    "mention-variants": mention_variants.create}  # fmt: skip
_GRIDS: dict[str, GridFactory] = dict(_BUILTIN)


def register_grid(name: str) -> Callable[[GridFactory], GridFactory]:
    def decorate(factory: GridFactory) -> GridFactory:
        _GRIDS[name] = factory
        return factory

    return decorate


def grid_names() -> list[str]:
    return sorted(_GRIDS)


def create_grid(name: str, options: dict, data_dir: Path) -> Grid:
    if name not in _GRIDS:
        raise MeloInputError(f"unknown grid {name!r}; available: {', '.join(sorted(_GRIDS))}")
    return _GRIDS[name](options, data_dir)
