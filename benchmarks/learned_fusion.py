"""Could a learned re-ranker of a pipeline's own signals lift the job-ad titles? (issue 19)

    python benchmarks/learned_fusion.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --out benchmarks/results/learned_fusion.csv

Each query is linked as ``eval`` links it (``PipelineScorer``: the pipeline's known mentions with the
query's own country held out, its descriptions, exact search), and its first ``--depth`` candidate
concepts become rows of features: the fused score, its gap to the first, the mention prior's part,
whether a known mention matched, the rank, the query's length in words, and each component's score
(missing where coverage left the component out). A gradient-boosted classifier
(``sklearn.ensemble.HistGradientBoostingClassifier``) learns "is this the gold concept" from them,
and its probability re-ranks the candidates.

- **MELO, leave one country out:** the monolingual MELO datasets (the variant English titles use);
  each country's datasets are re-ranked by a model fitted on the other countries' crosswalks.
- **Titles:** re-ranked by a model fitted on every monolingual MELO dataset (the titles belong to
  no country). The titles never train anything here.
- **``--titles-cv`` (a diagnostic, never a product setting):** the same classifier fitted on the
  titles themselves, 5-fold cross-validation over titles, with the signals above and then with three
  concept features (the concept's number of English labels, ISCO group or occupation, words in its
  preferred label). It estimates how much of the distance to a target a re-ranker of these
  signals could close at best; nothing of it is kept.

MRR here is over the first ``--depth`` candidates (a gold concept below them adds 0), so it can be a
little below ``eval``'s.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tqdm import tqdm

from melo_core.arguments import at_least
from melo_core.benchmarking import scorer_context
from melo_core.datasets import MeloDataset, list_datasets, load_dataset, parse_dataset_name, resolve_dataset
from melo_core.pipeline import PipelineScorer, load_pipeline
from melo_core.taxonomy import Taxonomy, cached_taxonomy_from_melo
from melo_core.titles import titles_dataset
from melo_core.tsv import write_csv

SIGNALS = ("score", "gap", "prior", "via_mention", "rank", "query_words")


class Linked:
    """One dataset's queries linked by the pipeline: feature rows, gold flags and query ids."""

    def __init__(self, name: str, rows: list[list[float]], gold: list[int], query: list[int], queries: int,
                 concepts: list[str]):  # fmt: skip
        self.name, self.queries = name, queries
        self.x, self.y, self.query = np.array(rows, dtype=float), np.array(gold), np.array(query)
        self.concepts = concepts  # per row

    def mrr(self, scores: np.ndarray) -> float:
        order = np.lexsort((-scores, self.query))
        y, q = self.y[order], self.query[order]
        starts = np.searchsorted(q, np.arange(self.queries))
        ends = np.searchsorted(q, np.arange(self.queries), side="right")
        return sum(1 / (1 + y[a:b].argmax()) for a, b in zip(starts, ends, strict=True) if y[a:b].any()) / self.queries


def _base(scorer: str) -> str:
    """A component's name without options, its lemmatised and plain forms one feature."""
    return scorer.split("@")[0].removesuffix("-lemmas")


def link(data: str, dataset: MeloDataset, pipeline: str, components: list[str], depth: int) -> Linked:
    scorer = PipelineScorer(load_pipeline(pipeline), scorer_context(data, dataset, pipeline))
    scorer.fit(dataset.corpus)
    assert scorer.pipeline is not None
    linker = scorer.pipeline.linker(dataset.query_language)
    rows, gold, query, concepts = [], [], [], []
    batch = 256
    for start in tqdm(range(0, len(dataset.queries), batch), desc=dataset.name, leave=False, file=sys.stderr):
        ids, texts = dataset.query_ids[start : start + batch], dataset.queries[start : start + batch]
        for offset, (qid, text, candidates) in enumerate(zip(ids, texts, linker.link(texts, top_k=depth), strict=True)):
            wanted = {dataset.concept_of.get(c, c) for c in dataset.relevant.get(qid, ())}
            top = candidates[0].score if candidates else 0.0
            for rank, c in enumerate(candidates):
                by_name = {_base(name): value for name, value in c.component_scores.items()}
                rows.append([c.score, c.score - top, c.prior, float(c.via_mention), rank, len(text.split()),
                             *(by_name.get(name, math.nan) for name in components)])  # fmt: skip
                gold.append(int(c.concept_uri in wanted))
                query.append(start + offset)
                concepts.append(c.concept_uri)
    return Linked(dataset.name, rows, gold, query, len(dataset.queries), concepts)


def classifier():
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, random_state=0)


def fit(parts: list[Linked], train_depth: int):
    keep = [p.x[:, SIGNALS.index("rank")] < train_depth for p in parts]
    x = np.concatenate([p.x[k] for p, k in zip(parts, keep, strict=True)])
    y = np.concatenate([p.y[k] for p, k in zip(parts, keep, strict=True)])
    return classifier().fit(x, y)


def concept_features(linked: Linked, taxonomy: Taxonomy) -> np.ndarray:
    def one(uri: str) -> list[float]:
        concept = taxonomy.by_uri[uri]
        english = concept.labels.get("en")
        return [math.log1p(len(english.surface_forms()) if english else 0), float(concept.kind != "occupation"),
                len(concept.preferred_label().split())]  # fmt: skip

    cache: dict[str, list[float]] = {}
    return np.array([cache.setdefault(u, one(u)) for u in linked.concepts])


def titles_cv(titles: Linked, extra: np.ndarray | None, folds: int = 5) -> float:
    x = titles.x if extra is None else np.hstack([titles.x, extra])
    fold = titles.query % folds
    predicted = np.zeros(len(titles.y))
    for f in range(folds):
        model = classifier().fit(x[fold != f], titles.y[fold != f])
        predicted[fold == f] = model.predict_proba(x[fold == f])[:, 1]
    return titles.mrr(predicted)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True)
    parser.add_argument("--titles", help="a titles CSV (vacancyTitle, conceptUri), ranked over English labels")
    parser.add_argument("--pipeline", default="best")
    parser.add_argument("--depth", type=at_least(1), default=100, help="candidates per query (default 100)")
    parser.add_argument("--train-depth", type=at_least(1), default=50, help="candidates per query a model learns from")
    parser.add_argument("--limit", type=at_least(0), default=0, help="only the first N queries of each dataset")
    parser.add_argument("--titles-cv", action="store_true", help="also the diagnostic fitted on the titles (see above)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    definition = load_pipeline(args.pipeline)
    components = sorted({_base(c.scorer) for c in definition.monolingual.components})
    names = [n for n in list_datasets(args.data) if (p := parse_dataset_name(n)) and p.kind == "monolingual"]
    melo: list[Linked] = []
    for name in tqdm(names, desc="MELO datasets", file=sys.stderr):
        dataset = load_dataset(resolve_dataset(args.data, name))
        melo.append(link(args.data, dataset.subset(args.limit) if args.limit else dataset, args.pipeline,
                         components, args.depth))  # fmt: skip
    rows = []
    by_country: dict[str, list[Linked]] = defaultdict(list)
    for part in melo:
        by_country[part.name.split("_")[0]].append(part)
    for country, parts in tqdm(by_country.items(), desc="leave one country out", file=sys.stderr):
        model = fit([p for p in melo if p.name.split("_")[0] != country], args.train_depth)
        for part in parts:
            rows.append({"dataset": part.name, "trained_on": "other countries' MELO datasets",
                         "base_mrr": round(part.mrr(part.x[:, 0]), 6),
                         "reranked_mrr": round(part.mrr(model.predict_proba(part.x)[:, 1]), 6)})  # fmt: skip
    print(f"MELO monolingual ({len(rows)}): {np.mean([r['base_mrr'] for r in rows]):.4f} -> "
          f"{np.mean([r['reranked_mrr'] for r in rows]):.4f} (leave one country out)", file=sys.stderr)  # fmt: skip
    if args.titles:
        taxonomy = cached_taxonomy_from_melo(args.data)
        dataset, report = titles_dataset(args.titles, taxonomy, ["en"])
        print(report.describe(), file=sys.stderr)
        titles = link(args.data, dataset.subset(args.limit) if args.limit else dataset, args.pipeline, components,
                      args.depth)  # fmt: skip
        base = titles.mrr(titles.x[:, 0])
        model = fit(melo, args.train_depth)
        rows.append({"dataset": dataset.name, "trained_on": "every monolingual MELO dataset",
                     "base_mrr": round(base, 6), "reranked_mrr": round(titles.mrr(model.predict_proba(titles.x)[:, 1]), 6)})  # fmt: skip
        if args.titles_cv:
            for what, extra in (("the titles (5-fold CV; diagnostic)", None),
                                ("the titles (5-fold CV; diagnostic), with concept features",
                                 concept_features(titles, taxonomy))):  # fmt: skip
                rows.append({"dataset": dataset.name, "trained_on": what, "base_mrr": round(base, 6),
                             "reranked_mrr": round(titles_cv(titles, extra), 6)})  # fmt: skip
        for row in rows[-(3 if args.titles_cv else 1) :]:
            print(f"{row['dataset']}: {row['base_mrr']:.4f} -> {row['reranked_mrr']:.4f} (trained on "
                  f"{row['trained_on']})", file=sys.stderr)  # fmt: skip
    write_csv(args.out, rows, list(rows[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
