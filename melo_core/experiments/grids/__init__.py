"""Grids for leave-one-out experiments: each scores every configuration of a grid on a dataset
(``score``: configuration -> MRR used for choosing) and evaluates a chosen configuration
(``evaluate``). A new grid is one module here that registers itself with ``register_grid``."""

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
    _load_builtin()
    return sorted(_GRIDS)


def create_grid(name: str, options: dict, data_dir: Path) -> Grid:
    _load_builtin()
    if name not in _GRIDS:
        raise MeloInputError(f"unknown grid {name!r}; available: {', '.join(sorted(_GRIDS))}")
    return _GRIDS[name](options, data_dir)


def _load_builtin() -> None:
    from melo_core.experiments.grids import specs  # noqa: F401  (registers itself)
