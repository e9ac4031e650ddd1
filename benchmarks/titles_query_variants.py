"""Query variants fused, not substituted: a probe on the job-ad titles.

Each query rule of ``melo_core/query_rules.py`` *replaces* a title by its rewritten form, and every
rule but seniority lowered the titles MRR that way (docs/experiments/query-rules.md): cutting
"(Native Thai)" helps some titles and loses words others need. Here the pipeline ranks both
forms and a concept scores ``original + W * rewritten`` (outside a form's candidates: just below
its lowest candidate), or the larger of the two (``max``). Titles no rule changes keep their
ranking. No MELO query or annotation is read; the weights are chosen on the validation titles.

    python benchmarks/titles_query_variants.py --data ../shared/melo --titles ../shared/jobbert/titles.csv \
        --pipeline best --weights 0.25,0.5,1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from tqdm import tqdm

from benchmarks.titles_dense_probes import expected_reciprocal_rank, floats
from melo_core.arguments import at_least
from melo_core.benchmarking import scorer_context
from melo_core.pipeline import PipelineScorer, load_pipeline
from melo_core.query_rules import RULES, check_rules, normalise_query
from melo_core.taxonomy import cached_taxonomy_from_melo
from melo_core.titles import titles_dataset

CHUNK = 500
ALL = "all"


def filled(scores: np.ndarray) -> np.ndarray:
    """``-inf`` (not a candidate) raised to just below the row's lowest candidate."""
    finite = np.isfinite(scores)
    lowest = np.where(finite, scores, np.inf).min(axis=1, keepdims=True)
    lowest = np.where(np.isfinite(lowest), lowest, 0.0)
    return np.where(finite, scores, lowest - 1.0)


def reciprocal_rank(scores: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expected reciprocal rank with ties in random order, and acc@1 (a tie counts its share)."""
    at_gold = scores[np.arange(len(wanted)), wanted][:, None]
    above, tied = (scores > at_gold).sum(1), (scores == at_gold).sum(1)
    return expected_reciprocal_rank(above, tied), (above == 0) / tied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="MELO data folder (the ESCO labels)")
    parser.add_argument("--titles", required=True, help="titles CSV (vacancyTitle, conceptUri)")
    parser.add_argument("--pipeline", default="best")
    parser.add_argument("--rules", default=",".join(RULES), help="rules tried one by one (and all together)")
    parser.add_argument("--weights", type=floats, default=[0.25, 0.5, 1.0], help="weights W of the rewritten form")
    parser.add_argument("--every", type=at_least(1), default=1, help="every N-th title (a quick check)")
    args = parser.parse_args()
    names = [name for name in args.rules.split(",") if name]
    rule_sets = {name: [name] for name in names} | {ALL: names}
    try:
        check_rules(rule_sets[ALL])
    except ValueError as exc:
        parser.error(str(exc))

    dataset, report = titles_dataset(args.titles, cached_taxonomy_from_melo(args.data), "en")
    print(report.describe(), flush=True)
    concepts = {uri: i for i, uri in enumerate(sorted(set(dataset.concept_of.values())))}
    concept = np.array([concepts[dataset.concept_of[c]] for c in dataset.corpus_ids])
    order = np.argsort(concept, kind="stable")
    starts = np.r_[0, np.flatnonzero(np.diff(concept[order])) + 1]
    picked = np.arange(0, len(dataset.queries), args.every)
    titles = [dataset.queries[i] for i in picked]
    gold = np.array([concepts[dataset.concept_of[dataset.relevant[dataset.query_ids[i]][0]]] for i in picked])

    pipeline = PipelineScorer(load_pipeline(args.pipeline), scorer_context(args.data, dataset, args.pipeline))
    pipeline.fit(dataset.corpus)

    def concept_scores(texts: list[str]) -> np.ndarray:
        """The pipeline's fused score of each concept (its best form; -inf outside the candidates)."""
        out = []
        for begin in tqdm(range(0, len(texts), CHUNK), desc="ranking", unit="chunk", file=sys.stderr):
            fused = pipeline.score(texts[begin : begin + CHUNK])
            out.append(np.maximum.reduceat(fused[:, order], starts, axis=1).astype(np.float32))
        return np.concatenate(out) if out else np.zeros((0, len(starts)), dtype=np.float32)

    rewritten = {name: [normalise_query(t, chosen, "en") for t in titles] for name, chosen in rule_sets.items()}
    distinct = sorted({v for name in rule_sets for t, v in zip(titles, rewritten[name], strict=True) if v != t})
    print(f"{len(titles):,} titles, {len(distinct):,} distinct rewritten forms", flush=True)
    original = concept_scores(titles)
    variant_rows = {text: i for i, text in enumerate(distinct)}
    variants = concept_scores(distinct)
    base_rr, base_first = reciprocal_rank(original, gold)
    print("| rule | titles changed | combination | MRR | Δ MRR | acc@1 |\n|---|---|---|---|---|---|")
    print(f"| none | 0 | {args.pipeline} as it is | {base_rr.mean():.4f} | | {base_first.mean():.4f} |")
    for name in rule_sets:
        changed = np.array([v != t for t, v in zip(titles, rewritten[name], strict=True)])
        if not changed.any():
            continue
        rows = np.flatnonzero(changed)
        mine = filled(original[rows])
        theirs = filled(variants[[variant_rows[rewritten[name][i]] for i in rows]])
        combos = {"replaced": theirs, "max": np.maximum(mine, theirs)}
        combos |= {f"+ {w} x rewritten": mine + w * theirs for w in args.weights}
        for combo, scores in combos.items():
            rr, first = base_rr.copy(), base_first.copy()
            rr[rows], first[rows] = reciprocal_rank(scores, gold[rows])
            print(f"| {name} | {len(rows):,} | {combo} | {rr.mean():.4f} | {rr.mean() - base_rr.mean():+.4f} "
                  f"| {first.mean():.4f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
