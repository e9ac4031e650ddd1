"""Pickled results remembered on disk: written atomically, and a stale or partial file reads
as a miss (the caller recomputes) instead of an error; and the stamp that keys a cache entry to
the files it was computed from."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np


def files_stamp(paths: Iterable[Path], root: Path | None = None, length: int = 16) -> str:
    """Changes when any of ``paths`` is rewritten with other bytes, or one is added, removed or
    renamed: a hash of each file's name and of its bytes. Names are relative to ``root``, else to
    the folder that holds them all, so the same files anywhere give the same stamp: the data on a
    server, in a clone or at ``../shared/melo`` keeps its caches, and results rows name the same
    data by the same stamp. Not of the modification time: a folder copied or laid out again (a
    clone, ``cp -r``, a restored backup) is the same data."""
    paths = [Path(os.path.abspath(path)) for path in paths]  # links kept: a linked file is named where it is linked
    if root is None:
        root = Path(os.path.commonpath([path.parent for path in paths])) if paths else Path("/")
    root = Path(os.path.abspath(root))
    digest = hashlib.sha1()
    for path, content in zip(paths, content_digests(paths), strict=True):
        digest.update(f"{path.relative_to(root).as_posix()}\0{content}\n".encode())
    return digest.hexdigest()[:length]


CONTENT_MEMO = "stamps/content-digests.json"  # in the cache folder: path -> [size, mtime, inode, sha1]
_memo: dict[str, list[object]] = {}
_memo_file: Path | None = None


def content_digests(paths: Sequence[Path]) -> list[str]:
    """The sha1 of each file's bytes. A file is read once per change of its size, modification time
    or inode: the digests are remembered in the cache folder (a model's 465 MB take 0.6 s to read,
    and every command stamps its data and models)."""
    from melo_core import config

    global _memo, _memo_file
    memo_file = config.cache_dir() / CONTENT_MEMO
    if _memo_file != memo_file:
        _memo, _memo_file = _read_memo(memo_file), memo_file
    digests, new = [], {}
    for path in paths:
        resolved = path.resolve()
        info = resolved.stat()
        seen: list[object] = [info.st_size, info.st_mtime_ns, info.st_ino]
        known = _memo.get(str(resolved))
        if known is None or known[:3] != seen:
            with resolved.open("rb") as handle:
                known = new[str(resolved)] = [*seen, hashlib.file_digest(handle, "sha1").hexdigest()]
        digests.append(str(known[3]))
    if new:
        _memo.update(new)
        _write_memo(memo_file, new)
    return digests


def _read_memo(memo_file: Path) -> dict[str, list[object]]:
    try:
        found = json.loads(memo_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_memo(memo_file: Path, new: dict[str, list[object]]) -> None:
    """Add ``new`` to what is on disk (another process may have added others), drop the files that
    are gone, and write it atomically. A cache that cannot be written costs a read next time."""
    merged = {k: v for k, v in {**_read_memo(memo_file), **new}.items() if os.path.exists(k)}
    try:
        memo_file.parent.mkdir(parents=True, exist_ok=True)
        temporary = memo_file.with_name(f".tmp-{os.getpid()}-{memo_file.name}")
        temporary.write_text(json.dumps(merged), encoding="utf-8")
        os.replace(temporary, memo_file)
    except OSError:
        pass


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
