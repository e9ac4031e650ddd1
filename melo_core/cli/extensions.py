"""What layers above ``melo_core`` add to its command line, found through entry points.

``melo_core`` imports nothing above it (``tests/test_layers.py``). The crosswalk store (``db``)
joins ``python -m melo_core`` from above instead: ``pyproject.toml`` declares, in the entry-point
group ``melo_studio.cli``, a function that receives an ``Extensions`` and fills it with commands
(``import-taxonomy``, ``import-terms``, ``export``, ``migrate``, ``import-results``) and with ``StoreAccess``,
the two things core commands ask of a store (``eval --store``, ``train --with-decisions``).

Installing the project registers the entry point (``make run`` and ``make test`` do it:
``pip install --no-deps .``). Without it, the core commands work and those needing the store
say how to get it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from melo_core.errors import MeloInputError

if TYPE_CHECKING:
    from melo_core.esco.datasets import MeloDataset
    from melo_core.evaluation.protocol import EvaluationResult

ENTRY_POINT_GROUP = "melo_studio.cli"
INSTALL_HINT = "install the project to get them: `make install`, or `.venv/bin/pip install --no-deps .`"

AddCommands = Callable[[argparse._SubParsersAction], None]
# Stores one evaluation result as a run: (result, dataset, scorer label) -> a line saying where.
RecordRun = Callable[["EvaluationResult", "MeloDataset", str], str]
Decision = tuple[str, str, str | None]  # term label, concept URI, language


@dataclass(frozen=True)
class StoreAccess:
    """The store as core commands use it; ``URL`` None is the default store (``MELO_DB_URL``, else
    ``melo.db``)."""

    # eval --store [--create]: open the store (a bad URL, or no store there unless created, fails
    # here, before any work), record runs, close.
    open_runs: Callable[[str | None, bool], AbstractContextManager[RecordRun]]
    # train --with-decisions: the schemes with current exact/narrow decisions, and those decisions.
    accepted_decisions: Callable[[str | None], tuple[list[str], list[Decision]]]


@dataclass
class Extensions:
    """What the installed entry points add: commands, the store, and the entries that could not
    be loaded (their module is not in this checkout)."""

    commands: list[AddCommands] = field(default_factory=list)
    store: StoreAccess | None = None
    unavailable: list[str] = field(default_factory=list)

    def note(self) -> str | None:
        """A line for ``--help`` and errors when nothing joined the command line, else None."""
        if self.commands and not self.unavailable:
            return None
        if self.unavailable:
            return f"Not loaded: {', '.join(self.unavailable)} (entry points of group {ENTRY_POINT_GROUP})."
        return f"The store's commands (import-taxonomy, import-terms, export, ...) are not here; {INSTALL_HINT}"


@cache
def installed() -> Extensions:
    """The extensions of every installed entry point of ``melo_studio.cli``, loaded once."""
    found = Extensions()
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            register = entry.load()
        except ModuleNotFoundError as exc:
            if exc.name is None or not entry.module.startswith(exc.name):
                raise  # the module is here but something it imports is missing: say so
            found.unavailable.append(f"{entry.name} = {entry.value}")
            continue
        register(found)
    return found


def store_access(needed_by: str) -> StoreAccess:
    """The store, or a one-line error naming ``needed_by`` (e.g. ``--store``) and the fix."""
    store = installed().store
    if store is None:
        raise MeloInputError(f"{needed_by} needs the crosswalk store (db), which joins the command line from above; "
                             f"{INSTALL_HINT}")  # fmt: skip
    return store
