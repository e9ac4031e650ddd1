"""Time to the first suggestion on a fresh machine: what a curator waits after `make run`.

    python benchmarks/first_use.py --data ../shared/melo --scheme nor_no --train

Runs, in fresh cache (and, with ``--train``, models) folders, what the Link page starts in the
background for a scheme: `prepare --pipeline fast`, then `prepare --pipeline best`, over the
scheme's language and English labels, with the other countries' crosswalks as known mentions;
then times one `link` of the scheme's first term with each. Prints the wall time of each step and
the cumulative time until `fast` and `best` serve. Without ``--train`` the domain model of the
models folder is reused (its training time is measured apart: `train`, see docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core.crosswalk import crosswalk_path, load_crosswalk

ROOT = Path(__file__).resolve().parent.parent


def run(command: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "melo_core", *command], env=env, cwd=ROOT, capture_output=True,
                            text=True)  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--scheme", default="nor_no", help="the national crosswalk linked (default nor_no)")
    parser.add_argument("--train", action="store_true", help="train the domain model too (fresh models folder)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
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
        total = 0.0
        for name in ("fast", "best"):
            seconds = run(["prepare", "--pipeline", name, *common, "--query-lang", language, "--workers",
                           str(args.workers), "--quiet"], env)  # fmt: skip
            total += seconds
            first = run(["link", "--pipeline", name, "--query", term, *common, "--query-lang", language, "--quiet"], env)
            print(f"prepare {name}: {seconds / 60:.1f} min; first link (fresh process, loading included) "
                  f"{first:.1f} s; {name} serves after {(total + first) / 60:.1f} min")  # fmt: skip


if __name__ == "__main__":
    main()
