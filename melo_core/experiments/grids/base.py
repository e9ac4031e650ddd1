"""The grid protocol and registry (``melo_core.experiments.grids`` lists the built-in grids)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from melo_core.datasets import MeloDataset
from melo_core.errors import MeloInputError
from melo_core.evaluation import EvaluationResult


class Grid(Protocol):
    def score(self, dataset: MeloDataset) -> dict[str, float]:
        """Every configuration's MRR on ``dataset`` (what the selection compares)."""
        ...

    def evaluate(self, dataset: MeloDataset, configuration: str) -> EvaluationResult:
        """The chosen configuration evaluated on ``dataset`` as ``eval`` would."""
        ...


GridFactory = Callable[[dict, Path], Grid]  # (options of the experiment file, data folder)
_GRIDS: dict[str, GridFactory] = {}


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

