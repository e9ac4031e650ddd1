"""How one scorer is evaluated on one dataset: its known mentions, its context and its protocol.

``eval``, the Benchmark page and ``experiment run`` all go through ``evaluate_one``, so a number
means the same wherever it was produced:
- a pipeline brings its own known mentions: every crosswalk but the dataset's own country's (all of
  them for a job-titles set); another scorer gets them only when asked (``mention_weight``);
- on a job-titles set a scorer ranks one form per concept (``concepts:`` unless it is a pipeline),
  to depth 100 unless a depth is given, so MRR and acc@k are concept-level and acc@100 is recall@100.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from melo_core.esco.datasets import MeloDataset
from melo_core.esco.titles import is_titles_dataset
from melo_core.evaluation.protocol import EvaluationResult, Protocol, evaluate
from melo_core.evaluation.published import default_protocol
from melo_core.linking.descriptions import esco_description_language, esco_descriptions
from melo_core.linking.pipeline import is_pipeline, load_pipeline
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.base import KnownMentions
from melo_core.scorers.concept_ranking import PREFIX as CONCEPTS_PREFIX
from melo_core.scorers.known_mentions import ALIAS_RELATIONS, dataset_mentions
from melo_core.spec import WrappedSpec, parse

TITLES_DEPTH = 100


def protocol_for(spec: str, dataset: MeloDataset, mode: str | None = None, depth: int | str | None = None) -> Protocol:
    """The published protocol of the scorer's method (``default_protocol``); on a titles set
    depth 100 unless ``depth`` names one."""
    protocol = default_protocol(spec, mode, depth)
    if is_titles_dataset(dataset.name) and depth in (None, "auto"):
        return Protocol(protocol.mode, TITLES_DEPTH)
    return protocol


def ranked_spec(spec: str, dataset: MeloDataset) -> str:
    """The spec that ranks ``dataset``: one form per concept on a titles set."""
    if is_titles_dataset(dataset.name) and not (is_pipeline(spec) or isinstance(parse(spec), WrappedSpec)):
        return CONCEPTS_PREFIX + spec
    return spec


def mentions_for(data_dir: str | Path, dataset: MeloDataset, spec: str, mention_weight: float = 0.0,
                 mention_relations: Iterable[str] = ALIAS_RELATIONS) -> KnownMentions | None:  # fmt: skip
    """The known mentions the scorer gets on this dataset (None: none)."""
    if is_pipeline(spec):
        definition = load_pipeline(spec)
        if definition.monolingual.mention_weight or definition.cross_lingual.mention_weight:
            return dataset_mentions(data_dir, dataset.name, definition.mention_relations)
        return None
    if mention_weight:
        return dataset_mentions(data_dir, dataset.name, mention_relations, mention_weight)
    return None


def scorer_context(data_dir: str | Path, dataset: MeloDataset, spec: str, mention_weight: float = 0.0,
                   mention_relations: Iterable[str] = ALIAS_RELATIONS, show_progress: bool = False) -> ScorerContext:  # fmt: skip
    """What ``spec`` is given on ``dataset``: its known mentions and, for a pipeline that reads
    them, the ESCO descriptions."""
    mentions = mentions_for(data_dir, dataset, spec, mention_weight, mention_relations)
    context = ScorerContext.for_dataset(dataset, show_progress=show_progress, mentions=mentions)
    if is_pipeline(spec) and load_pipeline(spec).uses_descriptions:
        context = replace(
            context,
            descriptions=esco_descriptions(str(data_dir)),
            description_language=esco_description_language(str(data_dir)),
        )
    return context


def evaluate_one(data_dir: str | Path, dataset: MeloDataset, spec: str, protocol: Protocol | None = None, *,
                 mention_weight: float = 0.0, mention_relations: Iterable[str] = ALIAS_RELATIONS,
                 show_progress: bool = False,
                 on_progress: Callable[[int], None] | None = None) -> EvaluationResult:  # fmt: skip
    """Evaluate ``spec`` on ``dataset`` as ``eval`` does (see the module docstring)."""
    context = scorer_context(data_dir, dataset, spec, mention_weight, mention_relations, show_progress)
    scorer = create_scorer(ranked_spec(spec, dataset), context)
    return evaluate(dataset, scorer, protocol or protocol_for(spec, dataset), on_progress=on_progress)
