"""Time the Link page as a curator uses it, on a scheme whose store already holds a large crosswalk.

    python benchmarks/link_page.py --data ../shared/melo --crosswalk bgr_bg --pipeline lexical

A fresh SQLite store gets the ESCO union of the data folder and one crosswalk's terms with its
matches as decisions (`import-taxonomy`, `import-terms --with-decisions`): they are known mentions
for the next terms, as a curator's own decisions are (scheme `CROSSWALK-decided`). The curator
works through the same terms imported again with nothing decided, as scheme `CROSSWALK` (so its
country's crosswalks are held out of the known mentions, as `prepare --hold-out-country` does). The page then runs through Streamlit's AppTest
(the script as the server runs it, without a browser): first, then rerun with nothing changed, then
as a decision (Exact on the first candidate), a skip and an undo rerun it, then an undo after another
curator's decision (written to the store between the page's runs). The pipeline must be ready
(`prepare --pipeline NAME --langs LANG,en --hold-out-country COUNTRY`); the cache is the project's (`MELO_CACHE`).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path

from melo_core.cli.arguments import at_least

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamlit.testing.v1 import AppTest

from benchmarks.page_store import ROOT, store_with_crosswalk
from db.aliases import accepted_aliases
from db.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--crosswalk", default="bgr_bg", help="crosswalk code under --data (its scheme name too)")
    parser.add_argument("--pipeline", default="lexical", help="a pipeline prepared for the scheme's languages")
    parser.add_argument("--runs", type=at_least(1), default=3, help="reruns and decisions of each kind")
    parser.add_argument(
        "--profile", type=at_least(0), default=0, help="print the N costliest calls of a decision's rerun"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        todo = args.crosswalk  # named as the crosswalk: its country held out of the known mentions
        url = store_with_crosswalk(folder, args.data, args.crosswalk, f"{args.crosswalk}-decided", todo)

        os.environ.update(MELO_DB_URL=url, MELO_DATA=str(Path(args.data).resolve()), MELO_PREPARE="manual")
        os.chdir(ROOT)
        app = AppTest.from_file(str(ROOT / "pages" / "2_Link.py"), default_timeout=900)
        app.session_state["curator"] = "bench"
        app.session_state["link_pipeline"] = args.pipeline
        app.session_state["link_scheme"] = todo
        print(f"Link page, {args.crosswalk}, pipeline {args.pipeline}, one run of the page:")
        timed(app, "first run (loads the pipeline, embeds the store's decisions as mentions)")
        for _ in range(args.runs):
            timed(app, "rerun, nothing changed (a pick, a comment typed)")
        for _ in range(args.runs):
            next(b for b in app.button if b.label == "Exact").click()
            timed(app, "Exact on the first candidate (stores it, shows the next term)")
        for _ in range(args.runs):
            app.button(key="link_skip").click()
            timed(app, "Skip (shows the next term)")
        for _ in range(args.runs):
            app.button(key="link_undo").click()
            timed(app, "Undo my last (takes the decision back, shows its term)")
        # A team: another curator decides a term of the same scheme between my decision and my undo,
        # so mine is no longer the last of the known mentions.
        with Store(url) as store:
            others = store.terms(todo)[-args.runs :]
            concept = accepted_aliases(store)[0][1]
        for other in others:
            next(b for b in app.button if b.label == "Exact").click()
            app.run()
            with Store(url) as store:
                store.decide(other.id, concept, "exactMatch", "another curator")
            app.button(key="link_undo").click()
            timed(app, "Undo my last after another curator's decision")
        if args.profile:  # a decision, the costliest rerun
            next(b for b in app.button if b.label == "Exact").click()
            pstats.Stats(profiled(app)).sort_stats("cumulative").print_stats(args.profile)


def profiled(app: AppTest) -> cProfile.Profile:
    """One rerun profiled: AppTest runs the script in a thread of its own, where cProfile must start."""
    profiler, run = cProfile.Profile(), threading.Thread.run

    def profiled_run(thread: threading.Thread) -> None:
        profiler.enable()
        try:
            run(thread)
        finally:
            profiler.disable()

    threading.Thread.run = profiled_run  # type: ignore[method-assign,assignment]
    try:
        app.run()
    finally:
        threading.Thread.run = run  # type: ignore[method-assign]
    return profiler


def timed(app: AppTest, what: str) -> None:
    start = time.perf_counter()
    app.run()
    seconds = time.perf_counter() - start
    if app.exception:
        raise SystemExit(f"the page failed: {app.exception[0].message}")
    warnings = [w.value for w in app.warning]
    if warnings:
        raise SystemExit(f"the pipeline is not ready: {warnings[0]}")
    print(f"  {what}: {seconds:.2f} s ({app.subheader[0].value})")


if __name__ == "__main__":
    main()
