"""Time one run of the Crosswalk page on a large crosswalk, and each export it offers.

    python benchmarks/crosswalk_page.py --data ../shared/melo --crosswalk bgr_bg

A fresh SQLite store gets the ESCO union of the data folder and one crosswalk with its matches as
decisions (`import-taxonomy`, `import-terms --with-decisions`); then the page runs through
Streamlit's AppTest (the script as the server runs it, without a browser): first, then rerun as
each checkbox, selection, comment, review or decision on the page reruns it, before and after a
user asks for SKOS Turtle (written on request), and each export is written once.

    python benchmarks/crosswalk_page.py --data ../shared/melo --crosswalk bgr_bg --exports-only --repeat 3

Rows (experiment ``export-speed``, dataset the crosswalk, ``queries`` its decisions): each export's
fastest of ``--repeat`` writes in seconds (``skos_csv_seconds``, ``sssom_seconds``,
``turtle_seconds``). The page's timings are printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from melo_core.cli.arguments import at_least

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamlit.testing.v1 import AppTest

from benchmarks.page_store import ROOT, store_with_crosswalk
from db.exports import exported_count, skos_csv_text, sssom_text, turtle_text
from db.store import Store
from melo_core.esco.crosswalk import crosswalk_path
from melo_core.evaluation.experiments.results import RESULTS_FILE, append_results, provenance

# metric -> writer; the store is SQLite (row pipeline "sqlite", as store-reimport's)
EXPORTS: dict[str, Callable[[Store, str], str]] = {
    "skos_csv_seconds": skos_csv_text,
    "sssom_seconds": sssom_text,
    "turtle_seconds": turtle_text,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--crosswalk", default="bgr_bg", help="crosswalk code under --data (its scheme name too)")
    parser.add_argument("--runs", type=at_least(1), default=3, help="reruns with nothing changed")
    parser.add_argument("--repeat", type=at_least(1), default=1, help="writes of each export; the fastest is kept")
    parser.add_argument("--exports-only", action="store_true", help="time the exports, not the page")
    parser.add_argument("--no-record", action="store_true", help="do not append to experiments/results.csv")
    args = parser.parse_args()
    command = " ".join(["python benchmarks/crosswalk_page.py", *sys.argv[1:]])
    origin = provenance([], [crosswalk_path(Path(args.data), args.crosswalk)], command)

    with tempfile.TemporaryDirectory() as folder:
        url = store_with_crosswalk(folder, args.data, args.crosswalk)
        rows: list[dict[str, object]] = []
        with Store(url) as store:
            decisions = exported_count(store, args.crosswalk)
            for metric, export in EXPORTS.items():
                seconds = []
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    text = export(store, args.crosswalk)
                    seconds.append(time.perf_counter() - start)
                print(f"{export.__name__}: {', '.join(f'{s:.2f}' for s in seconds)} s, {len(text):,} characters")
                rows.append({"dataset": args.crosswalk, "pipeline": "sqlite", "metric": metric,
                             "value": round(min(seconds), 3), "queries": decisions, "seconds": round(min(seconds), 3)})  # fmt: skip
        if not args.no_record:
            append_results(RESULTS_FILE, "export-speed", rows, origin)
        if args.exports_only:
            return

        os.environ.update(MELO_DB_URL=url, MELO_DATA=str(Path(args.data).resolve()))
        os.chdir(ROOT)
        app = AppTest.from_file(str(ROOT / "pages" / "3_Crosswalk.py"), default_timeout=300)
        app.session_state["curator"] = "bench"
        print(f"Crosswalk page, {args.crosswalk} ({decisions:,} decisions), one run of the page:")
        timed(app, "first run (writes SKOS CSV and SSSOM TSV)")
        for _ in range(args.runs):
            timed(app, "rerun, nothing changed (a selection, a checkbox)")
        with Store(url) as store:
            decision = store.crosswalk(args.crosswalk)[0]
            store.add_comment(decision.id, "rita", "checked against the national classification")
        timed(app, "rerun after a comment (reads the review queue again)")
        with Store(url) as store:
            store.review([decision.id], "rita", "confirmed")
        timed(app, "rerun after a review (the confirmed-only downloads not asked for)")
        with Store(url) as store:
            store.decide(decision.term_id, decision.concept_uri, "closeMatch", "bench")
        timed(app, "rerun after a decision (writes SKOS CSV and SSSOM TSV again)")
        app.button(key="cw_write_turtle").click()
        timed(app, "Write SKOS Turtle clicked (writes it)", turtle=True)
        timed(app, "rerun, nothing changed, Turtle asked for", turtle=True)
        with Store(url) as store:
            store.decide(decision.term_id, decision.concept_uri, "exactMatch", "bench")
        timed(app, "rerun after a decision, Turtle asked for (writes the three again)", turtle=True)


def timed(app: AppTest, what: str, turtle: bool = False) -> None:
    start = time.perf_counter()
    app.run()
    seconds = time.perf_counter() - start
    if app.exception:
        raise SystemExit(f"the page failed: {app.exception[0].message}")
    served = ["SKOS CSV", "SSSOM TSV", *(["SKOS Turtle"] if turtle else [])]
    assert [d.label for d in app.get("download_button")] == served  # type: ignore[union-attr]
    print(f"  {what}: {seconds:.2f} s")


if __name__ == "__main__":
    main()
