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
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core.crosswalk import crosswalk_path, load_crosswalk

ROOT = Path(__file__).resolve().parent.parent


def first_link(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Seconds of one `link` in a fresh process (loading included) and the line naming its pipeline."""
    began = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "melo_core", *command], env=env, cwd=ROOT, capture_output=True,
                            text=True)  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    said = [line for line in result.stderr.splitlines() if line.startswith("pipeline ")]
    return time.perf_counter() - began, said[-1] if said else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--scheme", default="nor_no", help="the national crosswalk linked (default nor_no)")
    parser.add_argument("--train", action="store_true", help="train the domain model too (fresh models folder)")
    args = parser.parse_args()
    crosswalk = load_crosswalk(crosswalk_path(args.data, args.scheme))
    language = crosswalk.language or "en"
    langs = ",".join(dict.fromkeys([language, "en"]))
    term = next(t.title for t in crosswalk.terms if t.title)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"scheme {args.scheme}, labels in {langs}, first term {term!r}")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, MELO_CACHE=str(Path(folder) / "cache"), MELO_DATA=str(args.data))
        if args.train:
            env["MELO_MODELS"] = str(Path(folder) / "models")
        common = ["--data", str(args.data), "--langs", langs, "--hold-out-country", crosswalk.country]
        state = Path(folder) / "progress.json"
        link = ["link", "--query", term, *common, "--query-lang", language, "--top", "3"]
        started = time.perf_counter()
        preparing = subprocess.Popen([sys.executable, "-m", "melo_core", "prepare", "--pipeline", "best", *common,
                                      "--query-lang", language, "--progress-file", str(state), "--quiet"],
                                     env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)  # fmt: skip
        stages: dict[str, float] = {}
        served: list[str] = []
        while preparing.poll() is None:
            time.sleep(2)
            try:
                progress = json.loads(state.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            stage = progress["message"].split(":")[0].split(" — ")[0]
            stages.setdefault(stage, time.perf_counter() - started)
            # `fast` needs the domain model and its labels, which prepare builds first: any later stage
            # (e5-esco's build, another encoder's labels) means it serves.
            fast_serves = not stage.startswith(
                ("building the domain", "embedding domain", "indexing the labels for domain")
            )
            for name, now in (("fast", fast_serves), ("best, mentions pending", progress.get("serving"))):
                if now and name not in served:
                    served.append(name)
                    at = time.perf_counter() - started
                    seconds, said = first_link(link, env)
                    print(f"{name}: serves after {at / 60:.1f} min; first link (fresh process, loading included, "
                          f"while the preparation goes on) {seconds:.1f} s -> suggestion at "
                          f"{(at + seconds) / 60:.1f} min; {said}")  # fmt: skip
        if preparing.returncode != 0:
            raise SystemExit(f"prepare failed:\n{preparing.stderr.read()[-3000:]}")  # type: ignore[union-attr]
        done = time.perf_counter() - started
        seconds, said = first_link(link, env)
        print(f"best, complete: prepared after {done / 60:.1f} min; first link {seconds:.1f} s -> suggestion at "
              f"{(done + seconds) / 60:.1f} min; {said}")  # fmt: skip
        print("stages (first seen, min): " + "; ".join(f"{s} {t / 60:.1f}" for s, t in stages.items()))
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"peak RSS of a child process: {rss:,.0f} MB")


if __name__ == "__main__":
    main()
