"""Short writes that wait for a busy store, then give up in words.

A curator's decision can meet the write lock held by someone else (an import's batch on SQLite;
a table lock on PostgreSQL). ``retry_when_busy`` tries the write again with a growing pause,
each try waiting a bounded time for the lock (SQLite's busy timeout, PostgreSQL's
``lock_timeout``: set per transaction by ``db.store.engine`` from ``lock_wait_seconds``), and
after ``MELO_STORE_BUSY_SECONDS`` (default 10) in all raises ``StoreBusy``: nothing was written.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

from sqlalchemy.exc import DBAPIError

from melo_core.errors import MeloInputError

BUSY_SECONDS_ENV = "MELO_STORE_BUSY_SECONDS"
DEFAULT_BUSY_SECONDS = 10.0
# PostgreSQL: lock_not_available (lock_timeout), serialization_failure, deadlock_detected.
_BUSY_SQLSTATES = frozenset({"55P03", "40001", "40P01"})
_FIRST_PAUSE = 0.05

# How long the transaction being opened in this thread may wait for a lock (None: the engine's
# default, 15 s on SQLite and no limit on PostgreSQL).
_lock_wait: ContextVar[float | None] = ContextVar("melo_lock_wait", default=None)

P = ParamSpec("P")
R = TypeVar("R")


class StoreBusy(MeloInputError):
    """A write that did not get the store's lock in time (an import is running): nothing was
    written; trying again later works."""


def busy_seconds() -> float:
    """How long a write waits for a busy store in all: ``MELO_STORE_BUSY_SECONDS`` or 10."""
    raw = os.environ.get(BUSY_SECONDS_ENV, "").strip()
    if not raw:
        return DEFAULT_BUSY_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise MeloInputError(f"{BUSY_SECONDS_ENV} must be a number of seconds above 0, got {raw!r}")
    return seconds


def lock_wait_seconds() -> float | None:
    """The lock wait of the transaction this thread opens now (None: the engine's default)."""
    return _lock_wait.get()


def is_busy(error: BaseException) -> bool:
    """Whether ``error`` (or an error it was raised from) is a lock not granted in time:
    SQLite's "database is locked", PostgreSQL's lock timeout, serialization failure or
    deadlock. Followed through ``__cause__`` and ``__context__``, so a wrapper that re-raises
    in its own words keeps it recognisable."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DBAPIError):
            original = current.orig
            if getattr(original, "sqlstate", None) in _BUSY_SQLSTATES:
                return True
            if "database is locked" in str(original) or "database table is locked" in str(original):
                return True
        current = current.__cause__ or current.__context__
    return False


def retry_when_busy(action: Callable[[], R], seconds: float | None = None) -> R:
    """Run ``action`` (one whole write transaction); while the store is busy run it again after
    a pause that doubles, until ``seconds`` (default ``busy_seconds()``) have passed: then
    ``StoreBusy``. Each try waits for the lock at most a tenth of the whole, so a lock released
    a moment later is taken by the next try."""
    total = busy_seconds() if seconds is None else seconds
    deadline = time.monotonic() + total
    per_try = max(total / 10, 0.05)
    pause = _FIRST_PAUSE
    while True:
        token = _lock_wait.set(max(0.0, min(per_try, deadline - time.monotonic())))
        try:
            return action()
        except Exception as exc:
            if not is_busy(exc):
                raise
            if time.monotonic() + pause >= deadline:
                raise StoreBusy(
                    f"the store is busy (an import is running?): nothing was saved after {total:g} s; try again"
                ) from None
        finally:
            _lock_wait.reset(token)
        time.sleep(pause)
        pause = min(pause * 2, per_try)


def retried_when_busy(method: Callable[P, R]) -> Callable[P, R]:
    """``retry_when_busy`` around every call of a store method that writes once."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return retry_when_busy(lambda: method(*args, **kwargs))

    return wrapper
