"""The mention prior's weight swept on the job-ad titles (or a MELO dataset) through the engine.

    python benchmarks/mention_prior.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --weights 0,0.01,0.02,0.03,0.04,0.05,0.06,0.07,0.08,0.1 --out benchmarks/results/mention_prior_titles.csv

The pipeline (default ``best``; a TOML path works too) is built as ``eval`` builds it
(``PipelineScorer``: its known mentions, exact search, one form per concept). Each query's fused
candidates are computed once (``Linker.fused``); every prior weight then ranks the concepts with
``Linker.rank_concepts`` (what ``concept_ranking`` does), the prior set to that weight, and ``evaluate`` scores the ranking
(trec, depth 100 on titles as ``eval``). So the sweep costs one evaluation, and a weight's row is
what ``eval`` gives the pipeline with that ``mention_prior`` in both variants.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tqdm import tqdm

from melo_core.arguments import at_least
from melo_core.benchmarking import mentions_for, protocol_for
from melo_core.datasets import load_dataset, resolve_dataset
from melo_core.evaluation import evaluate
from melo_core.pipeline import PipelineScorer, load_pipeline
from melo_core.scorers import ScorerContext
from melo_core.taxonomy import cached_taxonomy_from_melo
from melo_core.titles import titles_dataset
from melo_core.tsv import write_csv

METRICS = ("mrr", "acc@1", "acc@5", "acc@10", "acc@100")


class PriorSweep:
    """A pipeline as a scorer whose fused candidates are kept per query text, so that each prior
    weight re-ranks them without scoring again."""

    def __init__(self, pipeline: PipelineScorer, weight: float = 0.0):
        self.pipeline = pipeline
        self.weight = weight
        self.fused: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.fitted = False

    @property
    def name(self) -> str:
        return f"{self.pipeline.name}@mention_prior={self.weight:g}"

    def fit(self, corpus: Sequence[str]) -> None:
        if not self.fitted:
            self.pipeline.fit(corpus)
            self.fitted = True

    def score(self, queries: Sequence[str]) -> np.ndarray:
        assert self.pipeline.pipeline is not None
        linker = self.pipeline.pipeline.linker(self.pipeline.context.query_language)
        missing = [q for q in dict.fromkeys(queries) if q not in self.fused]
        for query, (forms, scores, _) in zip(missing, linker.fused(missing) if missing else [], strict=True):
            self.fused[query] = (forms, scores)  # the pools (full score rows) are let go
        linker.mention_prior = self.weight
        out = np.full((len(queries), self.pipeline.n_forms), -np.inf)
        for row, query in enumerate(queries):
            concept_forms, concept_scores = linker.rank_concepts(*self.fused[query])
            out[row, concept_forms] = concept_scores
        return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--titles", help="a titles CSV (vacancyTitle, conceptUri), ranked over --langs labels")
    parser.add_argument("--dataset", help="or a MELO dataset name")
    parser.add_argument("--langs", default="en", help="--titles: label languages (default en)")
    parser.add_argument("--pipeline", default="best")
    parser.add_argument("--weights", default="0,0.01,0.02,0.03,0.04,0.05,0.06,0.07,0.08,0.1")
    parser.add_argument("--limit", type=at_least(0), default=0, help="only the first N queries (a quick check)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if bool(args.titles) == bool(args.dataset):
        parser.error("give --titles or --dataset")
    if args.titles:
        dataset, report = titles_dataset(args.titles, cached_taxonomy_from_melo(args.data), args.langs.split(","))
        print(report.describe(), file=sys.stderr)
    else:
        dataset = load_dataset(resolve_dataset(args.data, args.dataset))
    if args.limit:
        dataset = dataset.subset(args.limit)
    definition = load_pipeline(args.pipeline)
    mentions = mentions_for(args.data, dataset, str(definition.path))
    context = ScorerContext.for_dataset(dataset, show_progress=False, mentions=mentions)
    sweep = PriorSweep(PipelineScorer(definition, context))
    protocol = protocol_for(args.pipeline, dataset)
    rows = []
    for weight in tqdm([float(w) for w in args.weights.split(",")], desc="prior weights", file=sys.stderr):
        sweep.weight = weight
        result = evaluate(dataset, sweep, protocol)
        rows.append({"dataset": dataset.name, "pipeline": definition.name, "mention_prior": weight,
                     **{k: round(float(result.metrics[k]), 6) for k in METRICS}})  # fmt: skip
        print(f"mention_prior {weight:<5g} MRR {result.metrics['mrr']:.4f}  acc@1 {result.metrics['acc@1']:.4f}",
              file=sys.stderr)  # fmt: skip
    write_csv(args.out, rows, list(rows[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
