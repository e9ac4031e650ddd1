"""Embedded defaults, overridable by environment variables, and by a command's options
(``--data``, ``--cache``, ``--models``) for the process that runs it and every process it starts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
_chosen: dict[str, Path] = {}  # what a command's options chose: it wins over the environment


def data_dir() -> Path:
    """The chosen data folder (``--data``), else ``MELO_DATA`` if set, else ``./data`` in the project root."""
    return _chosen.get("data") or Path(os.environ.get("MELO_DATA") or PROJECT_ROOT / "data")


def cache_dir() -> Path:
    """The chosen cache folder (``--cache``), else ``MELO_CACHE`` if set, else ``./cache`` in the
    project root (embeddings, indexes)."""
    return _chosen.get("cache") or Path(os.environ.get("MELO_CACHE") or PROJECT_ROOT / "cache")


def models_dir() -> Path:
    """The chosen models folder (``--models``), else ``MELO_MODELS`` if set, else ``./models`` in the project root."""
    return _chosen.get("models") or Path(os.environ.get("MELO_MODELS") or PROJECT_ROOT / "models")


def folders() -> dict[str, str]:
    """The data, cache and models folders in use here, as absolute paths: what a process started
    from here receives and passes to ``choose_folders`` (a spawned process imports this module
    afresh, and would fall back on the environment and the defaults)."""
    return {"data": os.path.abspath(data_dir()), "cache": os.path.abspath(cache_dir()),
            "models": os.path.abspath(models_dir())}  # fmt: skip


def choose_folders(data: str | Path | None = None, cache: str | Path | None = None,
                   models: str | Path | None = None) -> None:  # fmt: skip
    """Use these folders in this process from now on (None: leave that one as it is). Absolute:
    a process started with another working folder finds the same ones."""
    for name, path in (("data", data), ("cache", cache), ("models", models)):
        if path is not None:
            _chosen[name] = Path(os.path.abspath(path))


@contextmanager
def chosen_folders(data: str | Path | None = None, cache: str | Path | None = None,
                   models: str | Path | None = None) -> Iterator[None]:  # fmt: skip
    """``choose_folders`` while the block runs (a command run in-process by the tests leaves
    nothing behind)."""
    before = dict(_chosen)
    try:
        choose_folders(data, cache, models)
        yield
    finally:
        _chosen.clear()
        _chosen.update(before)


def esco_dir(data: str | Path | None = None) -> Path | None:
    """The ESCO CSV export (``occupations_<lang>.csv``, ``ISCOGroups_<lang>.csv``) that gives the
    MELO union its ISCO groups and descriptions: ``MELO_ESCO`` if set, else an ``esco`` folder
    inside the data folder or beside it (``../shared/esco`` for ``MELO_DATA=../shared/melo``);
    None when there is none."""
    if os.environ.get("MELO_ESCO"):
        return Path(os.environ["MELO_ESCO"])
    root = Path(data) if data is not None else data_dir()
    for candidate in (root / "esco", root.parent / "esco"):
        if any(candidate.glob("occupations_*.csv")):
            return candidate
    return None


def database_url() -> str:
    """``MELO_DB_URL`` if set, else the SQLite file ``melo.db`` in the project root."""
    return os.environ.get("MELO_DB_URL") or f"sqlite:///{PROJECT_ROOT / 'melo.db'}"


DATA_HELP = (
    "MELO data not found. Either download the official MELO benchmark release "
    "(https://github.com/Avature/melo-benchmark: the processed datasets) into ./data, keeping "
    "its layout (data/processed/melo/<dataset>/queries.tsv ...), or set MELO_DATA to a folder "
    "with that layout, e.g. MELO_DATA=../shared/melo."
)
