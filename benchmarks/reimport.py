"""Store: re-import while curating (issue 87). How long a re-import of many changed terms takes,
and how long a curator's decision waits meanwhile.

    python benchmarks/reimport.py                                   # SQLite, a file in a temp dir
    scripts/with_postgres.sh python benchmarks/reimport.py --backend postgresql

Synthetic data (no real terminology is that large): ``--terms`` codes ``OCC-000001``... with
labels "synthetic occupation N ..." in a terms CSV, imported into a new scheme with
``import-terms``; then every label is rewritten ("renamed ...") and the file imported again. During
the re-import a second process (a curator) records one decision a second through
``Store.decide`` on the scheme's terms, timing each. Each import is ``python -m melo_core
import-terms`` in a process of its own, timed from its start (reading the CSV included).

Results: printed, and appended to experiments/results.csv (experiment ``store-reimport``, dataset
``synthetic-<terms>``, pipeline the backend; metrics import_seconds, reimport_seconds,
decisions, decisions_busy, decision_p50_seconds, decision_max_seconds) unless ``--no-record``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from db.store import Store, StoreBusy  # noqa: E402
from db.testing import empty_store_url, pg_url  # noqa: E402
from melo_core.cli.arguments import at_least  # noqa: E402
from melo_core.evaluation.experiments.results import RESULTS_FILE, append_results, provenance  # noqa: E402

SCHEME = "synthetic"
CONCEPT = "http://data.europa.eu/esco/occupation/"


def write_terms(path: Path, count: int, prefix: str) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write("code,label,description\n")
        for i in range(1, count + 1):
            handle.write(f"OCC-{i:06d},{prefix}synthetic occupation {i} of group {i % 997},made up for a benchmark\n")


def import_terms(url: str, path: Path) -> float:
    """``import-terms`` in a process of its own: its wall time."""
    command = [sys.executable, "-m", "melo_core", "import-terms", "--scheme", SCHEME, "--csv", str(path), "--db", url]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"import-terms failed ({done.returncode}): {done.stderr.strip()}")
    print(f"  {done.stdout.strip()} in {seconds:.1f} s", file=sys.stderr)
    return seconds


def curator(url: str, term_ids: list[int], ready: Connection, stop: Connection, out: Connection) -> None:
    """One decision a second until told to stop; sends [(latency in seconds, saved)]."""
    timings: list[tuple[float, bool]] = []
    with Store(url) as store:
        ready.send(True)
        for n, term_id in enumerate(term_ids):
            started = time.perf_counter()
            try:
                store.decide(term_id, f"{CONCEPT}{n}", "exactMatch", "bench-curator")
                timings.append((time.perf_counter() - started, True))
            except StoreBusy:
                timings.append((time.perf_counter() - started, False))
            if stop.poll(max(0.0, 1.0 - (time.perf_counter() - started))):
                break
    out.send(timings)


def run(url: str, backend: str, terms: int, folder: Path) -> list[dict[str, object]]:
    original, renamed = folder / "terms.csv", folder / "renamed.csv"
    write_terms(original, terms, "")
    write_terms(renamed, terms, "renamed ")
    Store(url, create=True).close()
    print(f"{backend}: import of {terms} terms", file=sys.stderr)
    first = import_terms(url, original)
    with Store(url) as store:
        term_ids = [t.id for t in store.queue(SCHEME, limit=10_000)]
    context = multiprocessing.get_context("spawn")
    ready_in, ready_out = context.Pipe(False)
    stop_in, stop_out = context.Pipe(False)
    result_in, result_out = context.Pipe(False)
    process = context.Process(target=curator, args=(url, term_ids, ready_out, stop_in, result_out))
    process.start()
    ready_in.recv()
    print(f"{backend}: re-import, every label changed, one decision a second meanwhile", file=sys.stderr)
    second = import_terms(url, renamed)
    stop_out.send(True)
    timings = result_in.recv()
    process.join()
    with Store(url) as store:
        changed = sum(t.label.startswith("renamed ") for t in store.queue(SCHEME, status=None, limit=terms))
    if changed != terms:
        raise SystemExit(f"the re-import changed {changed} labels of {terms}")
    latencies = [seconds for seconds, _ in timings]
    busy = sum(not saved for _, saved in timings)
    print(f"  {len(timings)} decisions, {busy} refused as busy; latency p50 {statistics.median(latencies):.3f} s, "
          f"max {max(latencies):.3f} s", file=sys.stderr)  # fmt: skip
    metrics = {
        "import_seconds": round(first, 2),
        "reimport_seconds": round(second, 2),
        "decisions": len(timings),
        "decisions_busy": busy,
        "decision_p50_seconds": round(statistics.median(latencies), 4),
        "decision_max_seconds": round(max(latencies), 4),
    }
    return [
        {"dataset": f"synthetic-{terms}", "pipeline": backend, "metric": metric, "value": value, "queries": terms,
         "seconds": round(first + second, 1)}
        for metric, value in metrics.items()
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite",
                        help="postgresql: a fresh schema on MELO_TEST_PG_URL (scripts/with_postgres.sh starts one)")  # fmt: skip
    parser.add_argument("--terms", type=at_least(100), default=100_000, help="terms in the CSV (default 100,000)")
    parser.add_argument("--no-record", action="store_true", help="do not append to experiments/results.csv")
    args = parser.parse_args()
    if args.backend == "postgresql" and not pg_url():
        parser.error("--backend postgresql needs MELO_TEST_PG_URL (run under scripts/with_postgres.sh)")
    command = " ".join(["python benchmarks/reimport.py", *sys.argv[1:]])
    origin = provenance([], [], command)
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="melo-reimport-")))
        url = stack.enter_context(empty_store_url(args.backend, folder))
        os.environ.pop("MELO_STORE_BUSY_SECONDS", None)  # the default wait, as the app has it
        rows = run(url, args.backend, args.terms, folder)
    for row in rows:
        print(f"{row['metric']}\t{row['value']}")
    if not args.no_record:
        append_results(RESULTS_FILE, "store-reimport", rows, origin)
        print(f"appended {len(rows)} rows to {RESULTS_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
