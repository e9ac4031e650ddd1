"""How much of a scorer's MELO MRR comes from trec_eval's tie order.

    python benchmarks/tie_order.py --data ../shared/melo --scorers concepts:char-tfidf-lemmas,char-tfidf \
        --out benchmarks/results/tie_order_lexical.csv
    python benchmarks/tie_order.py --data ../shared/melo --scorers best \
        --datasets nor_q_no_c_no,ita_q_it_c_it,aut_q_de_c_de --out benchmarks/results/tie_order_best.csv

trec_eval (the MELO paper's protocol, ``eval``'s default) rounds scores to 5 decimals and breaks
ties by corpus element id, descending: a scorer that gives a relevant and an irrelevant element the
same score gains or loses by where their ids fall, not by what it knows. For each dataset and
scorer this script scores every query once (through ``evaluate_one``'s scorer and context, whole
corpus) and reports MRR and acc@1 three ways: ties in trec order (``eval --mode trec --depth 0``),
ties in random order (the expected value over every order, computed exactly), and ties last
(a relevant element below every element with the same rounded score: a lower bound).
"""

from __future__ import annotations

import argparse
import os
import sys
from math import comb
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from tqdm import tqdm

from melo_core.arguments import at_least
from melo_core.benchmarking import ranked_spec, scorer_context
from melo_core.datasets import datasets_root, list_datasets, load_dataset
from melo_core.evaluation import Protocol, rank_batch, tie_keys
from melo_core.scorers import create_scorer
from melo_core.tsv import write_csv

BATCH = 256


def first_relevant(scores: np.ndarray, relevant: np.ndarray) -> tuple[float, float, float, float]:
    """(expected RR, expected acc@1) with ties in random order, and (RR, acc@1) with ties last,
    on scores rounded as trec_eval rounds them."""
    rounded = np.round(np.where(np.isnan(scores), -np.inf, scores), 5)
    best = rounded[relevant].max()
    before = int((rounded > best).sum())  # ranked above every relevant element, whatever the order
    tied = int((rounded == best).sum())
    hits = int((rounded[relevant] == best).sum())
    # The first relevant element sits at position k of the tie with probability C(n-k, r-1) / C(n, r).
    expected_rr = sum(comb(tied - k, hits - 1) / comb(tied, hits) / (before + k) for k in range(1, tied - hits + 2))
    expected_at1 = hits / tied if before == 0 else 0.0
    last = before + tied - hits + 1
    return expected_rr, expected_at1, 1.0 / last, float(last == 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--scorers", default="concepts:char-tfidf-lemmas")
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--limit-queries", type=at_least(0), default=0)
    parser.add_argument("--out", required=True, help="CSV of the per-dataset rows")
    args = parser.parse_args()

    names = list_datasets(args.data) if args.datasets == "all" else args.datasets.split(",")
    trec = Protocol("trec", 0)
    rows = []
    for name in tqdm(names, desc="datasets", file=sys.stderr):
        dataset = load_dataset(datasets_root(args.data) / name)
        if args.limit_queries:
            dataset = dataset.subset(args.limit_queries)
        relevant = dataset.relevant_indices()
        evaluated = [i for i, rel in enumerate(relevant) if rel.size]
        keys = tie_keys(dataset.corpus_ids, "trec")
        for spec in args.scorers.split(","):
            scorer = create_scorer(ranked_spec(spec, dataset), scorer_context(args.data, dataset, spec))
            scorer.fit(dataset.corpus)
            per_query = []
            for begin in range(0, len(evaluated), BATCH):
                batch = evaluated[begin : begin + BATCH]
                scores = np.asarray(scorer.score([dataset.queries[i] for i in batch]), dtype=np.float64)
                ranks, _ = rank_batch(scores, [relevant[i] for i in batch], keys, trec)
                for row, i, rank in zip(scores, batch, ranks, strict=True):
                    first = rank.min() if rank.size else np.inf
                    per_query.append((1.0 / first, float(first == 1), *first_relevant(row, relevant[i])))
            means = np.mean(per_query, axis=0)
            rows.append({"dataset": name, "scorer": spec, "queries": len(per_query),
                         "mrr_trec": round(means[0], 6), "mrr_random_ties": round(means[2], 6),
                         "mrr_ties_last": round(means[4], 6), "acc@1_trec": round(means[1], 6),
                         "acc@1_random_ties": round(means[3], 6), "acc@1_ties_last": round(means[5], 6)})  # fmt: skip
            print(f"{name:<24} {spec:<28} MRR trec {means[0]:.4f}  random ties {means[2]:.4f}  "
                  f"ties last {means[4]:.4f}", file=sys.stderr)  # fmt: skip
    write_csv(args.out, rows)
    for spec in args.scorers.split(","):
        mine = [r for r in rows if r["scorer"] == spec]
        worst = max(mine, key=lambda r: float(r["mrr_trec"]) - float(r["mrr_random_ties"]))
        gain = float(worst["mrr_trec"]) - float(worst["mrr_random_ties"])
        print(f"{spec}: mean MRR trec {np.mean([float(r['mrr_trec']) for r in mine]):.4f}, random ties "
              f"{np.mean([float(r['mrr_random_ties']) for r in mine]):.4f}, ties last "
              f"{np.mean([float(r['mrr_ties_last']) for r in mine]):.4f} over {len(mine)} datasets; "
              f"trec order gains most on {worst['dataset']} ({gain:+.4f})")  # fmt: skip


if __name__ == "__main__":
    main()
