"""Pickled results remembered on disk: written atomically, and a stale or partial file reads
as a miss (the caller recomputes) instead of an error."""

from __future__ import annotations

import os
import pickle
from pathlib import Path


def load_pickle(path: Path) -> object | None:
    if not path.is_file():
        return None
    try:
        return pickle.loads(path.read_bytes())
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None


def save_pickle(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    temporary.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    os.replace(temporary, path)
