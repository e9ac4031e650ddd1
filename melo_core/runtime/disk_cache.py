"""Pickled results remembered on disk: written atomically, and a stale or partial file reads
as a miss (the caller recomputes) instead of an error; and the stamp that keys a cache entry to
the files it was computed from."""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np


def files_stamp(paths: Iterable[Path], root: Path | None = None, length: int = 16) -> str:
    """Changes when any of ``paths`` is rewritten, or one is added or removed: a hash of each
    file's name (relative to ``root`` when given, else absolute: ``../shared/melo`` and
    ``/work/shared/melo`` are one folder, whose taxonomy took 13 s to build again), size and
    modification time."""
    digest = hashlib.sha1()
    for path in paths:
        info = path.stat()
        name = path.relative_to(root) if root is not None else path.resolve()
        digest.update(f"{name}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:length]


def folder_stamp(folder: Path, length: int = 16) -> str:
    """``files_stamp`` of every file under ``folder``, named relative to it (a model folder)."""
    return files_stamp(sorted(p for p in folder.rglob("*") if p.is_file()), root=folder, length=length)


def texts_digest(texts: Sequence[str]) -> str:
    """What a file computed from exactly these texts, in this order, is named by (a set of mentions)."""
    return hashlib.sha1("\0".join(texts).encode("utf-8", "surrogatepass")).hexdigest()[:20]


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


def save_array(path: Path, array: np.ndarray) -> None:
    """``np.save`` to ``path`` through a temporary file: a reader never sees a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    with temporary.open("wb") as handle:
        np.save(handle, array)
    os.replace(temporary, path)


KEEP_ON_DISK = 2  # the newest matrices of known mentions per folder (the crosswalks'; a Link page session's)


def keep_newest(folder: Path, pattern: str, keep: int = KEEP_ON_DISK) -> None:
    """Remove all but the ``keep`` newest files of ``folder`` matching ``pattern``."""
    for old in sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime)[:-keep]:
        old.unlink(missing_ok=True)
