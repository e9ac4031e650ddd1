"""Embedded defaults, overridable by environment variables."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """``MELO_DATA`` if set, else ``./data`` in the project root."""
    return Path(os.environ.get("MELO_DATA") or PROJECT_ROOT / "data")


def cache_dir() -> Path:
    """``MELO_CACHE`` if set, else ``./cache`` in the project root (embeddings, indexes)."""
    return Path(os.environ.get("MELO_CACHE") or PROJECT_ROOT / "cache")


def models_dir() -> Path:
    """``MELO_MODELS`` if set, else ``./models`` in the project root."""
    return Path(os.environ.get("MELO_MODELS") or PROJECT_ROOT / "models")


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
