"""Freed memory goes back to the system: what keeps a build's ONNX export from stacking on top of
its training's freed tensors."""

from __future__ import annotations

import ctypes
import sys

import psutil
import pytest

from melo_core.memory import release_freed_memory


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
