"""The simulated curator over several national crosswalks: does the linker learn from decisions?

    python benchmarks/simulate.py --data ../shared/melo --out benchmarks/results/simulate.csv
    python benchmarks/simulate.py --scorers 'wsum:0.3*char-tfidf+0.7*muse' --seeds 0 --append

Each crosswalk is replayed in random order (per seed) through a linker that adds every accepted
exact/narrow match as an alias of its concept and through one that learns nothing
(``melo_core.simulate``), over the ESCO labels in the crosswalk's language and English. One CSV
row per crosswalk, scorer, seed and linker; the printed table averages the seeds.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core.crosswalk import crosswalk_path, load_crosswalk
from melo_core.simulate import CHECKPOINTS, simulate
from melo_core.taxonomy import cached_taxonomy_from_melo

# A few hundred to ~1,600 gold terms each: minutes per crosswalk with char-tfidf, not hours.
DEFAULT_CROSSWALKS = "nor_no,bel_fr,bel_nl,prt_pt,ita_it,hun_hu,usa_en,dnk_da,cze_cs,est_et,esp_es"
COLUMNS = [
    "crosswalk", "terms", "taught", "scorer", "languages", "seed", "linker", "mrr", "mean_rank", "found",
    "not_found", *(f"remaining_mrr_{round(100 * c)}" for c in CHECKPOINTS), "seconds", "load_seconds",
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--crosswalks", default=DEFAULT_CROSSWALKS)
    parser.add_argument("--scorers", default="char-tfidf", help="comma-separated scorer specs")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (orders of the decisions)")
    parser.add_argument("--out", default="benchmarks/results/simulate.csv")
    parser.add_argument("--append", action="store_true", help="add rows to --out instead of replacing it")
    args = parser.parse_args()

    taxonomy = cached_taxonomy_from_melo(args.data)
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fresh = not (args.append and out.is_file())
    with out.open("w" if fresh else "a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if fresh:
            writer.writeheader()
        print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores", file=sys.stderr)
        for scorer in args.scorers.split(","):
            for code in args.crosswalks.split(","):
                crosswalk = load_crosswalk(crosswalk_path(args.data, code))
                runs = []
                for seed in seeds:
                    start = time.perf_counter()
                    result = simulate(crosswalk, taxonomy, scorer, seed=seed)
                    runs.append(result)
                    for summary in result.summaries.values():
                        row: dict[str, object] = {
                            "crosswalk": code,
                            "terms": len(result.steps),
                            "taught": result.taught,
                            "scorer": scorer,
                            "languages": ",".join(result.languages),
                            "seed": seed,
                            "linker": summary.linker,
                            "mrr": round(summary.mrr, 4),
                            "mean_rank": round(summary.mean_rank, 2),
                            "found": summary.found,
                            "not_found": summary.not_found,
                            "seconds": round(result.seconds, 1),
                            "load_seconds": round(result.load_seconds, 1),
                        }
                        for share, value in summary.remaining_mrr.items():
                            row[f"remaining_mrr_{round(100 * share)}"] = round(value, 4)
                        writer.writerow(row)
                    handle.flush()
                    print(f"  {code} {scorer} seed {seed}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
                print(table_line(code, scorer, runs), flush=True)


def table_line(code: str, scorer: str, runs: list) -> str:
    """Seed means: MRR (rank found), mean rank, not found, MRR of the undecided terms at 50 %."""

    def mean(linker: str, key: str) -> float:
        values = [getattr(r.summaries[linker], key) for r in runs]
        return statistics.fmean(values)

    def half(linker: str) -> float:
        return statistics.fmean(r.summaries[linker].remaining_mrr[0.5] for r in runs)

    seconds = statistics.fmean(r.seconds + r.load_seconds for r in runs)
    return (
        f"| {code} | {len(runs[0].steps)} | {scorer} "
        f"| {mean('learning', 'mrr'):.4f} | {mean('static', 'mrr'):.4f} "
        f"| {mean('learning', 'mean_rank'):.2f} | {mean('static', 'mean_rank'):.2f} "
        f"| {mean('learning', 'not_found'):.0f} | {mean('static', 'not_found'):.0f} "
        f"| {half('learning'):.4f} | {half('static'):.4f} | {seconds:.0f} s |"
    )


if __name__ == "__main__":
    main()
