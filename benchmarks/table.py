"""Markdown table of ours vs published MRR from an evaluation CSV (lexical.py or `eval --out`).

python benchmarks/table.py benchmarks/results/lexical.csv
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    args = parser.parse_args()
    with open(args.csv, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    scorers = list(dict.fromkeys(r["scorer"] for r in rows))
    by_dataset: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for row in rows:
        by_dataset[row["dataset"]][row["scorer"]] = row
    header = "| dataset | " + " | ".join(f"{s} MRR (published, diff)" for s in scorers) + " |"
    print(header)
    print("|---" * (len(scorers) + 1) + "|")
    for dataset, cells in by_dataset.items():
        parts = []
        for scorer in scorers:
            cell = cells.get(scorer)
            if cell is None:
                parts.append("")
            elif cell.get("published_mrr"):
                parts.append(
                    f"{float(cell['mrr']):.4f} ({float(cell['published_mrr']):.4f}, {float(cell['diff_mrr']):+.4f})"
                )
            else:
                parts.append(f"{float(cell['mrr']):.4f} (–)")
        print(f"| {dataset} | " + " | ".join(parts) + " |")
    means = []
    for scorer in scorers:
        values = [float(c[scorer]["mrr"]) for c in by_dataset.values() if scorer in c]
        published = [
            float(c[scorer]["published_mrr"]) for c in by_dataset.values() if c.get(scorer, {}).get("published_mrr")
        ]
        pub = f"{sum(published) / len(published):.4f}" if published else "–"
        means.append(f"**{sum(values) / len(values):.4f}** ({pub})")
    print("| **mean** | " + " | ".join(means) + " |")


if __name__ == "__main__":
    main()
