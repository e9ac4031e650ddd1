"""The ``cache`` command: what the cache folder (``MELO_CACHE``) holds and when each part was last
used, and pruning what has not been used for a while.

Everything in the cache is rebuilt on demand (embeddings, indexes, fitted lexical and linker states,
the known mentions' matrices, the crosswalks' parsed mentions, ONNX exports, unpickled taxonomies,
the unpacked language-identification model, the data and model files' digests),
but nothing removes the states of models, label sets or mentions that no longer exist: a rebuilt
model leaves its old states behind.
An entry is one file or folder directly inside an area (``embeddings/<space>``,
``linker/<state>.npy``, ...). Its last use is the newest access or write time of its files. Most
file systems (``relatime``) move an access time only when it is a day old, so a file read an hour
ago may show yesterday's: an entry goes only when that time is a day older than asked. On a
``noatime`` mount it is the write time, so an entry still in use may go: it is rebuilt at its next
use.
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from melo_core import config
from melo_core.errors import MeloInputError

DAY = 86_400.0
ACCESS_TIME_LAG = DAY  # relatime: an access time moves only once it is a day old


@dataclass(frozen=True)
class CacheEntry:
    area: str  # the folder inside the cache root ("embeddings", "linker", ...); "." for a file at the root
    path: Path
    size: int  # bytes
    last_used: float  # seconds since the epoch: the newest access or write time of its files


def _files(path: Path) -> Iterable[Path]:
    if path.is_symlink() or path.is_file():
        yield path
    elif path.is_dir():
        yield from (p for p in path.rglob("*") if p.is_symlink() or p.is_file())


def describe_entry(area: str, path: Path) -> CacheEntry:
    size, last_used = 0, 0.0
    for file in _files(path):
        try:
            stat = file.lstat()
        except FileNotFoundError:  # removed by another process while we walked
            continue
        size += stat.st_size
        last_used = max(last_used, stat.st_atime, stat.st_mtime)
    if not last_used:  # an empty folder: its own times
        stat = path.lstat()
        last_used = max(stat.st_atime, stat.st_mtime)
    return CacheEntry(area, path, size, last_used)


def cache_entries(root: str | Path | None = None) -> list[CacheEntry]:
    """Every entry of the cache folder, by area then name."""
    root = Path(root or config.cache_dir())
    if not root.is_dir():
        raise MeloInputError("no cache folder here (MELO_CACHE, default ./cache)", root)
    entries = []
    for child in sorted(root.iterdir()):
        if child.is_dir() and not child.is_symlink():
            entries += [describe_entry(child.name, grandchild) for grandchild in sorted(child.iterdir())]
        else:
            entries.append(describe_entry(".", child))
    return entries


def unused_for(entries: Iterable[CacheEntry], days: float, now: float | None = None) -> list[CacheEntry]:
    """The entries not used in the ``days`` days before ``now`` (their times older by the lag of
    access times too)."""
    if days < 0:
        raise MeloInputError(f"days: {days:g} is below 0")
    cutoff = (time.time() if now is None else now) - days * DAY - ACCESS_TIME_LAG
    return [entry for entry in entries if entry.last_used < cutoff]


def remove(entries: Iterable[CacheEntry]) -> int:
    """Remove the entries; the bytes freed."""
    freed = 0
    for entry in entries:
        try:
            if entry.path.is_dir() and not entry.path.is_symlink():
                shutil.rmtree(entry.path)
            else:
                entry.path.unlink()
        except FileNotFoundError:  # another process removed it first
            continue
        freed += entry.size
    return freed


def human_size(size: float) -> str:
    if size < 1000:
        return f"{size:.0f} B"
    for unit in ("KB", "MB"):
        size /= 1000
        if size < 1000:
            return f"{size:.1f} {unit}"
    return f"{size / 1000:.1f} GB"


def summary(entries: Sequence[CacheEntry], days: float, now: float | None = None) -> list[str]:
    """One line per area: its entries, their size, and how much of it was not used for ``days`` days."""
    now = time.time() if now is None else now
    lines = [f"{'area':<12} {'entries':>7} {'size':>9}  not used for {days:g} days"]
    for area in sorted({e.area for e in entries}):
        mine = [e for e in entries if e.area == area]
        stale = unused_for(mine, days, now)
        lines.append(f"{area:<12} {len(mine):>7} {human_size(sum(e.size for e in mine)):>9}  "
                     f"{len(stale)} ({human_size(sum(e.size for e in stale))})")  # fmt: skip
    lines.append(f"{'all':<12} {len(entries):>7} {human_size(sum(e.size for e in entries)):>9}")
    return lines


def cmd_cache(args: argparse.Namespace) -> int:
    """Show what the cache folder holds per area, and with --prune DAYS remove every entry not used
    for that many days (it is rebuilt if it is needed again)."""
    entries, now = cache_entries(args.cache), time.time()  # one "now": the summary counts what is listed
    days = args.prune if args.prune is not None else args.days
    for line in summary(entries, days, now):
        print(line)
    if args.prune is None:
        return 0
    stale = sorted(unused_for(entries, args.prune, now), key=lambda e: e.last_used)
    verb = "would remove" if args.dry_run else "removing"
    for entry in stale:
        used = time.strftime("%Y-%m-%d", time.localtime(entry.last_used))
        print(f"{verb} {entry.path} ({human_size(entry.size)}, last used {used})")
    if args.dry_run:
        print(f"{len(stale)} entries, {human_size(sum(e.size for e in stale))}, would be removed (--dry-run)")
    else:
        print(f"removed {len(stale)} entries, {human_size(remove(stale))} freed")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    cache = commands.add_parser("cache", help="what the cache folder holds; prune what has not been used",
                                description=cmd_cache.__doc__)  # fmt: skip
    cache.add_argument("--cache", default=None, help="the cache folder (default MELO_CACHE, else ./cache)")
    cache.add_argument("--prune", type=float, metavar="DAYS", help="remove every entry not used for DAYS days")
    cache.add_argument("--days", type=float, default=30.0, help="without --prune: the age the summary counts (30)")
    cache.add_argument("--dry-run", action="store_true", help="with --prune: list what would go, remove nothing")
    cache.set_defaults(func=cmd_cache)
