"""Each job-ad query rule measured on the validation titles and on the MELO datasets.

    python benchmarks/query_rules.py --data ../shared/melo --pipeline best \
        --out benchmarks/results/query_rules.csv

A rule changes only the queries it matches, so only those are ranked again: for each dataset
(the titles set, then each MELO dataset) one evaluation through the engine
(``melo_core.benchmarking.evaluate_one``) scores every changed query as it is and as each rule
(and all rules together) leaves it. The pipeline's linker applies ``query_rules`` to the query
text and to nothing else, so ranking the rewritten text is what the pipeline with that rule gives
(``tests/test_query_rules.py`` checks it). Each row: the queries the rule changes and the change
of the dataset's MRR (over all its queries); the summary gives the change of the titles MRR and
of the MELO mean.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tqdm import tqdm

from melo_core.benchmarking import evaluate_one, protocol_for
from melo_core.datasets import MeloDataset, list_datasets, load_dataset, parse_dataset_name, resolve_dataset
from melo_core.query_rules import RULES, normalise_query
from melo_core.taxonomy import cached_taxonomy_from_melo
from melo_core.titles import titles_dataset
from melo_core.tsv import write_csv

ALL = "all"


def variants(dataset: MeloDataset, rules: dict[str, list[str]]) -> tuple[MeloDataset, dict[str, list[tuple[str, str]]]]:
    """A dataset of every changed query as it is (``q``) and as each rule set leaves it
    (``q|name``); and per rule set the (original, rewritten) query ids it changed."""
    ids, texts, relevant = [], [], {}
    changed: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for qid, text in zip(dataset.query_ids, dataset.queries, strict=True):
        rewritten = {name: normalise_query(text, chosen) for name, chosen in rules.items()}
        rewritten = {name: t for name, t in rewritten.items() if t != text}
        if not rewritten:
            continue
        ids.append(qid)
        texts.append(text)
        relevant[qid] = dataset.relevant.get(qid, [])
        scored: dict[str, str] = {}  # rewritten text -> its query id: each distinct text ranked once
        for name, new in rewritten.items():
            if new not in scored:
                scored[new] = f"{qid}|{name}"
                ids.append(scored[new])
                texts.append(new)
                relevant[scored[new]] = relevant[qid]
            changed[name].append((qid, scored[new]))
    subset = MeloDataset(dataset.name, dataset.path, ids, texts, dataset.corpus_ids, dataset.corpus, relevant,
                         dataset.concept_of, dataset.query_language, dataset.corpus_languages)  # fmt: skip
    return subset, changed


def measure(data: str, dataset: MeloDataset, pipeline: str, rules: dict[str, list[str]]) -> list[dict]:
    subset, changed = variants(dataset, rules)
    n = len([q for q in dataset.query_ids if dataset.relevant.get(q)])
    rows = []
    if not changed:
        return [{"dataset": dataset.name, "rule": name, "changed": 0, "queries": n, "delta_mrr": 0.0,
                 "before_changed": "", "after_changed": ""} for name in rules]  # fmt: skip
    result = evaluate_one(data, subset, pipeline, protocol_for(pipeline, dataset))
    reciprocal = {q: (1.0 / r if np.isfinite(r) else 0.0) for q, r in zip(result.query_ids, result.first_ranks(),
                                                                        strict=True)}  # fmt: skip
    for name in rules:
        pairs = changed.get(name, [])
        before = sum(reciprocal.get(a, 0.0) for a, _ in pairs)
        after = sum(reciprocal.get(b, 0.0) for _, b in pairs)
        rows.append({"dataset": dataset.name, "rule": name, "changed": len(pairs), "queries": n,
                     "delta_mrr": round((after - before) / n, 6),
                     "before_changed": round(before / len(pairs), 4) if pairs else "",
                     "after_changed": round(after / len(pairs), 4) if pairs else ""})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/melo")
    parser.add_argument("--pipeline", default="best")
    parser.add_argument("--titles", default="../shared/jobbert/titles.csv")
    parser.add_argument("--datasets", default="all", help="MELO datasets: all, none, or comma-separated names")
    parser.add_argument("--rules", default=",".join(RULES), help="rules measured one by one (and all together)")
    parser.add_argument("--out", default="benchmarks/results/query_rules.csv")
    args = parser.parse_args()
    names = [r for r in args.rules.split(",") if r]
    rules = {name: [name] for name in names} | {ALL: names}
    datasets = []
    if args.titles:
        datasets.append(titles_dataset(args.titles, cached_taxonomy_from_melo(args.data), ["en"])[0])
    melo = (
        []
        if args.datasets == "none"
        else list_datasets(args.data)
        if args.datasets == "all"
        else args.datasets.split(",")
    )
    rows: list[dict] = []
    for dataset in tqdm([*datasets, *melo], unit="dataset"):
        if isinstance(dataset, str):
            dataset = load_dataset(resolve_dataset(args.data, dataset))
        rows += measure(args.data, dataset, args.pipeline, rules)
        write_csv(args.out, rows, list(rows[0]))  # after each dataset: an interrupted run keeps its rows
    print(f"{'rule':<12} {'titles Δ':>9} {'changed':>8} {'MELO mean Δ':>12} {'changed':>8} {'worst dataset':>24}")
    for name in rules:
        mine = [r for r in rows if r["rule"] == name]
        titles = [r for r in mine if not parse_dataset_name(r["dataset"])]
        melo_rows = [r for r in mine if parse_dataset_name(r["dataset"])]
        melo_delta = sum(r["delta_mrr"] for r in melo_rows) / max(len(melo_rows), 1)
        worst = min(melo_rows, key=lambda r: r["delta_mrr"], default=None)
        worst_text = f"{worst['dataset']} {worst['delta_mrr']:+.4f}" if worst else ""
        print(f"{name:<12} {sum(r['delta_mrr'] for r in titles):>+9.4f} {sum(r['changed'] for r in titles):>8} "
              f"{melo_delta:>+12.4f} {sum(r['changed'] for r in melo_rows):>8} "
              f"{worst_text:>24}")  # fmt: skip


if __name__ == "__main__":
    main()
