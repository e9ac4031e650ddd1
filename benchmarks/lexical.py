"""Time and score the lexical baselines on every MELO dataset (the paper's Table 3 sweep).

    python benchmarks/lexical.py --data ../shared/melo --out benchmarks/results/lexical.csv

Uses the published protocol (trec mode, top 100) and prints per-scorer wall time, the
largest MRR difference to the published value, and the total.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tqdm import tqdm

from melo_core.datasets import datasets_root, list_datasets, load_dataset
from melo_core.evaluation import evaluate
from melo_core.published import PUBLISHED_NAME, load_published, published_protocol
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.tsv import write_csv

DEFAULT_SCORERS = "edit-distance,word-tfidf,char-tfidf,bm25"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--scorers", default=DEFAULT_SCORERS)
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--out", default="benchmarks/results/lexical.csv")
    args = parser.parse_args()

    names = list_datasets(args.data) if args.datasets == "all" else args.datasets.split(",")
    scorers = args.scorers.split(",")
    root = datasets_root(args.data)
    rows = []
    seconds = {s: 0.0 for s in scorers}
    load_seconds = 0.0
    start = time.perf_counter()
    for name in tqdm(names, desc="datasets", file=sys.stderr):
        t0 = time.perf_counter()
        dataset = load_dataset(root / name)
        load_seconds += time.perf_counter() - t0
        for scorer_name in scorers:
            scorer = create_scorer(scorer_name, ScorerContext(dataset.query_language, dataset.corpus_languages))
            model = PUBLISHED_NAME[scorer_name]
            result = evaluate(dataset, scorer, published_protocol(model))
            seconds[scorer_name] += result.seconds
            published = load_published(args.data, model, name) or {}
            rows.append(
                {
                    "dataset": name,
                    "scorer": scorer_name,
                    "seconds": round(result.seconds, 3),
                    **{k: round(result.metrics[k], 4) for k in ("mrr", "acc@1", "acc@5", "acc@10", "map")},
                    "published_mrr": published.get("mrr", ""),
                    "diff_mrr": round(round(result.metrics["mrr"], 4) - published["mrr"], 4) if published else "",
                }
            )
    total = time.perf_counter() - start
    write_csv(args.out, rows)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"{len(names)} datasets x {len(scorers)} scorers in {total:.1f} s (loading data {load_seconds:.1f} s)")
    for scorer_name in scorers:
        diffs = [abs(r["diff_mrr"]) for r in rows if r["scorer"] == scorer_name and r["diff_mrr"] != ""]
        within = sum(d <= 0.01 for d in diffs)
        print(
            f"  {scorer_name:<18} {seconds[scorer_name]:7.1f} s   max |MRR - published| {max(diffs, default=0):.4f}"
            f"   within 0.01 on {within}/{len(diffs)} datasets"
        )


if __name__ == "__main__":
    main()
