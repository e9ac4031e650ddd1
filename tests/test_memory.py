"""Freed memory goes back to the system: what keeps a build's ONNX export from stacking on top of
its training's freed tensors. What a `link` run builds once is kept out of the cycle collector's
walks, and given back to it when the command ends."""

from __future__ import annotations

import ctypes
import gc
import sys

import psutil
import pytest

from melo_core.runtime.memory import kept_until_exit, release_freed_memory, thawed_afterwards


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_chunks_between_live_ones_leave_the_process() -> None:
    """Chunks freed between chunks still in use (as a training leaves its tensors) stay resident
    until they are released: every other one of 2,000 chunks of 100 KB."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    size, count = 100_000, 2_000  # under glibc's mmap threshold: from the heap, as torch's tensors
    chunks = []
    for _ in range(count):
        chunks.append(libc.malloc(size))
        ctypes.memset(chunks[-1], 1, size)  # resident
    for chunk in chunks[::2]:
        libc.free(chunk)  # its neighbours are in use: nothing to merge with, nothing trimmed
    before = psutil.Process().memory_info().rss
    try:
        assert release_freed_memory()
        released = before - psutil.Process().memory_info().rss
    finally:
        for chunk in chunks[1::2]:
            libc.free(chunk)
    assert released > 0.8 * size * count / 2


def test_what_a_build_keeps_is_left_out_of_collections_until_the_command_ends() -> None:
    assert gc.isenabled() and gc.get_freeze_count() == 0, "a test left objects frozen"
    with thawed_afterwards():
        with kept_until_exit():
            assert not gc.isenabled()
            with kept_until_exit():
                built = [[i] for i in range(1_000)]
            assert not gc.isenabled()  # the inner block leaves it to the outer one
        assert gc.isenabled()
        assert gc.get_freeze_count() >= 1_000
        assert not any(o is built for o in gc.get_objects())  # no collection walks it
    assert gc.get_freeze_count() == 0
    assert any(o is built for o in gc.get_objects())


def test_a_collector_turned_off_before_stays_off_and_frozen_objects_not_ours_stay_frozen() -> None:
    gc.disable()
    try:
        with kept_until_exit():
            pass
        assert not gc.isenabled()
        frozen = gc.get_freeze_count()
        with thawed_afterwards(), kept_until_exit():
            built = [[i] for i in range(100)]
        assert gc.get_freeze_count() >= frozen + 100  # someone froze before: left as it is
        assert not any(o is built for o in gc.get_objects())
    finally:
        gc.unfreeze()
        gc.enable()
