"""Embedding cache on disk, keyed by encoder spec, role and text.

Layout: ``<root>/<key of spec and role>/shard-*.npz``, each shard holding ``keys`` (16-byte
BLAKE2b digests of the texts) and ``vectors`` (float32). A shard is written under a temporary
name and renamed into place, so a killed process leaves either a whole shard or an ignored
temporary file, never a corrupt cache. Shard names are unique per process, so several
processes can fill the same cache at once; each rescans the folder when it misses.

``cached_encoder(spec)``: one loaded encoder per spec and one cache per folder per process.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import threading
import time
import uuid
import weakref
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from melo_core import config
from melo_core.encoders.base import Encoder, Role
from melo_core.encoders.registry import load_encoder

SHARD_GLOB = "shard-*.npz"
COMPACT_ABOVE = 64  # shards; many small ones come from one-at-a-time queries in the app
STALE_TEMP_SECONDS = 3600


KEY_BYTES = 16


KEY_DTYPE = np.dtype(f"S{KEY_BYTES}")  # numpy compares these byte for byte, NULs included


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()


def as_keys(raw: np.ndarray) -> np.ndarray:
    """Keys stored as rows of 16 bytes, as one array of 16-byte strings (what is sorted and searched)."""
    return np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, KEY_BYTES).view(KEY_DTYPE).ravel()


# The last lists of texts keyed, newest first, with their keys: readiness asks each encoder's
# cache about the same 70,707 known mentions (hashing them took 0.06 s a time; comparing the
# lists, 1 ms), and a symmetric encoder asks again about the few it lacks in between.
_keyed: list[tuple[list[str], np.ndarray]] = []
_keyed_lock = threading.Lock()  # the Link page's server threads share it
KEYED_LISTS = 4


def text_keys(texts: Sequence[str]) -> np.ndarray:
    with _keyed_lock:
        remembered = _remembered(texts)
    if remembered is not None:
        return remembered
    listed = list(texts)
    keys = as_keys(np.frombuffer(b"".join(text_key(t) for t in listed), dtype=np.uint8))
    keys.flags.writeable = False  # shared by the callers that ask for the same texts
    with _keyed_lock:
        # Hashing runs outside the lock; a thread that keyed the same texts meanwhile stored them.
        remembered = _remembered(listed)
        if remembered is not None:
            return remembered
        _keyed.insert(0, (listed, keys))
        del _keyed[KEYED_LISTS:]
    return keys


def _remembered(texts: Sequence[str]) -> np.ndarray | None:
    """The keys of texts keyed lately, moved to the front; call it holding the lock."""
    for position, (known, keys) in enumerate(_keyed):
        if len(texts) == len(known) and list(texts) == known:
            _keyed.insert(0, _keyed.pop(position))
            return keys
    return None


def _space_name(spec: str, role: Role) -> str:
    return hashlib.sha1(f"{spec}\n{role}".encode()).hexdigest()[:20]


class _Shard:
    """One shard's vectors, read from the file when rows are asked for: a process that needs a
    few thousand rows of a space of 360,000 (a query, a linker's known mentions) reads those
    instead of the whole space (1.4 s and 550 MB for one encoder's labels of the MELO union)."""

    def __init__(self, path: Path, vectors: np.ndarray | None = None):
        self.path = path
        self.array = vectors  # in memory: a shard whose vectors could not be located in the file
        self.offset, self.count, self.dim = 0, 0, 0
        if vectors is not None:
            self.count, self.dim = vectors.shape

    @classmethod
    def open(cls, path: Path) -> tuple[_Shard, np.ndarray]:
        """The shard of ``path`` and its keys; its vectors stay in the file where np.savez stored
        them plainly (any other layout is read into memory, as before)."""
        with np.load(path) as shard:
            raw_keys = shard["keys"]
            located = _stored_block(path, shard.zip)
            if located is None:
                return cls(path, np.asarray(shard["vectors"], dtype=np.float32)), raw_keys
        made = cls(path)
        made.offset, (made.count, made.dim) = located
        return made, raw_keys

    def rows(self, local: np.ndarray) -> np.ndarray:
        if self.array is not None:
            return self.array[local]
        # Mapped for this read only: no file stays open between lookups (a space has up to 64 shards).
        block = np.memmap(self.path, dtype="<f4", mode="r", offset=self.offset, shape=(self.count, self.dim))
        try:
            return np.array(block[local], dtype=np.float32)
        finally:
            del block


def _stored_block(path: Path, archive: zipfile.ZipFile) -> tuple[int, tuple[int, int]] | None:
    """(offset, shape) of the float32 rows of ``vectors.npy`` inside the shard (``archive``, as
    np.load opened it) when np.savez stored it uncompressed in C order, as ``_Space.write`` does;
    else None."""
    try:
        info = archive.getinfo("vectors.npy")
        if info.compress_type != zipfile.ZIP_STORED:
            return None
        with open(path, "rb") as handle:
            handle.seek(info.header_offset)
            local = handle.read(30)
            if local[:4] != b"PK\x03\x04":
                return None
            name_length, extra_length = struct.unpack("<HH", local[26:30])
            handle.seek(info.header_offset + 30 + name_length + extra_length)
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(handle)
            elif version == (2, 0):
                shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(handle)
            else:
                return None
            offset = handle.tell()
    except (KeyError, OSError, ValueError, zipfile.BadZipFile, struct.error):
        return None
    if fortran_order or dtype != np.dtype("<f4") or len(shape) != 2:
        return None
    return offset, (int(shape[0]), int(shape[1]))


class _Space:
    """All vectors cached for one (spec, role): every key in memory, the vectors in the shards."""

    def __init__(self, folder: Path, spec: str, role: Role):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        label = folder / "spec.txt"
        if not label.exists():
            label.write_text(f"{spec}\n{role}\n", encoding="utf-8")
        self.reset()

    def reset(self) -> None:
        # Every key once, sorted, beside its row: a sorted array is searched as fast as a dict
        # is probed, and built in a sixth of the time with a tenth of the memory (366,000 keys:
        # 0.34 s and about 50 MB as a dict), which a cold process paid for each space it read.
        self.sorted_keys = np.empty(0, dtype=KEY_DTYPE)
        self.sorted_rows = np.empty(0, dtype=np.int64)
        # Rows are numbered in the order read; block b holds rows starts[b]..., from its shard's local rows.
        self.blocks: list[tuple[_Shard, np.ndarray]] = []
        self.starts: list[int] = []
        self.size = 0
        self.dim = 0
        self.loaded: set[str] = set()

    def refresh(self) -> None:
        for path in sorted(self.folder.glob(SHARD_GLOB)):
            if path.name in self.loaded:
                continue
            try:
                shard, raw_keys = _Shard.open(path)
            except (FileNotFoundError, zipfile.BadZipFile, KeyError, ValueError):
                continue  # removed by a concurrent compaction, or not ours
            self.loaded.add(path.name)
            keys = as_keys(raw_keys)
            local = np.argsort(keys, kind="stable")  # the shard's rows in key order
            ordered = keys[local]
            first = np.ones(len(ordered), dtype=bool)
            first[1:] = ordered[1:] != ordered[:-1]  # a key stored twice: its first row
            fresh = first & (self.rows_of(ordered) < 0)
            if fresh.any():
                ordered, local = ordered[fresh], local[fresh]
                at = np.searchsorted(self.sorted_keys, ordered)
                self.sorted_keys = np.insert(self.sorted_keys, at, ordered)
                self.sorted_rows = np.insert(self.sorted_rows, at, self.size + np.arange(len(local)))
                self.blocks.append((shard, local.astype(np.int64)))
                self.starts.append(self.size)
                self.size += len(local)
                self.dim = shard.dim

    def rows_of(self, keys: np.ndarray) -> np.ndarray:
        """The row of each key (``as_keys``), -1 where it is not cached."""
        if not len(self.sorted_keys):
            return np.full(len(keys), -1, dtype=np.int64)
        at = np.searchsorted(self.sorted_keys, keys).clip(max=len(self.sorted_keys) - 1)
        return np.where(self.sorted_keys[at] == keys, self.sorted_rows[at], -1)

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of rows (each below ``size``), read from their shards."""
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        block_of = np.searchsorted(np.asarray(self.starts), rows, side="right") - 1
        for block in np.unique(block_of).tolist():
            chosen = np.flatnonzero(block_of == block)
            shard, local = self.blocks[block]
            out[chosen] = shard.rows(local[rows[chosen] - self.starts[block]])
        return out

    def write(self, keys: np.ndarray, vectors: np.ndarray) -> str:
        name = f"shard-{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.npz"
        temporary = self.folder / f".tmp-{name}"
        with temporary.open("wb") as handle:
            np.savez(
                handle,
                keys=np.ascontiguousarray(keys, dtype=KEY_DTYPE).view(np.uint8).reshape(-1, KEY_BYTES),
                vectors=np.asarray(vectors, dtype=np.float32),
            )
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.folder / name)
        return name

    def compact(self) -> None:
        """Merge many shards into one; the merged shard lands before the inputs are removed."""
        shards = sorted(self.folder.glob(SHARD_GLOB))
        if len(shards) <= COMPACT_ABOVE:
            return
        self.refresh()
        keys = np.empty(self.size, dtype=KEY_DTYPE)
        keys[self.sorted_rows] = self.sorted_keys
        try:
            vectors = self.vectors(np.arange(self.size))
        except FileNotFoundError:  # another process merged them meanwhile: read what it wrote
            self.reset()
            self.refresh()
            return
        self.write(keys, vectors)
        for path in shards:
            path.unlink(missing_ok=True)
        # The rows pointed into the removed shards: read the merged one, and any shard another
        # process landed after refresh().
        self.reset()
        self.refresh()
        for stale in self.folder.glob(".tmp-shard-*"):
            with contextlib.suppress(FileNotFoundError):  # renamed into place meanwhile by its writer
                if time.time() - stale.stat().st_mtime > STALE_TEMP_SECONDS:
                    stale.unlink(missing_ok=True)


class EmbeddingCache:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._spaces: dict[tuple[str, Role], _Space] = {}

    def _space(self, spec: str, role: Role) -> _Space:
        space = self._spaces.get((spec, role))
        if space is None:
            space = _Space(self.root / _space_name(spec, role), spec, role)
            space.refresh()
            self._spaces[(spec, role)] = space
        return space

    def _rows(self, space: _Space, texts: Sequence[str]) -> np.ndarray:
        keys = text_keys(texts)
        rows = space.rows_of(keys)
        if (rows < 0).any():
            space.refresh()  # another process may have added them
            rows = space.rows_of(keys)
        return rows

    def absent(self, spec: str, role: Role, texts: Sequence[str]) -> list[int]:
        """The positions of ``texts`` not cached, from the keys alone: readiness reads no vector
        (70,707 known mentions are 108 MB of e5-esco's)."""
        return np.flatnonzero(self._rows(self._space(spec, role), texts) < 0).tolist()

    def lookup(self, spec: str, role: Role, texts: Sequence[str]) -> tuple[np.ndarray | None, list[int]]:
        """Cached vectors of ``texts`` (rows of missing texts are zero) and the missing positions."""
        space = self._space(spec, role)
        rows = self._rows(space, texts)
        missing = np.flatnonzero(rows < 0).tolist()
        if space.size == 0:
            return None, missing
        found = np.flatnonzero(rows >= 0)
        out = np.zeros((len(rows), space.dim), dtype=np.float32)
        try:
            out[found] = space.vectors(rows[found])
        except FileNotFoundError:  # a shard merged away by another process: read the space again
            space.reset()
            space.refresh()
            return self.lookup(spec, role, texts)
        return out, missing

    def store(self, spec: str, role: Role, texts: Sequence[str], vectors: np.ndarray) -> None:
        space = self._space(spec, role)
        space.write(text_keys(texts), vectors)
        space.refresh()
        space.compact()


class CachedEncoder:
    """An encoder that embeds each distinct text once, ever, and remembers it on disk."""

    def __init__(self, encoder: Encoder, cache: EmbeddingCache, chunk_size: int = 2048):
        self.encoder = encoder
        self.cache = cache
        self.spec = encoder.spec
        self.dim = encoder.dim
        self.chunk_size = chunk_size

    def missing(self, texts: Sequence[str], role: Role) -> list[str]:
        """The texts not cached yet (for either role, where the encoder is symmetric)."""
        unique = list(dict.fromkeys(texts))
        missing = self.cache.absent(self.spec, role, unique)
        if missing and getattr(self.encoder, "symmetric", False):
            other: Role = "passage" if role == "query" else "query"
            still = self.cache.absent(self.spec, other, [unique[i] for i in missing])
            missing = [missing[i] for i in still]
        return [unique[i] for i in missing]

    def encode(
        self, texts: Sequence[str], role: Role = "query", on_progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        texts = list(texts)
        unique = list(dict.fromkeys(texts))
        cached, missing = self.cache.lookup(self.spec, role, unique)
        vectors = np.zeros((len(unique), self.dim), dtype=np.float32) if cached is None else cached
        if missing and getattr(self.encoder, "symmetric", False):
            # Both roles give the same vectors: a text embedded as the other role is reused (a
            # crosswalk title embedded as a query serves as a known mention, and back).
            other: Role = "passage" if role == "query" else "query"
            found, still = self.cache.lookup(self.spec, other, [unique[i] for i in missing])
            if found is not None and len(still) < len(missing):
                gone = set(still)
                hits = [i for i in range(len(missing)) if i not in gone]
                vectors[[missing[i] for i in hits]] = found[hits]
                missing = [missing[i] for i in sorted(gone)]
        if on_progress is not None and len(unique) > len(missing):
            on_progress(len(unique) - len(missing))
        # Chunks are stored as they finish: an interrupted run keeps what it embedded.
        for begin in range(0, len(missing), self.chunk_size):
            positions = missing[begin : begin + self.chunk_size]
            batch = [unique[i] for i in positions]
            embedded = self.encoder.encode(batch, role)
            self.cache.store(self.spec, role, batch, embedded)
            vectors[positions] = embedded
            if on_progress is not None:
                on_progress(len(positions))
        index = {t: i for i, t in enumerate(unique)}
        return vectors[[index[t] for t in texts]]

    def encode_fresh(self, texts: Sequence[str], role: Role = "query") -> np.ndarray:
        """Embedded without the disk cache: nothing read from it or stored in it (queries kept
        private, bulk --no-query-cache). The last call's vectors stay in memory, per encoder and
        role, so a query that a linker component and its description similarity both read with
        one encoder is embedded once."""
        texts = list(texts)
        unique = list(dict.fromkeys(texts))
        recent = _RECENT.setdefault(self.encoder, {}).get(role, {})
        missing = [t for t in unique if t not in recent]
        if missing:
            vectors = np.asarray(self.encoder.encode(missing, role), dtype=np.float32)
            recent = {**recent, **dict(zip(missing, vectors, strict=True))}
        _RECENT[self.encoder][role] = {t: recent[t] for t in unique}
        return np.stack([recent[t] for t in texts]) if texts else np.zeros((0, self.dim), dtype=np.float32)


# Per encoder and role: the texts of the last encode_fresh call and their vectors (one batch).
_RECENT: weakref.WeakKeyDictionary[Encoder, dict[Role, dict[str, np.ndarray]]] = weakref.WeakKeyDictionary()

_CACHES: dict[Path, EmbeddingCache] = {}
_ENCODERS: dict[tuple[str, str], Encoder] = {}


def cached_encoder(spec: str, cache_dir: str | None = None) -> CachedEncoder:
    """One loaded encoder per spec and one cache per folder per process: a sweep over many
    datasets loads the model and reads the cache shards once."""
    root = Path(cache_dir or config.cache_dir() / "embeddings").resolve()
    cache = _CACHES.setdefault(root, EmbeddingCache(root))
    key = (spec, str(config.models_dir()))  # `domain` is whatever model the models folder holds
    encoder = _ENCODERS.get(key)
    if encoder is None:
        encoder = _ENCODERS[key] = load_encoder(spec)
    return CachedEncoder(encoder, cache)
