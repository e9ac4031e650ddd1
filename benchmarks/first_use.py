"""Time to the first suggestion on a fresh machine: what a curator waits after `make run`.

    python benchmarks/first_use.py --data ../shared/melo --scheme nor_no --train

Does, in fresh cache (and, with ``--train``, models) folders, what the Link page starts in the
background for a scheme: one `prepare --pipeline best` over the scheme's language and English
labels, with the other countries' crosswalks as known mentions (the domain model first, then
every encoder's labels and index, then the mentions), and follows its progress file. At each
moment a pipeline can serve, a `link` of the scheme's first term with no pipeline option runs in a
fresh process while the preparation goes on, as a curator's page asks then: first `fast` (the
domain model and its labels are there), then `best` serving with the known mentions embedded so
far, then `best` complete. Prints the wall time of each from the start. Without ``--train`` the
domain model of the models folder is reused (its training time is measured apart: `train`).

With ``--second SCHEME``, a second scheme (another language) is opened ``--second-after`` minutes
in, as a curator opening it on the Link page would: its own `prepare`. There must be one
preparation at a time (the second waits, queued, then only adds what its language lacks);
``concurrent_max`` counts the preparations working at once at any poll.

Two moments more: when the Link page first shows probabilities (``calibrated_min``: `prepare`'s last
step has written the calibrator the page reads, ``best-without-COUNTRY``) and what the first
estimate said of the end (``first_estimate_complete_min``: the progress file's first ``complete_at``).

Results are printed and appended to experiments/results.csv (experiment ``first-use``, or
``first-use-busy`` with ``--busy``: the machine was shared with other work; ``load_mean`` is the
mean 1-minute load average over the run, on how many cores the row's machine column says).

Memory, sampled at each poll: per stage, the preparation's whole process tree (proportional set
size, so pages its workers share with it count once) and its largest process (resident set), with
that process's role; and the peak resident set of each `link`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core.esco.crosswalk import crosswalk_path, load_crosswalk
from melo_core.evaluation.experiments.results import RESULTS_FILE, append_results, provenance

ROOT = Path(__file__).resolve().parent.parent


def first_link(command: list[str], env: dict[str, str]) -> tuple[float, str, float]:
    """Seconds of one `link` in a fresh process (loading included), the line naming its pipeline and
    its peak resident set in MB."""
    began = time.perf_counter()
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "melo_core", *command], env=env, cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=stderr, text=True)  # fmt: skip
        _, status, usage = os.wait4(process.pid, 0)  # the child's own rusage, not every child's together
        process.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        said = stderr.read()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{said[-3000:]}")
    named = [line for line in said.splitlines() if line.startswith("pipeline ")]
    return time.perf_counter() - began, named[-1] if named else "", usage.ru_maxrss / 1024


def role(process: psutil.Process) -> str:
    """What a process of the preparation is, from its command line."""
    try:
        line = " ".join(process.cmdline())
    except psutil.Error:
        return "?"
    if "melo_core prepare" in line:
        return "prepare"
    if "spawn_main" in line:  # models are built in one (since b282ccc), embedding jobs run in others
        return "a child: the model build, or an embedding worker"
    return "resource tracker" if "resource_tracker" in line else line[-60:]


@dataclass
class StageMemory:
    """The peaks seen during one stage of the preparation, in MB."""

    tree: float = 0.0
    largest: float = 0.0
    largest_role: str = ""
    processes: int = 0


@dataclass
class MemoryLog:
    stages: dict[str, StageMemory] = field(default_factory=dict)

    def sample(self, root: psutil.Process, stage: str) -> None:
        """Adds one reading of ``root`` and its descendants to ``stage``'s peaks."""
        try:
            members = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        tree, largest, largest_role = 0.0, 0.0, ""
        for member in members:
            try:
                info = member.memory_full_info()
            except psutil.Error:
                continue
            tree += info.pss / 2**20
            if info.rss / 2**20 > largest:
                largest, largest_role = info.rss / 2**20, role(member)
        if not tree:  # the preparation has ended
            return
        peaks = self.stages.setdefault(stage, StageMemory())
        peaks.tree = max(peaks.tree, tree)
        peaks.processes = max(peaks.processes, len(members))
        if largest > peaks.largest:
            peaks.largest, peaks.largest_role = largest, largest_role

    def report(self) -> str:
        rows = [f"  {stage}: tree {m.tree:,.0f} MB in up to {m.processes} processes; largest {m.largest:,.0f} MB"
                f" ({m.largest_role})" for stage, m in self.stages.items()]  # fmt: skip
        top = max(self.stages.values(), key=lambda m: m.tree, default=StageMemory())
        return "\n".join(
            ["memory of the preparation by stage (peaks):", *rows, f"peak of the whole tree {top.tree:,.0f} MB"]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--scheme", default="nor_no", help="the national crosswalk linked (default nor_no)")
    parser.add_argument("--train", action="store_true", help="train the domain model too (fresh models folder)")
    parser.add_argument("--until", metavar="STAGE", help="stop when a stage beginning so starts (its memory so far)")
    parser.add_argument("--second", metavar="SCHEME", help="open this scheme too, --second-after minutes in")
    parser.add_argument("--second-after", type=float, default=2.0, metavar="MIN", help="default 2")
    parser.add_argument("--models-out", metavar="DIR", help="with --train: build the models into DIR (new), kept")
    parser.add_argument(
        "--until-served",
        action="store_true",
        help="stop once best serves (and the --second scheme too): no `best complete` moment",
    )
    parser.add_argument("--busy", action="store_true", help="the machine is shared with other work (recorded so)")
    parser.add_argument("--no-record", action="store_true", help="do not append to experiments/results.csv")
    args = parser.parse_args()
    command = " ".join(["python benchmarks/first_use.py", *sys.argv[1:]])
    crosswalk = load_crosswalk(crosswalk_path(args.data, args.scheme))
    language = crosswalk.language or "en"
    langs = ",".join(dict.fromkeys([language, "en"]))
    term = next(t.title for t in crosswalk.terms if t.title)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"scheme {args.scheme}, labels in {langs}, first term {term!r}")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, MELO_CACHE=str(Path(folder) / "cache"), MELO_DATA=str(args.data))
        if args.train:
            if args.models_out and Path(args.models_out).exists():
                parser.error(f"--models-out {args.models_out} exists: the models must be built from nothing")
            env["MELO_MODELS"] = str(Path(args.models_out or Path(folder) / "models").resolve())
        common = ["--data", str(args.data), "--langs", langs, "--hold-out-country", crosswalk.country]
        state = Path(folder) / "progress.json"
        link = ["link", "--query", term, *common, "--query-lang", language, "--top", "3"]
        calibrator = (
            Path(env.get("MELO_MODELS", ROOT / "models")) / "calibration" / f"best-without-{crosswalk.country}.json"
        )
        started, started_epoch = time.perf_counter(), time.time()
        calibrated: float | None = None  # seconds until the calibrator the Link page reads was written
        first_estimate: float | None = None  # what the first estimate said of the end, seconds from the start
        preparing = subprocess.Popen([sys.executable, "-m", "melo_core", "prepare", "--pipeline", "best", *common,
                                      "--query-lang", language, "--progress-file", str(state), "--quiet"],
                                     env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)  # fmt: skip
        stages: dict[str, float] = {}
        served: list[str] = []
        served_at: dict[str, float] = {}  # minutes
        suggested_at: dict[str, float] = {}  # minutes: the first suggestion, its `link` included
        memory, tree = MemoryLog(), psutil.Process(preparing.pid)
        stage, stopped = "starting", False
        second: subprocess.Popen | None = None
        second_state = Path(folder) / "progress-second.json"
        second_served: float | None = None
        concurrent_max, loads, first_done = 1, [], 0.0
        while preparing.poll() is None or (second is not None and second.poll() is None):
            time.sleep(2)
            loads.append(os.getloadavg()[0])
            elapsed = time.perf_counter() - started
            if args.second and second is None and elapsed >= args.second_after * 60:
                second = open_second(args.data, args.second, env, second_state)
            if second is not None:
                working = [p for p in (state, second_state) if working_on(p)]
                concurrent_max = max(concurrent_max, len(working))
                if second_served is None and serving(second_state):
                    second_served = elapsed
                    print(f"second scheme {args.second}: serves after {elapsed / 60:.1f} min")
            if args.until_served and "best, mentions pending" in served and (not args.second or second_served):
                for process in (preparing, second):
                    if process is not None and process.poll() is None:
                        process.send_signal(signal.SIGINT)  # prepare keeps what it finished
                        process.wait()
                first_done = -1.0  # not complete: stopped once served
                break
            if preparing.poll() is not None:  # the first is done; the second goes on
                first_done = first_done or elapsed
                continue
            try:
                progress = json.loads(state.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                memory.sample(tree, stage)
                continue
            if first_estimate is None and isinstance(progress.get("complete_at"), (int, float)):
                first_estimate = progress["complete_at"] - started_epoch
                print(f"first estimate: {progress['message']!r}, complete after {first_estimate / 60:.1f} min")
            stage = progress["message"].split(":")[0].split(" — ")[0]
            stages.setdefault(stage, time.perf_counter() - started)
            memory.sample(tree, stage)  # after reading the stage: a sample belongs to the stage under way
            if args.until and stage.startswith(args.until):
                preparing.send_signal(signal.SIGINT)  # prepare keeps what it finished
                preparing.wait()
                print(f"stopped as {stage!r} began, after {stages[stage] / 60:.1f} min")
                stopped = True
                break
            # `fast` needs the domain model and its labels, which prepare builds first: any later stage
            # (e5-esco's build, another encoder's labels) means it serves.
            domain = ("building the domain", "embedding domain", "indexing the labels for domain")
            fast_serves = any(s.startswith(domain) for s in stages) and not stage.startswith(domain)
            for name, now in (("fast", fast_serves), ("best, mentions pending", progress.get("serving"))):
                if now and name not in served:
                    served.append(name)
                    at = time.perf_counter() - started
                    served_at[name] = at / 60
                    seconds, said, peak = first_link(link, env)
                    suggested_at[name] = (at + seconds) / 60
                    print(f"{name}: serves after {at / 60:.1f} min; first link (fresh process, loading included, "
                          f"while the preparation goes on) {seconds:.1f} s, peak RSS {peak:,.0f} MB -> "
                          f"suggestion at {(at + seconds) / 60:.1f} min; {said}")  # fmt: skip
        if calibrator.is_file() and calibrator.stat().st_mtime >= started_epoch:
            calibrated = calibrator.stat().st_mtime - started_epoch
            print(f"probabilities: the calibrator the Link page reads was written after {calibrated / 60:.1f} min")
        timeline = "stages (first seen, min): " + "; ".join(f"{s} {t / 60:.1f}" for s, t in stages.items())
        if stopped:
            print(f"{timeline}\n{memory.report()}")
            return
        complete = first_done >= 0
        if complete and preparing.returncode != 0:
            raise SystemExit(f"prepare failed:\n{preparing.stderr.read()[-3000:]}")  # type: ignore[union-attr]
        done = first_done or time.perf_counter() - started
        if complete:
            seconds, said, peak = first_link(link, env)
            print(f"best, complete: prepared after {done / 60:.1f} min; first link {seconds:.1f} s, peak RSS "
                  f"{peak:,.0f} MB -> suggestion at {(done + seconds) / 60:.1f} min; {said}")  # fmt: skip
        print(f"{timeline}\n{memory.report()}")
        if second is not None:
            print(f"preparations working at once, at most: {concurrent_max}")
        moments = {"fast_serves_min": served_at.get("fast"), "best_serves_min": served_at.get("best, mentions pending"),
                   "first_suggestion_min": suggested_at.get("best, mentions pending"),
                   "best_complete_min": done / 60 if complete else None,
                   "calibrated_min": None if calibrated is None else calibrated / 60,
                   "first_estimate_complete_min": None if first_estimate is None else first_estimate / 60,
                   "load_mean": sum(loads) / max(len(loads), 1)}  # fmt: skip
        if second is not None:
            moments |= {"concurrent_max": concurrent_max,
                        "second_serves_min": None if second_served is None else second_served / 60}  # fmt: skip
        rows = [{"dataset": args.scheme, "pipeline": "best", "metric": metric, "value": round(value, 3)}
                for metric, value in moments.items() if value is not None]  # fmt: skip
        if not args.no_record:
            experiment = "first-use-busy" if args.busy else "first-use"
            append_results(RESULTS_FILE, experiment, rows, provenance([], [], command))
            print(f"appended {len(rows)} rows to {RESULTS_FILE} ({experiment})", file=sys.stderr)


def open_second(data: str, scheme: str, env: dict[str, str], state: Path) -> subprocess.Popen:
    """What the Link page starts when a curator opens ``scheme``: `prepare --pipeline best` over its
    language and English."""
    crosswalk = load_crosswalk(crosswalk_path(data, scheme))
    language = crosswalk.language or "en"
    langs = ",".join(dict.fromkeys([language, "en"]))
    print(f"opening the second scheme {scheme} (labels in {langs})")
    return subprocess.Popen([sys.executable, "-m", "melo_core", "prepare", "--pipeline", "best", "--data", str(data),
                             "--langs", langs, "--hold-out-country", crosswalk.country, "--query-lang", language,
                             "--progress-file", str(state), "--quiet"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def _progress(state: Path) -> dict:
    try:
        return json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def working_on(state: Path) -> bool:
    """A preparation is working: it has reported, is not done, and does not wait queued."""
    progress = _progress(state)
    return bool(progress) and not progress.get("done") and not str(progress.get("message", "")).startswith("queued")


def serving(state: Path) -> bool:
    return bool(_progress(state).get("serving"))


if __name__ == "__main__":
    main()
