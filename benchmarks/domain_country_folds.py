"""The domain encoder fine-tuned on national crosswalks, held out by country (k folds).

    python benchmarks/domain_country_folds.py --data ../shared/melo --base models/esco-static \
        --folds 4 --rounds 30 --out benchmarks/results/domain_country_folds.csv

Countries (the prefix of a crosswalk or dataset name) are split into ``--folds`` groups in sorted
order (country i goes to fold i mod k). For each fold a model starts from ``--base`` (the ESCO-only
domain model) and is fine-tuned on the ESCO labels plus the accepted exact/narrow matches of every
crosswalk of the *other* folds (term title paired with its concept's labels), then evaluated
on the MELO datasets of the fold's own countries. So no reported dataset's country ever gave the
model a training pair; its model card lists the crosswalks it saw.
Protocol: trec, whole corpus (as the published dense runs).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from melo_core.arguments import at_least
from melo_core.crosswalk import crosswalk_country, crosswalk_decisions, list_crosswalks, training_crosswalks
from melo_core.datasets import list_datasets, parse_dataset_name
from melo_core.taxonomy import cached_taxonomy_from_melo
from melo_core.training import TrainConfig, train
from melo_core.tsv import write_csv

ROOT = Path(__file__).resolve().parent.parent


def folds_of(countries: list[str], k: int) -> list[list[str]]:
    ordered = sorted(set(countries))
    return [ordered[i::k] for i in range(k)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("MELO_DATA", "../shared/melo"))
    parser.add_argument("--base", default="models/esco-static", help="the ESCO-only model to start from")
    parser.add_argument("--folds", type=at_least(2), default=4)
    parser.add_argument("--only-fold", type=at_least(0), help="train and evaluate this fold only")
    parser.add_argument("--rounds", type=at_least(1), default=30)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--models", default="models/country-folds", help="where the fold models go")
    parser.add_argument("--out", default="benchmarks/results/domain_country_folds.csv")
    args = parser.parse_args()
    if args.only_fold is not None and args.only_fold >= args.folds:  # else nothing runs and nothing says why
        parser.error(f"--only-fold must be below --folds ({args.folds}), got {args.only_fold}")

    crosswalks = list_crosswalks(args.data)
    datasets = list_datasets(args.data)
    folds = folds_of([crosswalk_country(c) for c in crosswalks], args.folds)
    taxonomy = cached_taxonomy_from_melo(args.data)
    rows: list[dict[str, str]] = []
    for k, held in enumerate(folds):
        if args.only_fold is not None and k != args.only_fold:
            continue
        seen = training_crosswalks(args.data, "all", held)
        model = Path(args.models) / f"fold{k}"
        if not (model / "modules.json").is_file():
            decisions = [d for c in seen for d in crosswalk_decisions(args.data, c)]
            print(f"fold {k}: held out {', '.join(held)}; training on {len(decisions)} matches of "
                  f"{len(seen)} crosswalks", file=sys.stderr)  # fmt: skip
            start = time.perf_counter()
            settings = TrainConfig(base=args.base, rounds=args.rounds, learning_rate=args.lr)
            report = train(taxonomy, model, settings, source=f"ESCO union of the MELO corpora in {args.data}",
                           decisions=decisions, decision_schemes=seen)  # fmt: skip
            print(f"fold {k}: {time.perf_counter() - start:.0f} s, held-out ESCO MRR "
                  f"{report.validation_mrr_before:.4f} -> {report.validation_mrr_after:.4f}", file=sys.stderr)  # fmt: skip
        mine = [d for d in datasets if (parsed := parse_dataset_name(d)) and parsed.country in held]
        part = Path(args.out).with_suffix(f".fold{k}.csv")
        subprocess.run(
            [sys.executable, "-m", "melo_core", "eval", "--data", args.data, "--datasets", ",".join(mine),
             "--scorers", f"st:{model}", "--out", str(part)],
            cwd=ROOT, check=True,
        )  # fmt: skip
        with part.open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                rows.append({"fold": str(k), "held_out": " ".join(held), **row})
    if rows and args.only_fold is None:
        write_csv(args.out, rows)
        for k in range(args.folds):
            Path(args.out).with_suffix(f".fold{k}.csv").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
