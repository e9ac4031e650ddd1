"""Memory a process has freed, handed back to the system; and what a process keeps until it ends,
kept out of the cycle collector's way.

glibc keeps the chunks a program frees for its next allocations; after a training, torch's
freed tensors stay resident that way (e5-esco: 3.6 GB after one round, 0.7 GB once trimmed), and
the ONNX export that follows added 1.7 GB on top of them."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Iterator
from contextlib import contextmanager


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        return libc if hasattr(libc, "malloc_trim") else None  # macOS, musl: no such call
    except OSError:
        return None


def release_freed_memory() -> bool:
    """Collects garbage, then asks glibc to return its free pages; False where the C library has
    no ``malloc_trim`` (nothing to do there)."""
    gc.collect()
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


@contextmanager
def kept_until_exit() -> Iterator[None]:
    """For a process that builds its linker once and links with it until it ends (`link`, a Ray
    actor): the cycle collector is off while the block builds, and what exists when it ends is
    frozen (``gc.freeze``), so no later collection walks the taxonomy, indexes and known mentions
    again. Built with the collector on, a cold `link --query` spent over a second in collections
    that found nothing to free (docs/experiments/speed.md). Cyclic garbage alive at the freeze
    is never collected (2,330 objects after a `link --query` build): not for a long-lived server
    (the Link page); a command run inside a longer process thaws them (``thawed_afterwards``).
    Nests: the outermost block turns the collector back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@contextmanager
def thawed_afterwards() -> Iterator[None]:
    """What ``kept_until_exit`` froze in the block goes back to the collector when it ends: a
    command run in a test or a notebook leaves nothing frozen behind. Left alone when objects were
    frozen before the block began (``gc.unfreeze`` thaws them all, and they are someone else's)."""
    frozen_before = gc.get_freeze_count()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()
