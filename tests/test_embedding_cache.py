"""The on-disk embedding cache: each distinct text embedded once, across restarts, crashes and processes."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from melo_core.encoders import CachedEncoder, EmbeddingCache, Encoder, Role, load_encoder
from melo_core.encoders import cache as cache_module
from tests.conftest import run_at_once

ROOT = Path(__file__).resolve().parent.parent
SPEC = "muse"  # the key of muse@threads=1

TITLES = [
    "nurse",
    "baker",
    "software developer",
    "Krankenpfleger",
    "boulanger",
    "enfermera",
    "carpenter",
    "Tischler",
    "teacher",
    "Lehrer",
    "data scientist",
    "pastry chef",
]


class CountingEncoder:
    """Delegates to a real encoder and records every text it was asked to embed."""

    def __init__(self, inner: Encoder):
        self.inner = inner
        self.spec = inner.spec
        self.dim = inner.dim
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str], role: Role = "query") -> np.ndarray:
        self.seen.extend(texts)
        return self.inner.encode(texts, role)


@pytest.fixture(scope="module")
def muse() -> Encoder:
    return load_encoder("muse@threads=1")


@pytest.fixture(scope="module")
def reference(muse: Encoder) -> dict[str, np.ndarray]:
    """Each title embedded on its own by the real encoder (mUSE-CNN varies ~1e-7 with batch position)."""
    return dict(zip(TITLES, muse.encode(TITLES), strict=True))


def counting(muse: Encoder, root: Path, chunk_size: int = 2048) -> tuple[CountingEncoder, CachedEncoder]:
    inner = CountingEncoder(muse)
    return inner, CachedEncoder(inner, EmbeddingCache(root), chunk_size=chunk_size)


def space_folder(root: Path, spec: str = SPEC, role: Role = "query") -> Path:
    return root / cache_module._space_name(spec, role)


def assert_matches(vectors: np.ndarray, texts: Sequence[str], reference: dict[str, np.ndarray]) -> None:
    assert vectors.shape == (len(texts), 512) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, np.stack([reference[t] for t in texts]), atol=1e-5)


def test_each_distinct_text_is_embedded_once_even_after_a_restart(
    muse: Encoder, reference: dict[str, np.ndarray], tmp_path: Path
) -> None:
    texts = ["nurse", "baker", "nurse", "Krankenpfleger", "baker"]
    inner, encoder = counting(muse, tmp_path)
    first = encoder.encode(texts)
    assert inner.seen == ["nurse", "baker", "Krankenpfleger"]
    assert_matches(first, texts, reference)
    np.testing.assert_array_equal(first[0], first[2])

    inner, encoder = counting(muse, tmp_path)  # a restart: new cache object on the same folder
    again = encoder.encode(texts)
    assert inner.seen == []
    np.testing.assert_array_equal(again, first)
    assert (space_folder(tmp_path) / "spec.txt").read_text(encoding="utf-8") == "muse\nquery\n"


def test_partial_overlap_embeds_only_the_new_texts(
    muse: Encoder, reference: dict[str, np.ndarray], tmp_path: Path
) -> None:
    inner, encoder = counting(muse, tmp_path)
    encoder.encode(TITLES[:6])
    inner.seen.clear()
    texts = TITLES[4:9]
    vectors = encoder.encode(texts)
    assert inner.seen == TITLES[6:9]
    assert_matches(vectors, texts, reference)

    inner, encoder = counting(muse, tmp_path)
    progress: list[int] = []
    vectors = encoder.encode(TITLES, on_progress=progress.append)
    assert inner.seen == TITLES[9:]
    assert progress == [9, 3]  # cached first, then the embedded chunk
    assert_matches(vectors, TITLES, reference)


def test_roles_and_specs_are_separate_spaces(muse: Encoder, reference: dict[str, np.ndarray], tmp_path: Path) -> None:
    texts = TITLES[:4]
    inner, encoder = counting(muse, tmp_path)
    encoder.encode(texts, "query")
    encoder.encode(texts, "passage")  # same texts, other role: not served from the query space
    assert inner.seen == texts + texts
    assert space_folder(tmp_path, role="query") != space_folder(tmp_path, role="passage")

    paper = CountingEncoder(load_encoder("muse@threads=1@template=paper"))
    assert paper.spec == "muse@template=paper"
    vectors = CachedEncoder(paper, EmbeddingCache(tmp_path)).encode(texts)
    assert paper.seen == texts
    assert np.abs(vectors - np.stack([reference[t] for t in texts])).max() > 0.05  # not muse's cached vectors
    assert len(list(tmp_path.iterdir())) == 3


def test_empty_and_unseen_lookups(muse: Encoder, tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    assert cache.lookup(SPEC, "query", ["nurse"]) == (None, [0])
    _, encoder = counting(muse, tmp_path)
    assert encoder.encode([]).shape == (0, 512)
    encoder.encode(["nurse"])
    vectors, missing = EmbeddingCache(tmp_path).lookup(SPEC, "query", ["baker", "nurse"])
    assert missing == [0] and vectors is not None
    assert not vectors[0].any() and vectors[1].any()


# Children import only the encoders package, not melo_core/__init__ (scikit-learn, loaders): 3 s less each.
LIGHT_IMPORT = textwrap.dedent(
    """
    import sys, types
    package = types.ModuleType("melo_core")
    package.__path__ = ["melo_core"]
    sys.modules["melo_core"] = package
    """
)

CRASH_CHILD = LIGHT_IMPORT + textwrap.dedent(
    """
    import io, os, signal, sys
    import numpy as np
    from melo_core.encoders import EmbeddingCache

    root, vectors_file, spec = sys.argv[1:4]
    texts = sys.argv[4:]
    vectors = np.load(vectors_file)
    half = len(texts) // 2
    cache = EmbeddingCache(root)
    cache.store(spec, "query", texts[:half], vectors[:half])

    real_savez = np.savez

    def savez_then_die(handle, **arrays):  # killed half-way through writing the second shard
        buffer = io.BytesIO()
        real_savez(buffer, **arrays)
        handle.write(buffer.getvalue()[: buffer.tell() // 2])
        handle.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    np.savez = savez_then_die
    cache.store(spec, "query", texts[half:], vectors[half:])
    print("survived")
    """
)


def test_a_process_killed_while_writing_leaves_a_usable_cache(
    muse: Encoder, reference: dict[str, np.ndarray], tmp_path: Path
) -> None:
    texts = TITLES[:8]
    np.save(tmp_path / "vectors.npy", np.stack([reference[t] for t in texts]))
    root = tmp_path / "cache"
    child = subprocess.run(
        [sys.executable, "-c", CRASH_CHILD, str(root), str(tmp_path / "vectors.npy"), SPEC, *texts],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert "survived" not in child.stdout
    folder = space_folder(root)
    assert len(list(folder.glob("shard-*.npz"))) == 1
    (partial,) = folder.glob(".tmp-shard-*.npz")
    assert partial.stat().st_size > 0

    vectors, missing = EmbeddingCache(root).lookup(SPEC, "query", texts)
    assert missing == [4, 5, 6, 7]
    assert vectors is not None
    assert_matches(vectors[:4], texts[:4], reference)

    inner, encoder = counting(muse, root)
    assert_matches(encoder.encode(texts), texts, reference)
    assert inner.seen == texts[4:]  # the interrupted run kept its finished shard
    assert partial.exists()  # young temporary files are left alone (another process may be writing)


FILL_CHILD = LIGHT_IMPORT + textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from melo_core.encoders import CachedEncoder, EmbeddingCache, load_encoder
    from melo_core.encoders import cache as cache_module

    root, ready, go = sys.argv[1:4]
    texts = sys.argv[4:]
    cache_module.COMPACT_ABOVE = 3  # compactions race with the other process's writes too
    encoder = CachedEncoder(load_encoder("muse@threads=1"), EmbeddingCache(root), chunk_size=2)
    encoder.encoder.encode(["warm up"])
    Path(ready).touch()
    deadline = time.time() + 60
    while not Path(go).exists():
        if time.time() > deadline:
            sys.exit("never told to go")
        time.sleep(0.005)
    vectors = encoder.encode(texts)
    print(len(texts), vectors.shape)
    """
)


def test_two_processes_fill_the_same_cache_at_once(
    muse: Encoder, reference: dict[str, np.ndarray], tmp_path: Path
) -> None:
    root, go = tmp_path / "cache", tmp_path / "go"
    shares = {"a": TITLES[:8], "b": TITLES[4:]}  # four titles in common
    children = {
        name: subprocess.Popen(
            [sys.executable, "-c", FILL_CHILD, str(root), str(tmp_path / name), str(go), *texts],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, texts in shares.items()
    }
    try:
        deadline = time.time() + 90
        while not all((tmp_path / name).exists() for name in shares):
            assert time.time() < deadline, "children did not start"
            assert all(c.poll() is None for c in children.values()), [c.communicate() for c in children.values()]
            time.sleep(0.02)
        go.touch()
        outputs = {name: child.communicate(timeout=90) for name, child in children.items()}
    finally:
        for child in children.values():
            if child.poll() is None:
                child.kill()
    for name, (stdout, stderr) in outputs.items():
        assert children[name].returncode == 0, stderr
        assert stdout.split()[0] == str(len(shares[name]))

    assert not list(space_folder(root).glob(".tmp-*"))
    inner, encoder = counting(muse, root)
    assert_matches(encoder.encode(TITLES), TITLES, reference)
    assert inner.seen == []


def test_many_shards_are_compacted_without_losing_vectors(
    muse: Encoder, reference: dict[str, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "COMPACT_ABOVE", 3)
    _, encoder = counting(muse, tmp_path, chunk_size=2)
    encoder.encode(TITLES[:10])  # five shards: the fourth triggers a merge
    shards = sorted(space_folder(tmp_path).glob("shard-*.npz"))
    assert 1 <= len(shards) <= 3
    with np.load(shards[0]) as merged:
        assert merged["keys"].shape == (8, cache_module.KEY_BYTES)
    inner, encoder = counting(muse, tmp_path, chunk_size=2)
    assert_matches(encoder.encode(TITLES), TITLES, reference)
    assert inner.seen == TITLES[10:]


def test_compaction_sees_shards_written_by_another_process_meanwhile(
    muse: Encoder, reference: dict[str, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "COMPACT_ABOVE", 2)
    mine = EmbeddingCache(tmp_path)
    for title in TITLES[:2]:
        mine.store(SPEC, "query", [title], reference[title][None])
    theirs = EmbeddingCache(tmp_path)._space(SPEC, "query")  # another process's view of the same space
    real_write = cache_module._Space.write

    def write_while_another_process_writes(self: cache_module._Space, keys: np.ndarray, vectors: np.ndarray) -> str:
        written = real_write(self, keys, vectors)
        if len(keys) > 1:  # the merged shard has landed; the other process lands a shard now
            monkeypatch.setattr(cache_module._Space, "write", real_write)
            theirs.write(cache_module.text_keys(["carpenter"]), reference["carpenter"][None])
        return written

    monkeypatch.setattr(cache_module._Space, "write", write_while_another_process_writes)
    mine.store(SPEC, "query", [TITLES[2]], reference[TITLES[2]][None])  # third shard: compaction
    assert len(list(space_folder(tmp_path).glob("shard-*.npz"))) == 2  # merged + the other process's

    vectors, missing = mine.lookup(SPEC, "query", [*TITLES[:3], "carpenter"])
    assert missing == []  # the other process's shard is read, not skipped as if already loaded
    assert vectors is not None
    assert_matches(vectors, [*TITLES[:3], "carpenter"], reference)


def test_a_reader_whose_shards_were_merged_away_reads_the_merged_one(
    reference: dict[str, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Vectors stay in the shard files until asked for; another process may merge those files
    away in between (here: after this reader has read the keys, before it reads the rows)."""
    monkeypatch.setattr(cache_module, "COMPACT_ABOVE", 2)
    writer = EmbeddingCache(tmp_path)
    for title in TITLES[:2]:
        writer.store(SPEC, "query", [title], reference[title][None])
    reader = EmbeddingCache(tmp_path)
    vectors, missing = reader.lookup(SPEC, "query", TITLES[:2])
    assert missing == [] and vectors is not None
    assert_matches(vectors, TITLES[:2], reference)
    before = sorted(p.name for p in space_folder(tmp_path).glob("shard-*.npz"))
    writer.store(SPEC, "query", [TITLES[2]], reference[TITLES[2]][None])  # third shard: merged into one
    assert not set(before) & {p.name for p in space_folder(tmp_path).glob("shard-*.npz")}
    vectors, missing = reader.lookup(SPEC, "query", TITLES[:3])
    assert missing == [] and vectors is not None
    assert_matches(vectors, TITLES[:3], reference)


def test_a_shard_written_another_way_is_read_whole(reference: dict[str, np.ndarray], tmp_path: Path) -> None:
    """Rows are read in place only from an uncompressed C-order float32 block, as np.savez
    writes it; a compressed shard (another tool's) is read into memory as before."""
    folder = space_folder(tmp_path)
    EmbeddingCache(tmp_path).store(SPEC, "query", ["nurse"], reference["nurse"][None])
    keys = np.frombuffer(b"".join(cache_module.text_key(t) for t in ("baker", "teacher")), dtype=np.uint8)
    np.savez_compressed(folder / "shard-00000000000000000001-1-compress.npz", keys=keys.reshape(-1, cache_module.KEY_BYTES),
                        vectors=np.stack([reference["baker"], reference["teacher"]]))  # fmt: skip
    vectors, missing = EmbeddingCache(tmp_path).lookup(SPEC, "query", ["teacher", "nurse", "baker", "Lehrer"])
    assert missing == [3] and vectors is not None
    assert_matches(vectors[:3], ["teacher", "nurse", "baker"], reference)
    assert not vectors[3].any()


def test_compaction_survives_a_temporary_file_renamed_meanwhile(
    muse: Encoder, reference: dict[str, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "COMPACT_ABOVE", 1)
    cache = EmbeddingCache(tmp_path)
    cache.store(SPEC, "query", ["nurse"], reference["nurse"][None])
    folder = space_folder(tmp_path)
    in_flight = folder / ".tmp-shard-00000000000000000001-1-deadbeef.npz"  # another process, mid-write
    in_flight.write_bytes(b"PK")
    real_stat = Path.stat

    def stat_after_rename(self: Path, **kwargs: bool) -> os.stat_result:
        if self == in_flight and os.path.exists(in_flight):
            in_flight.unlink()  # the other process renames its finished shard right now
        return real_stat(self, **kwargs)

    monkeypatch.setattr(Path, "stat", stat_after_rename)
    cache.store(SPEC, "query", ["baker"], reference["baker"][None])  # second shard: compaction
    vectors, missing = EmbeddingCache(tmp_path).lookup(SPEC, "query", ["nurse", "baker"])
    assert missing == [] and vectors is not None
    assert_matches(vectors, ["nurse", "baker"], reference)


def test_stale_temporary_files_are_removed_on_compaction(
    reference: dict[str, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "COMPACT_ABOVE", 1)
    cache = EmbeddingCache(tmp_path)
    cache.store(SPEC, "query", ["nurse"], reference["nurse"][None])
    folder = space_folder(tmp_path)
    stale, young = folder / ".tmp-shard-old.npz", folder / ".tmp-shard-young.npz"
    stale.write_bytes(b"PK")
    young.write_bytes(b"PK")
    old = time.time() - cache_module.STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    cache.store(SPEC, "query", ["baker"], reference["baker"][None])
    assert not stale.exists() and young.exists()


def test_fill_cache_embeds_one_chunk_in_process_and_more_with_workers(
    reference: dict[str, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One chunk is embedded by the encoder already loaded (a worker would import its engine again,
    seconds for torch models); more chunks go to worker processes, which start even when
    ``__main__`` is a file that fails when run again (under Streamlit, the page: spawn would run it
    in every worker, and the pool would restart them for ever). The cache holds the same either way."""
    import multiprocessing
    import threading
    import types

    from melo_core.encoders import prefill

    spawned: list[str] = []
    real_context = multiprocessing.get_context

    def watched(method: str | None = None) -> object:
        spawned.append(str(method))
        return real_context(method)

    monkeypatch.setattr(prefill.multiprocessing, "get_context", watched)
    progress: list[int] = []
    one = tmp_path / "one"
    assert prefill.fill_cache(SPEC, {"query": TITLES}, one, workers=2, on_progress=progress.append) == len(TITLES)
    assert not spawned and progress == [len(TITLES)]
    assert prefill.fill_cache(SPEC, {"query": TITLES}, one, workers=2) == 0  # all cached

    page = tmp_path / "page.py"
    page.write_text("raise RuntimeError('a Streamlit page run again in a worker')\n", encoding="utf-8")
    main = types.ModuleType("__main__")
    main.__file__, main.__spec__ = str(page), None
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(prefill, "CHUNK", 5)  # three chunks: workers
    many = tmp_path / "many"
    embedded: list[int] = []
    filling = threading.Thread(target=lambda: embedded.append(prefill.fill_cache(SPEC, {"query": TITLES}, many)),
                               daemon=True)  # fmt: skip
    filling.start()
    filling.join(timeout=120)  # the old pool restarted its failing workers for ever
    assert embedded == [len(TITLES)] and spawned == ["spawn"]
    assert sys.modules["__main__"] is main  # given back
    for root in (one, many):
        cached = CachedEncoder(load_encoder(SPEC), EmbeddingCache(root))
        assert not cached.missing(TITLES, "query")
        assert_matches(cached.encode(TITLES, "query"), TITLES, reference)


def test_fill_cache_gives_every_worker_several_jobs(muse: Encoder, tmp_path: Path) -> None:
    """A stage of long texts (ESCO's 3,561 descriptions) was two jobs of 2,048 and 1,513: one worker
    idle for the last quarter and no progress until a job ended. Now about eight jobs per worker
    (64 texts at the least), each reported as it ends, and the cache holds what one call gives."""
    from melo_core.encoders import prefill

    texts = [f"{title} {i}" for i, title in enumerate(TITLES * (300 // len(TITLES) + 1))][:300]
    progress: list[int] = []
    assert prefill.fill_cache(SPEC, {"query": texts}, tmp_path, workers=2, on_progress=progress.append) == 300
    assert sorted(progress) == [44, 64, 64, 64, 64]  # 300 / (2 workers x 8) = 19 per job, raised to 64
    cached = CachedEncoder(load_encoder(SPEC), EmbeddingCache(tmp_path))
    np.testing.assert_allclose(cached.encode(texts, "query"), muse.encode(texts), atol=1e-5)


def test_keys_that_differ_only_in_nul_bytes_stay_apart_through_reads_and_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys are searched as fixed-width byte strings; a digest may end in (or be mostly) NUL bytes,
    which must neither match another key nor be cut when a compaction writes the keys back."""
    monkeypatch.setattr(cache_module, "COMPACT_ABOVE", 2)
    width = cache_module.KEY_BYTES
    zero, one_last, one_first = b"\0" * width, b"\0" * (width - 1) + b"\1", b"\1" + b"\0" * (width - 1)
    space = cache_module._Space(tmp_path / "space", "test", "query")
    as_keys = cache_module.as_keys

    def keys(*raw: bytes) -> np.ndarray:
        return as_keys(np.frombuffer(b"".join(raw), dtype=np.uint8))

    space.write(keys(one_last, zero, one_last), np.array([[1.0, 0], [2, 0], [9, 9]], dtype=np.float32))
    space.refresh()
    space.write(keys(zero, one_first), np.array([[8.0, 8], [3, 0]], dtype=np.float32))  # zero again: the first stays
    space.refresh()
    wanted = keys(one_first, zero, one_last, b"\2" * width)
    assert space.rows_of(wanted)[3] == -1
    assert space.vectors(space.rows_of(wanted)[:3])[:, 0].tolist() == [3.0, 2.0, 1.0]

    space.write(keys(b"\3" * width), np.array([[4.0, 0]], dtype=np.float32))
    space.compact()  # three shards: merged into one, keys written back from the sorted index
    assert len(list((tmp_path / "space").glob("shard-*.npz"))) == 1
    assert space.size == 4
    rows = space.rows_of(keys(one_first, zero, one_last, b"\3" * width))
    assert space.vectors(rows)[:, 0].tolist() == [3.0, 2.0, 1.0, 4.0]


def test_what_is_missing_is_told_by_the_keys_without_reading_vectors(
    muse: Encoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readiness asks which of 70,707 known mentions each encoder has cached, at every cold `link`:
    the keys answer it; reading their vectors (108 MB of e5-esco's) was wasted."""
    CachedEncoder(muse, EmbeddingCache(tmp_path)).encode(TITLES[:6], "query")

    def no_reads(space: object, rows: np.ndarray) -> np.ndarray:
        raise AssertionError("a vector was read")

    monkeypatch.setattr(cache_module._Space, "vectors", no_reads)
    fresh = CachedEncoder(muse, EmbeddingCache(tmp_path))
    assert fresh.missing(TITLES, "query") == TITLES[6:]
    assert fresh.missing(TITLES, "passage") == TITLES[6:]  # muse is symmetric: the query space serves
    _, one_sided = counting(muse, tmp_path)  # says nothing of symmetry: its passage space is its own
    assert one_sided.missing(TITLES[4:8], "passage") == TITLES[4:8]
    assert EmbeddingCache(tmp_path).absent(SPEC, "query", [TITLES[5], TITLES[6], "nurse"]) == [1]


def test_the_same_texts_are_keyed_once_for_every_encoder_that_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Readiness asks each encoder's cache about the same known mentions: their keys are hashed
    once while the texts asked stay the same, and shared read-only."""
    hashed: list[str] = []
    key = cache_module.text_key

    def hashing(text: str) -> bytes:
        hashed.append(text)
        return key(text)

    monkeypatch.setattr(cache_module, "text_key", hashing)
    monkeypatch.setattr(cache_module, "_keyed", [])
    first = cache_module.text_keys(list(TITLES))
    again = cache_module.text_keys([str(t) for t in TITLES])  # equal texts, another list
    assert len(hashed) == len(TITLES) and np.array_equal(first, again)
    with pytest.raises(ValueError):
        again[0] = b"x"  # shared with the other callers
    other = cache_module.text_keys(TITLES[:3])  # the few one encoder lacks, asked in between
    assert len(hashed) == len(TITLES) + 3 and np.array_equal(other, first[:3])
    assert cache_module.text_keys(list(TITLES)) is first  # still known: not hashed again
    assert len(hashed) == len(TITLES) + 3
    for extra in range(cache_module.KEYED_LISTS):
        cache_module.text_keys([f"text {extra}"])
    cache_module.text_keys(list(TITLES))  # pushed out by as many newer lists: hashed again
    assert len(hashed) == 2 * len(TITLES) + 3 + cache_module.KEYED_LISTS
    assert list(cache_module.text_keys(["a", "b"])) == [key("a"), key("b")]


def test_text_keys_serve_threads_that_ask_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Link page's server threads key texts at the same time: each gets its own texts' keys,
    and none fails while another reorders the remembered lists (without the lock two threads
    moving the same list raised IndexError in 3 of 3 runs of this test)."""
    monkeypatch.setattr(cache_module, "_keyed", [])
    lists = [[f"title {i}-{j}" for j in range(50)] for i in range(cache_module.KEYED_LISTS + 1)]
    expected = [as_expected(texts) for texts in lists]
    failures: list[str] = []

    def ask(offset: int) -> None:
        try:
            for call in range(6000):
                which = (offset + call) % len(lists)
                if not np.array_equal(cache_module.text_keys(lists[which]), expected[which]):
                    failures.append(f"wrong keys for list {which}")
        except Exception as exc:  # any failure in a thread is what this test looks for
            failures.append(repr(exc))

    run_at_once([functools.partial(ask, offset) for offset in range(8)])
    assert failures == []


def test_threads_keying_the_same_new_texts_remember_them_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads that key the same new texts at once all get their keys, and the texts take one of
    the remembered places, not one per thread (each hashes outside the lock)."""
    monkeypatch.setattr(cache_module, "_keyed", [])
    texts = [f"clerk {j}" for j in range(20_000)]
    answers: list[np.ndarray] = []
    run_at_once([lambda: answers.append(cache_module.text_keys(texts)) for _ in range(4)])
    assert len(answers) == 4 and all(np.array_equal(keys, as_expected(texts)) for keys in answers)
    assert [known for known, _ in cache_module._keyed] == [texts]


def as_expected(texts: list[str]) -> np.ndarray:
    return cache_module.as_keys(np.frombuffer(b"".join(cache_module.text_key(t) for t in texts), dtype=np.uint8))
