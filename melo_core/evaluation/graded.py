"""Graded similarity, MUSTS's way: does a scorer's score follow the crosswalks' graded judgments?

A national crosswalk grades (term, ESCO concept) pairs by its relation: exactMatch 3, closeMatch 2,
narrowMatch and broadMatch 1. Each related pair gets one unrelated pair, grade 0: the same term with
a concept drawn at random (``random.Random(seed)``, in the crosswalk's order) from the concepts the
crosswalk maps some term to, never one the term is related to, nor one drawn for it before. Drawn
from the crosswalk's own targets, the unrelated concepts are of the kinds it maps to (occupations
or ISCO groups, at its levels): a scorer earns nothing by telling the kinds apart.

Each pair is scored through the linker (``Linker.pair_scores``): the pipeline's fused concept score
and each component's, as ``link`` ranks the concept were it among the candidates. A pipeline knows
the other countries' crosswalk titles as mentions, never the held-out country's own (they would give
the answer). The measure is Spearman's rank correlation between score and grade over the pairs of
one crosswalk (one query language).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scipy.stats import spearmanr

from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import Crosswalk
from melo_core.esco.taxonomy import Taxonomy, crosswalk_languages
from melo_core.linking.linker import Linker
from melo_core.linking.pipeline import Pipeline, PipelineDefinition, crosswalk_mentions_of
from melo_core.spec import parse_component

GRADES = {"exactMatch": 3, "closeMatch": 2, "narrowMatch": 1, "broadMatch": 1}
UNRELATED = 0
BATCH = 32  # pairs per pair_scores call
_DRAWS = 200  # tries to draw an unrelated target before listing the ones left


@dataclass(frozen=True)
class GradedPair:
    code: str  # the term's code in the crosswalk
    title: str
    concept_uri: str
    grade: int


@dataclass
class GradedResult:
    crosswalk: str
    pairs: list[GradedPair]
    scores: dict[str, list[float]]  # per scorer label (the pipeline, then "pipeline/component"): per pair
    seconds: float
    spearman: dict[str, float] = field(default_factory=dict)


def related_pairs(crosswalk: Crosswalk, taxonomy: Taxonomy) -> list[GradedPair]:
    """The crosswalk's matches to concepts of the taxonomy, graded by relation, in file order."""
    return [GradedPair(term.code, term.title, uri, GRADES[relation])
            for term in crosswalk.terms if term.title
            for uri, relation in term.matches.items() if uri in taxonomy]  # fmt: skip


def graded_pairs(crosswalk: Crosswalk, taxonomy: Taxonomy, seed: int = 0, terms: int = 0) -> list[GradedPair]:
    """Per term, its related pairs and as many unrelated ones (grade 0; see the module docstring).
    ``terms``: only that many terms, drawn with ``seed`` (0: all), kept in file order."""
    related = related_pairs(crosswalk, taxonomy)
    targets = sorted({p.concept_uri for p in related})  # of every term: a sample of terms keeps the same pool
    by_term: dict[str, list[GradedPair]] = {}
    for pair in related:
        by_term.setdefault(pair.code, []).append(pair)
    codes = list(by_term)
    rng = random.Random(seed)
    if terms and terms < len(codes):
        chosen = set(rng.sample(codes, terms))
        codes = [c for c in codes if c in chosen]
    out: list[GradedPair] = []
    for code in codes:
        mine = by_term[code]
        taken = {p.concept_uri for p in mine}
        out += mine
        for pair in mine:
            uri = _draw(rng, targets, taken) or _draw(rng, sorted(c.uri for c in taxonomy.concepts), taken)
            if uri is None:
                continue  # a taxonomy of only this term's concepts: no unrelated one to draw
            taken.add(uri)
            out.append(GradedPair(code, pair.title, uri, UNRELATED))
    return out


def _draw(rng: random.Random, pool: Sequence[str], taken: set[str]) -> str | None:
    for _ in range(_DRAWS):
        uri = rng.choice(pool) if pool else None
        if uri is None or uri not in taken:
            return uri
    left = [u for u in pool if u not in taken]
    return rng.choice(left) if left else None


def spearman(scores: Sequence[float], grades: Sequence[int]) -> float:
    """Spearman's rank correlation of scores and grades (ties take their mean rank); nan when
    either is constant."""
    if len(set(scores)) < 2 or len(set(grades)) < 2:
        return math.nan
    return float(spearmanr(scores, grades).statistic)


def score_pairs(linker: Linker, pairs: Sequence[GradedPair], label: str,
                on_progress: Callable[[int], None] = lambda n: None) -> dict[str, list[float]]:  # fmt: skip
    """Per scorer label (``label``: the fused score, ``label/component``: each component's when the
    linker fuses several, or the one scorer's lifted score): every pair's score."""
    out: dict[str, list[float]] = {label: []}
    for begin in range(0, len(pairs), BATCH):
        batch = pairs[begin : begin + BATCH]
        for fused, components in linker.pair_scores([p.title for p in batch], [p.concept_uri for p in batch]):
            out[label].append(fused)
            for spec, value in components.items():
                if spec != label:  # a linker of one scorer spec: its score is the fused one
                    out.setdefault(f"{label}/{parse_component(spec).head}", []).append(value)
        on_progress(len(batch))
    return out


def graded_similarity(crosswalk: Crosswalk, taxonomy: Taxonomy, scorer: str | PipelineDefinition, *,
                      data_dir: str | Path | None = None, seed: int = 0, terms: int = 0,
                      cache_dir: str | Path | None = None, languages: Sequence[str] | None = None,
                      on_status: Callable[[str], None] = lambda message: None,
                      on_progress: Callable[[int], None] = lambda n: None,
                      show_progress: bool = False) -> GradedResult:  # fmt: skip
    """Score the crosswalk's graded pairs with ``scorer`` (a pipeline: its variant for the
    crosswalk's language, with the other countries' crosswalk titles as mentions when ``data_dir``
    is given; or a scorer spec) over the ESCO labels `simulate` searches, and correlate."""
    pairs = graded_pairs(crosswalk, taxonomy, seed, terms)
    if not pairs:
        raise MeloInputError(f"crosswalk {crosswalk.name!r} has no term linked to a concept of the taxonomy")
    searched = crosswalk_languages(crosswalk.language, taxonomy, languages)
    start = time.perf_counter()
    try:
        if isinstance(scorer, PipelineDefinition):
            pipeline = Pipeline(scorer, taxonomy, searched, index_kind="exact", cache_dir=cache_dir,
                                on_status=on_status, show_progress=show_progress)  # fmt: skip
            if data_dir is not None:  # never the held-out country's own titles: they are the pairs
                pipeline.set_mentions(
                    crosswalk_mentions_of(data_dir, scorer.mention_relations, crosswalk.country, cache_dir)
                )
            linker, label = pipeline.linker(crosswalk.language), scorer.name
        else:
            linker = Linker(taxonomy, scorer, searched, index_kind="exact", cache_dir=cache_dir, on_status=on_status,
                            query_language=crosswalk.language, show_progress=show_progress)  # fmt: skip
            label = scorer
    except ValueError as exc:
        raise MeloInputError(str(exc)) from None
    scores = score_pairs(linker, pairs, label, on_progress)
    grades = [p.grade for p in pairs]
    result = GradedResult(crosswalk.name, pairs, scores, time.perf_counter() - start)
    result.spearman = {name: spearman(values, grades) for name, values in scores.items()}
    return result
