"""Grids for leave-one-out experiments: each scores every configuration of a grid on a dataset
(``score``: configuration -> MRR used for choosing) and evaluates a chosen configuration
(``evaluate``). A new grid is one module here that registers itself with ``register_grid``
(``grids.base``) and is imported below."""

from melo_core.experiments.grids import specs  # noqa: F401  (registers itself)
from melo_core.experiments.grids.base import Grid, create_grid, grid_names, register_grid

__all__ = ["Grid", "create_grid", "grid_names", "register_grid"]
