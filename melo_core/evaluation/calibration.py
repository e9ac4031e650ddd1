"""Calibrated confidence: the probability that a curator accepts a candidate as the term's match.

A pipeline's fused score means nothing on its own (0.8 in Hungarian is not 0.8 in English). A
small logistic regression over what the pipeline already says about each candidate (``FEATURES``)
turns it into a probability, learnt from the national crosswalks: a candidate is right when its
concept is among the term's matches, whatever the relation the scheme uses. A calibrator for
country C is fit on the other countries' crosswalks only (leave one country out), so C's own
figures stay a fair test of it.

Training rows (each crosswalk term's top ``TOP_K`` candidates, their features and labels) come from
linking a sample of every crosswalk's terms with the pipeline, its known mentions taken without the
term's country; they are kept on disk, so a fit from them takes seconds and gives the same JSON
from the same rows. Expected calibration error: ``ECE_BINS`` equal-width bins over [0, 1], each
weighted by its share of the candidates.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from melo_core import config
from melo_core.esco.taxonomy import ISCO_GROUP, crosswalk_languages
from melo_core.linking.linker import Candidate
from melo_core.linking.scheme_learning import TargetKinds, target_kind
from melo_core.runtime.preparing import LastStep

if TYPE_CHECKING:
    from melo_core.esco.crosswalk import Crosswalk

# What a candidate's probability is computed from; all are things the ranking already has.
FEATURES: tuple[str, ...] = (
    "score",  # the fused score
    "margin_next",  # score minus the next candidate's (0 for the last one shown)
    "gap_first",  # the first candidate's score minus this one's
    "inverse_rank",  # 1 / rank
    "first_score",  # the first candidate's score: how sure the whole list is
    "via_mention",  # 1 when the best match is a known mention (a linked term), not an ESCO label
    "prior",  # what the mention prior added to the score
    "description",  # what the description similarity added
    "language_match",  # 1 when the matched label is in the query's language
    "isco_group",  # 1 for an ISCO group, 0 for an occupation
    "component_mean",  # mean of the component scores (the fused score when there is one component)
    "component_first",  # share of the components that rank it first on their own
    # A list led by an ISCO group tells a broad term: that first candidate is seldom the match (best:
    # 9 % of 628 such lists, against 53 % when an occupation leads) and the occupations below it often
    # are (nor_no: 2.9 matches in the top 10). Leave one country out, these two took best's mean ECE
    # from 0.058 to 0.048 (docs/experiments/calibration.md).
    "under_group",  # 1 for an occupation when the list's first candidate is an ISCO group
    "group_led",  # 1 for an ISCO group when the list's first candidate is an ISCO group
    # How many matches a term gets depends on the scheme: one of few terms maps each to many ESCO
    # concepts (nor_no: 420 terms, 7.2 matches each; fra_fr: 11,118 terms, 1.0). No feature of a
    # candidate tells it; leave one country out, this one took best's mean ECE from 0.047 to 0.022.
    "scheme_terms",  # log of the number of terms in the scheme; unknown (no scheme): a typical one
)
# Rows kept on disk with the first twelve features: the others derive from them and the scheme.
KEPT_BEFORE: tuple[str, ...] = FEATURES[:12]
TOP_K = 10  # candidates per term: what the Link page shows
ECE_BINS = 15
TERMS_PER_CROSSWALK = 150  # training sample per crosswalk: enough for a 14-feature fit, quick to link
MIN_PROPOSALS = 20  # a threshold is only trusted where at least this many held-out first candidates clear it
FORMAT_VERSION = 2  # 2: a model for the first candidate, one for the rest


def _scheme_feature(scheme_terms: int | None) -> float:
    return math.log(max(1, scheme_terms)) if scheme_terms else math.nan


def candidate_features(candidates: Sequence[Candidate], query_language: str | None,
                       scheme_terms: int | None = None) -> np.ndarray:  # fmt: skip
    """One row of ``FEATURES`` per candidate of one term's ranked list (best first); ``scheme_terms``:
    how many terms the scheme being mapped holds (None: not known)."""
    out = np.zeros((len(candidates), len(FEATURES)), dtype=np.float64)
    if not candidates:
        return out
    first = candidates[0].score
    led_by_group = candidates[0].kind == ISCO_GROUP
    for i, c in enumerate(candidates):
        following = candidates[i + 1].score if i + 1 < len(candidates) else c.score
        components = list(c.component_scores.values())
        ranks = list(c.component_ranks.values())
        out[i] = (
            c.score,
            c.score - following,
            first - c.score,
            1.0 / max(1, c.rank),
            first,
            float(c.via_mention),
            c.prior,
            c.description,
            float(bool(query_language) and c.matched_language == query_language),
            float(c.kind == ISCO_GROUP),
            sum(components) / len(components) if components else c.score,
            sum(r == 1 for r in ranks) / len(ranks) if ranks else float(c.rank == 1),
            float(led_by_group and c.kind != ISCO_GROUP),
            float(led_by_group and c.kind == ISCO_GROUP),
            _scheme_feature(scheme_terms),
        )
    return out


def _derived(kept: np.ndarray, ranks: np.ndarray, scheme_terms: int | None) -> np.ndarray:
    """``FEATURES`` from rows of ``KEPT_BEFORE`` (one term's list after another, each from rank 1):
    what ``candidate_features`` adds to them, so that kept rows need no linking again."""
    group = kept[:, KEPT_BEFORE.index("isco_group")]
    term = np.maximum(np.cumsum(ranks == 1) - 1, 0)
    led = group[np.flatnonzero(ranks == 1)][term]
    return np.column_stack(
        [kept, led * (1 - group), led * group, np.full(len(kept), round(_scheme_feature(scheme_terms), 9))]
    )


@dataclass
class CandidateRows:
    """Training rows: one per candidate of each linked crosswalk term."""

    features: np.ndarray  # (n, len(FEATURES))
    labels: np.ndarray  # (n,) 1 when the candidate's concept is among the term's matches
    ranks: np.ndarray  # (n,) 1-based rank of the candidate in its term's list
    countries: list[str]  # (n,) the crosswalk's country
    datasets: list[str]  # (n,) the crosswalk code

    def __len__(self) -> int:
        return len(self.labels)

    def where(self, keep: np.ndarray) -> CandidateRows:
        index = np.flatnonzero(keep)
        return CandidateRows(self.features[index], self.labels[index], self.ranks[index],
                             [self.countries[i] for i in index], [self.datasets[i] for i in index])  # fmt: skip

    def of_countries(self, countries: Iterable[str], keep: bool = True) -> CandidateRows:
        chosen = set(countries)
        return self.where(np.array([(c in chosen) == keep for c in self.countries], dtype=bool))

    @staticmethod
    def concat(parts: Sequence[CandidateRows]) -> CandidateRows:
        if not parts:
            return CandidateRows(np.zeros((0, len(FEATURES))), np.zeros(0), np.zeros(0, dtype=np.int64), [], [])
        return CandidateRows(np.vstack([p.features for p in parts]), np.concatenate([p.labels for p in parts]),
                             np.concatenate([p.ranks for p in parts]), [c for p in parts for c in p.countries],
                             [d for p in parts for d in p.datasets])  # fmt: skip

    def to_json(self) -> str:
        return json.dumps({"features": list(FEATURES), "rows": self.features.round(9).tolist(),
                           "labels": self.labels.astype(int).tolist(), "ranks": self.ranks.astype(int).tolist(),
                           "countries": self.countries, "datasets": self.datasets})  # fmt: skip

    @classmethod
    def from_json(cls, text: str, scheme_terms: int | None = None) -> CandidateRows | None:
        """Rows as ``to_json`` wrote them, or kept with fewer features (at least ``KEPT_BEFORE``, in
        order): the others derived, the scheme's size from ``scheme_terms``. None: another set."""
        raw = json.loads(text)
        ranks = np.array(raw["ranks"], dtype=np.int64)
        names = list(raw.get("features") or [])
        if names == list(FEATURES):
            features = np.array(raw["rows"], dtype=np.float64).reshape(-1, len(FEATURES))
        elif len(names) >= len(KEPT_BEFORE) and names == list(FEATURES[: len(names)]):
            kept = np.array(raw["rows"], dtype=np.float64).reshape(-1, len(names))[:, : len(KEPT_BEFORE)]
            features = _derived(kept, ranks, scheme_terms)
        else:
            return None  # rows of another feature set: collect them again
        return cls(features, np.array(raw["labels"], dtype=np.float64), ranks, list(raw["countries"]),
                   list(raw["datasets"]))  # fmt: skip


def rows_from_lists(lists: Sequence[Sequence[Candidate]], golds: Sequence[Iterable[str]], query_language: str | None,
                    dataset: str, country: str, scheme_terms: int | None) -> CandidateRows:  # fmt: skip
    """Training rows from linked terms: ``lists[i]`` the ranked candidates of term i, ``golds[i]``
    the concept URIs the crosswalk matches it to (any relation); ``scheme_terms``: how many terms
    the crosswalk's scheme holds."""
    parts, labels, ranks = [], [], []
    for candidates, gold in zip(lists, golds, strict=True):
        wanted = set(gold)
        parts.append(candidate_features(candidates, query_language, scheme_terms))
        labels += [float(c.concept_uri in wanted) for c in candidates]
        ranks += [c.rank for c in candidates]
    n = len(labels)
    features = np.vstack(parts) if parts else np.zeros((0, len(FEATURES)))
    return CandidateRows(features, np.array(labels), np.array(ranks, dtype=np.int64), [country] * n, [dataset] * n)


def percent(probability: float) -> str:
    """A probability as a curator reads it: "87 %"; never a certain "0 %" or "100 %"."""
    if probability < 0.005:
        return "<1 %"
    if probability > 0.995:
        return ">99 %"
    return f"{round(100 * probability)} %"


# -- the model ------------------------------------------------------------------------------------


def _round(values: Iterable[float]) -> list[float]:
    """10 significant digits: what the solver's last bits (thread order of a BLAS) cannot change."""
    return [float(f"{v:.10g}") for v in values]


@dataclass
class Model:
    """A logistic regression over standardised ``FEATURES``; an unknown value (NaN: no scheme)
    counts as the training mean."""

    mean: list[float]
    scale: list[float]
    coefficients: list[float]
    intercept: float

    def logits(self, features: np.ndarray) -> np.ndarray:
        mean = np.array(self.mean)
        x = np.where(np.isnan(features), mean, features)
        return ((x - mean) / np.array(self.scale)) @ np.array(self.coefficients) + self.intercept

    def to_dict(self) -> dict[str, object]:
        return {"mean": _round(self.mean), "scale": _round(self.scale), "coefficients": _round(self.coefficients),
                "intercept": _round([self.intercept])[0]}  # fmt: skip

    @classmethod
    def from_dict(cls, raw: dict) -> Model:
        return cls(raw["mean"], raw["scale"], raw["coefficients"], raw["intercept"])


@dataclass
class Calibrator:
    """Two fitted logistic regressions over ``FEATURES``, one for a list's first candidate (is it *the*
    match?) and one for those below it (is it a match too?), and the precision curve of the first
    candidates of countries it did not see (for batch proposals at a stated precision). Two models
    rather than one: 7.0 % of terms proposed at 0.95 instead of 4.6 %, at the same realised
    precision (docs/experiments/calibration.md)."""

    pipeline: str
    hold_out_country: str | None
    first: Model
    rest: Model
    # Out-of-fold first candidates of the training countries: thresholds (descending) and the
    # precision and count of those at or above each.
    curve_thresholds: list[float] = field(default_factory=list)
    curve_precision: list[float] = field(default_factory=list)
    curve_counts: list[int] = field(default_factory=list)
    countries: list[str] = field(default_factory=list)  # those fit on
    rows: int = 0
    # How far the training crosswalks' own offsets lie from 0 (root mean square of each one's
    # ``scheme_offset`` over its out-of-fold rows): the prior a scheme's decisions must outweigh.
    offset_spread: float | None = None

    def probabilities_of(self, features: np.ndarray) -> np.ndarray:
        if len(features) == 0:
            return np.zeros(0)
        logit = np.zeros(len(features))
        first = features[:, FEATURES.index("inverse_rank")] == 1.0
        if first.any():
            logit[first] = self.first.logits(features[first])
        if (~first).any():
            logit[~first] = self.rest.logits(features[~first])
        return 1.0 / (1.0 + np.exp(-np.clip(logit, -50, 50)))

    def probabilities(self, candidates: Sequence[Candidate], query_language: str | None,
                      scheme_terms: int | None = None) -> list[float]:  # fmt: skip
        """The probability of each candidate of one term's ranked list (best first), for a scheme
        of ``scheme_terms`` terms (None: not known, a typical scheme)."""
        features = candidate_features(candidates, query_language, scheme_terms)
        return [float(p) for p in self.probabilities_of(features)]

    def ranked(self, candidates: Sequence[Candidate], query_language: str | None, scheme_terms: int | None = None,
               kinds: TargetKinds | None = None) -> tuple[list[Candidate], list[float]]:  # fmt: skip
        """One term's candidates as a curator sees them, with their probabilities: where an ISCO group
        leads the list, the first ``TOP_K`` most probable first (ranks renumbered), the rest as
        linked; unless ``kinds`` (what the scheme's decisions taught) shows groups of that level in
        use: the calibrator, learnt on schemes that mostly map to occupations, would push down what
        this scheme maps to. A group leads when the term is broad; the occupations under it are then
        often the match (docs/experiments/probability-order.md). Other lists keep score order:
        reordered everywhere, job-ad titles lost 0.5 points of acc@1."""
        probabilities = self.probabilities(candidates[:TOP_K], query_language, scheme_terms)
        if kinds is not None and candidates and kinds.uses(target_kind(candidates[0])):
            return list(candidates), probabilities
        return order_by_probability(list(candidates), probabilities)

    def shifted(self, offset: float) -> Calibrator:
        """This calibrator with ``offset`` added to every logit (``scheme_offset``: a scheme's own decisions)."""
        return replace(self, first=replace(self.first, intercept=self.first.intercept + offset),
                       rest=replace(self.rest, intercept=self.rest.intercept + offset))  # fmt: skip

    def threshold_for(self, precision: float) -> float | None:
        """The lowest probability at which the first candidates of countries this calibrator did
        not train on reached ``precision`` (at least ``MIN_PROPOSALS`` of them); None if none did."""
        return threshold_on_curve(self.curve_thresholds, self.curve_precision, self.curve_counts, precision)

    def to_json(self) -> str:
        return json.dumps({"version": FORMAT_VERSION, "features": list(FEATURES), "pipeline": self.pipeline,
                           "hold_out_country": self.hold_out_country, "first": self.first.to_dict(),
                           "rest": self.rest.to_dict(), "curve_thresholds": _round(self.curve_thresholds),
                           "curve_precision": _round(self.curve_precision), "curve_counts": self.curve_counts,
                           "countries": self.countries, "rows": self.rows,
                           "offset_spread": None if self.offset_spread is None else _round([self.offset_spread])[0]},
                          indent=1, sort_keys=True)  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> Calibrator:
        raw = json.loads(text)
        if raw.get("version") != FORMAT_VERSION or raw.get("features") != list(FEATURES):
            raise ValueError("a calibrator of another version or feature set: fit it again (`prepare`)")
        return cls(raw["pipeline"], raw["hold_out_country"], Model.from_dict(raw["first"]),
                   Model.from_dict(raw["rest"]), raw["curve_thresholds"], raw["curve_precision"],
                   raw["curve_counts"], raw["countries"], raw["rows"], raw.get("offset_spread"))  # fmt: skip


def shown_positions(probabilities: Sequence[float], led_by_group: bool) -> list[int]:
    """Where one list's candidates (best first by score) stand as shown: most probable first when an
    ISCO group leads the list (ties by score), as linked otherwise."""
    if not led_by_group:
        return list(range(len(probabilities)))
    return sorted(range(len(probabilities)), key=lambda i: -probabilities[i])  # stable: score order on ties


def order_by_probability(candidates: list[Candidate],
                         probabilities: list[float]) -> tuple[list[Candidate], list[float]]:  # fmt: skip
    """``candidates`` (best first) with their first ``len(probabilities)`` as shown (``shown_positions``),
    ranks renumbered when they move (``Calibrator.ranked``)."""
    if not candidates or candidates[0].kind != ISCO_GROUP:
        return candidates, probabilities
    order = shown_positions(probabilities, led_by_group=True)
    moved = [candidates[i] for i in order] + candidates[len(probabilities) :]
    return [replace(c, rank=rank) for rank, c in enumerate(moved, 1)], [probabilities[i] for i in order]


def _fit_model(rows: CandidateRows) -> Model:
    from sklearn.linear_model import LogisticRegression

    x = rows.features
    known = ~np.isnan(x)
    mean = np.array([x[known[:, j], j].mean() if known[:, j].any() else 0.0 for j in range(x.shape[1])])
    x = np.where(known, x, mean)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0  # a constant feature (one component, no descriptions) carries nothing
    model = LogisticRegression(C=1.0, max_iter=2000)  # lbfgs: deterministic
    model.fit((x - mean) / scale, rows.labels.astype(int))
    return Model(list(mean), list(scale), list(model.coef_[0]), float(model.intercept_[0]))


def _bare(rows: CandidateRows, pipeline: str, hold_out_country: str | None) -> Calibrator:
    first = rows.ranks == 1
    for part, what in ((rows.labels[first], "first candidates"), (rows.labels[~first], "candidates below the first")):
        if len(set(part.tolist())) < 2:
            raise ValueError(f"calibration needs {what} both right and wrong")
    return Calibrator(pipeline, hold_out_country, _fit_model(rows.where(first)),
                      _fit_model(rows.where(~first)), countries=sorted(set(rows.countries)),
                      rows=len(rows))  # fmt: skip


MIN_SCHEME_TERMS = 25  # decided terms before a scheme's own offset is fitted


def logits(probabilities: Sequence[float] | np.ndarray) -> np.ndarray:
    """The log odds of ``probabilities``, clipped 1e-9 from 0 and 1."""
    p = np.clip(np.asarray(probabilities, dtype=np.float64), 1e-9, 1 - 1e-9)
    return np.log(p / (1 - p))


def shift_probabilities(probabilities: Sequence[float] | np.ndarray, offset: float) -> np.ndarray:
    """``probabilities`` with ``offset`` added to their logit: a scheme's shift (``scheme_offset``),
    as ``Calibrator.shifted`` adds it to the model's intercepts."""
    return 1.0 / (1.0 + np.exp(-(logits(probabilities) + offset)))


def scheme_offset(probabilities: Sequence[float] | np.ndarray, labels: Sequence[float] | np.ndarray,
                  spread: float | None = None, applied: Sequence[float] | np.ndarray | None = None) -> float:  # fmt: skip
    """The shift of the logit that fits a scheme's own decisions best (log loss): the candidates a
    calibrator scored for the scheme's decided terms (``probabilities``) and whether each became
    the term's match (``labels``). ``spread``: how far schemes' offsets lie from 0 after the
    calibrator's features (``Calibrator.offset_spread``), a normal prior on the offset, so that a
    few decisions move it little: without it, 25 decided terms made best's ECE worse (150 terms per
    crosswalk: 0.031 to 0.035; with it 0.030, docs/experiments/calibration.md). ``applied``: the offset
    each probability already holds (the Link page stores what it showed), taken out first so that the
    fit is of the calibrator itself. Newton's method on one variable; 0 without both outcomes."""
    y = np.asarray(labels, dtype=np.float64)
    if len(y) == 0 or y.min() == y.max():
        return 0.0
    weight = 1.0 / spread**2 if spread else 0.0  # the prior's precision
    logit, offset = logits(probabilities), 0.0
    if applied is not None:
        logit = logit - np.asarray(applied, dtype=np.float64)
    for _ in range(50):
        q = 1.0 / (1.0 + np.exp(-(logit + offset)))
        step = float((np.sum(q - y) + weight * offset) / max(np.sum(q * (1 - q)) + weight, 1e-12))
        offset = float(np.clip(offset - step, -10.0, 10.0))
        if abs(step) < 1e-10:
            break
    return offset


def offset_spread(probabilities: np.ndarray, labels: np.ndarray, datasets: Sequence[str]) -> float | None:
    """The root mean square of each crosswalk's ``scheme_offset`` over all its rows, from out-of-fold
    ``probabilities``: how much a scheme still differs once the features have spoken. None with
    fewer than two crosswalks."""
    names = sorted(set(datasets))
    if len(names) < 2:
        return None
    of = np.array(datasets)
    offsets = [scheme_offset(probabilities[of == name], labels[of == name]) for name in names]
    return float(np.sqrt(np.mean(np.square(offsets))))


def precision_curve(probabilities: np.ndarray, correct: np.ndarray) -> tuple[list[float], list[float], list[int]]:
    """For first candidates: each distinct probability (descending), the precision and the count
    of those at or above it."""
    order = np.argsort(-probabilities, kind="stable")
    p, right = probabilities[order], correct[order]
    hits = np.cumsum(right)
    counts = np.arange(1, len(p) + 1)
    last = np.r_[p[1:] != p[:-1], True]  # the last of each run of equal probabilities
    return _round(p[last]), _round(hits[last] / counts[last]), [int(c) for c in counts[last]]


def threshold_on_curve(thresholds: Sequence[float], reached: Sequence[float], counts: Sequence[int],
                       precision: float) -> float | None:  # fmt: skip
    """On a ``precision_curve``: the lowest probability at which at least ``MIN_PROPOSALS`` first
    candidates reached ``precision``; None if none did."""
    found = None
    for threshold, at, count in zip(thresholds, reached, counts, strict=True):
        if count >= MIN_PROPOSALS and at >= precision:
            found = threshold
    return found


Fits = dict[frozenset[str], Calibrator]  # fits by the countries left out, shared between calls


def _fit_without(rows: CandidateRows, countries: frozenset[str], pipeline: str, fits: Fits) -> Calibrator:
    """The bare fit on ``rows`` minus ``countries``: the fit without {C, D} serves both the
    calibrator without C and the one without D (fit_all: 211 fits instead of 420 for 20 countries)."""
    if countries not in fits:
        fits[countries] = _bare(rows.of_countries(countries, keep=False), pipeline, None)
    return fits[countries]


def out_of_fold(rows: CandidateRows, pipeline: str = "", fits: Fits | None = None,
                left_out: frozenset[str] = frozenset(), measured: CandidateRows | None = None) -> np.ndarray:  # fmt: skip
    """Every row's probability from a calibrator fit without its country (leave one country out);
    ``rows`` are the full rows minus ``left_out`` (each fit leaves those out too). ``measured``:
    other rows to predict so (more terms of the same crosswalks), instead of ``rows``."""
    fits = {} if fits is None else fits
    target = rows if measured is None else measured
    out = np.zeros(len(target))
    for country in sorted(set(target.countries)):
        mine = np.array([c == country for c in target.countries])
        out[mine] = _fit_without(rows, left_out | {country}, pipeline, fits).probabilities_of(target.features[mine])
    return out


def fit_calibrator(rows: CandidateRows, pipeline: str, hold_out_country: str | None = None,
                   fits: Fits | None = None) -> Calibrator:  # fmt: skip
    """Fit on ``rows`` minus every row of ``hold_out_country``; the precision curve comes from the
    remaining countries' first candidates, each predicted by a fit without its own country (and
    without ``hold_out_country``). ``fits``: the fits of earlier calls on the same rows, reused."""
    fits = {} if fits is None else fits
    left_out = frozenset([hold_out_country]) if hold_out_country else frozenset()
    training = rows.of_countries(left_out, keep=False)
    calibrator = replace(_fit_without(training, left_out, pipeline, fits), hold_out_country=hold_out_country)
    first = training.ranks == 1
    if len(set(training.countries)) > 1 and first.any():
        predicted = out_of_fold(training, pipeline, fits, left_out)
        curve = precision_curve(predicted[first], training.labels[first])
        calibrator.curve_thresholds, calibrator.curve_precision, calibrator.curve_counts = curve
        calibrator.offset_spread = offset_spread(predicted, training.labels, training.datasets)
    return calibrator


# -- measures -------------------------------------------------------------------------------------


@dataclass
class Reliability:
    """Reliability-diagram data: per equal-width bin, the candidates in it, their mean probability
    and the share of them that are right."""

    edges: list[float]
    counts: list[int]
    mean_probability: list[float]
    accuracy: list[float]

    @property
    def ece(self) -> float:
        total = sum(self.counts)
        if not total:
            return math.nan
        return sum(n * abs(p - a) for n, p, a in zip(self.counts, self.mean_probability, self.accuracy,
                                                     strict=True) if n) / total  # fmt: skip


def reliability(probabilities: Sequence[float] | np.ndarray, labels: Sequence[float] | np.ndarray,
                bins: int = ECE_BINS) -> Reliability:  # fmt: skip
    """``bins`` equal-width bins over [0, 1]; a probability of exactly 1 goes to the last bin."""
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    index = np.minimum((p * bins).astype(np.int64), bins - 1)
    counts, means, accuracy = [], [], []
    for b in range(bins):
        mine = index == b
        n = int(mine.sum())
        counts.append(n)
        means.append(float(p[mine].mean()) if n else math.nan)
        accuracy.append(float(y[mine].mean()) if n else math.nan)
    return Reliability([b / bins for b in range(bins + 1)], counts, means, accuracy)


def expected_calibration_error(probabilities: Sequence[float] | np.ndarray, labels: Sequence[float] | np.ndarray,
                               bins: int = ECE_BINS) -> float:  # fmt: skip
    return reliability(probabilities, labels, bins).ece


# -- training rows from the crosswalks, and the fitted files ---------------------------------------


def sample_terms(terms: Sequence, limit: int, seed: int = 0) -> list:
    """A fixed sample of at most ``limit`` terms (all of them with 0)."""
    if not limit or len(terms) <= limit:
        return list(terms)
    order = list(range(len(terms)))
    random.Random(seed).shuffle(order)
    return [terms[i] for i in sorted(order[:limit])]


@dataclass(frozen=True)
class PlannedRows:
    """One crosswalk's calibration rows: where they are kept, and what linking them searches."""

    code: str
    crosswalk: Crosswalk
    searched: tuple[str, ...]
    path: Path
    terms_per_crosswalk: int

    def sample(self) -> list:
        """The terms these rows link: a fixed sample of those with a title and a match."""
        return sample_terms([t for t in self.crosswalk.terms if t.title and t.matches], self.terms_per_crosswalk)

    def kept(self) -> CandidateRows | None:
        """The rows an earlier run kept, when they are of a feature set this version reads."""
        if not self.path.is_file():
            return None
        return CandidateRows.from_json(self.path.read_text(encoding="utf-8"), self.crosswalk.scheme_terms)

    def to_link(self) -> int:
        """The terms linking these rows takes (0: they are kept; rows of an older set are linked again)."""
        return 0 if self.kept() is not None else len(self.sample())


def plan_rows(definition: object, taxonomy: object, data_dir: str | Path, codes: Sequence[str] | None = None,
              terms_per_crosswalk: int = TERMS_PER_CROSSWALK, cache_dir: str | Path | None = None,
              languages: Sequence[str] | None = None) -> list[PlannedRows]:  # fmt: skip
    """Each crosswalk's rows as ``collect_rows`` keeps them in ``cache_dir``/calibration, keyed by
    the pipeline, the files, the languages and the sample."""
    from melo_core.esco.crosswalk import crosswalk_path, list_crosswalks, load_crosswalk
    from melo_core.esco.taxonomy import Taxonomy
    from melo_core.linking.pipeline import PipelineDefinition
    from melo_core.runtime.disk_cache import files_stamp

    assert isinstance(definition, PipelineDefinition) and isinstance(taxonomy, Taxonomy)
    codes = list(codes) if codes is not None else list_crosswalks(data_dir)
    folder = Path(cache_dir or config.cache_dir()) / "calibration"
    all_paths = [crosswalk_path(data_dir, c) for c in list_crosswalks(data_dir)]
    stamp = files_stamp(all_paths)  # the mentions come from every crosswalk
    spec_stamp = _definition_stamp(definition)
    planned = []
    for code in codes:
        crosswalk = load_crosswalk(crosswalk_path(data_dir, code))
        searched = crosswalk_languages(crosswalk.language, taxonomy)
        if languages:
            searched = tuple(lang for lang in searched if lang in languages) or tuple(languages)
        key = f"{spec_stamp}-{stamp}-{'+'.join(searched) if languages else 'own'}-{terms_per_crosswalk}"
        path = folder / f"rows-{definition.name}-{code}-{key}.json"
        planned.append(PlannedRows(code, crosswalk, searched, path, terms_per_crosswalk))
    return planned


def collect_rows(definition: object, taxonomy: object, data_dir: str | Path, codes: Sequence[str] | None = None,
                 terms_per_crosswalk: int = TERMS_PER_CROSSWALK, cache_dir: str | Path | None = None,
                 index_kind: str = "exact", on_progress: Callable[[str], None] = lambda message: None,
                 languages: Sequence[str] | None = None, on_linked: Callable[[int], None] = lambda terms: None,
                 plan: Sequence[PlannedRows] | None = None) -> CandidateRows:  # fmt: skip
    """Link a sample of each crosswalk's terms (``codes``; None: all of the data folder) with the
    pipeline over the crosswalk's language and English (as `link` ranks them; with ``languages``,
    only those of them that are among these, else these: what `prepare` built), its known mentions
    taken from the other countries' crosswalks, and turn the top ``TOP_K`` candidates into rows.
    Each crosswalk's rows are kept (``plan_rows``, or ``plan`` where the caller made it already);
    ``on_linked(terms)`` follows each crosswalk linked."""
    from melo_core.esco.taxonomy import Taxonomy
    from melo_core.linking.pipeline import Pipeline, PipelineDefinition, crosswalk_mentions_of

    assert isinstance(definition, PipelineDefinition) and isinstance(taxonomy, Taxonomy)
    if plan is None:
        plan = plan_rows(definition, taxonomy, data_dir, codes, terms_per_crosswalk, cache_dir, languages)
    kept_rows = {planned.code: planned.kept() for planned in plan}
    missing = [code for code, rows in kept_rows.items() if rows is None]
    parts = []
    for planned in plan:
        crosswalk, path = planned.crosswalk, planned.path
        scheme_terms = crosswalk.scheme_terms
        kept = kept_rows[planned.code]
        if kept is None:
            on_progress(f"calibration: linking {planned.code} ({missing.index(planned.code) + 1} of {len(missing)})")
            terms = planned.sample()
            # persist=False: no vector snapshot per crosswalk's language pair (for `best`, some 100 MB
            # each), no fitted lexical scorer kept; the rows themselves are kept.
            pipeline = Pipeline(definition, taxonomy, planned.searched, cache_dir=cache_dir, index_kind=index_kind,
                                show_progress=False, persist=False)  # fmt: skip
            pipeline.set_mentions(crosswalk_mentions_of(data_dir, definition.mention_relations, crosswalk.country,
                                                        cache_dir))  # fmt: skip
            lists = pipeline.link([t.title for t in terms], top_k=TOP_K, query_language=crosswalk.language)
            text = rows_from_lists(lists, [t.matches for t in terms], crosswalk.language, planned.code,
                                   crosswalk.country, scheme_terms).to_json()  # fmt: skip
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            kept = CandidateRows.from_json(text, scheme_terms)  # as rounded on disk: a later fit reads the same numbers
            assert kept is not None
            on_linked(len(terms))
        parts.append(kept)
    return CandidateRows.concat(parts)


def _definition_stamp(definition: object) -> str:
    import hashlib

    # What ranks, not what describes it: a new field of the definition keeps the rows.
    parts = [getattr(definition, key, None) for key in ("monolingual", "cross_lingual", "mention_relations",
                                                        "query_rules", "coverage", "descriptions_by_language")]  # fmt: skip
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]


def calibration_path(pipeline: str, hold_out_country: str | None = None, models_dir: str | Path | None = None) -> Path:
    name = f"{pipeline}-without-{hold_out_country}" if hold_out_country else pipeline
    return Path(models_dir or config.models_dir()) / "calibration" / f"{name}.json"


def save_calibrator(calibrator: Calibrator, models_dir: str | Path | None = None) -> Path:
    path = calibration_path(calibrator.pipeline, calibrator.hold_out_country, models_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(calibrator.to_json(), encoding="utf-8")
    temporary.replace(path)
    return path


def load_calibrator(pipeline: str, hold_out_country: str | None = None,
                    models_dir: str | Path | None = None) -> Calibrator | None:  # fmt: skip
    """What `prepare` fitted for ``pipeline`` (with ``hold_out_country``: without that country's
    crosswalks); None when it is not there or of another version."""
    path = calibration_path(pipeline, hold_out_country, models_dir)
    try:
        return Calibrator.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError):
        return None


def fit_all(rows: CandidateRows, pipeline: str, models_dir: str | Path | None = None) -> list[Path]:
    """The calibrator on every country, and one without each country; written as JSON."""
    fits: Fits = {}
    written = [save_calibrator(fit_calibrator(rows, pipeline, fits=fits), models_dir)]
    for country in sorted(set(rows.countries)):
        written.append(save_calibrator(fit_calibrator(rows, pipeline, country, fits), models_dir))
    return written


MIN_COUNTRIES = 2  # leave one country out needs another country to learn from


def calibrated_codes(data_dir: str | Path) -> list[str]:
    """The data folder's crosswalks the calibration links; none when they hold fewer than
    ``MIN_COUNTRIES`` countries."""
    from melo_core.esco.crosswalk import crosswalk_country, list_crosswalks

    codes = list_crosswalks(data_dir)
    return codes if len({crosswalk_country(c) for c in codes}) >= MIN_COUNTRIES else []


def prepare_calibration(definition: object, taxonomy: object, data_dir: str | Path, cache_dir: str | Path | None = None,
                        models_dir: str | Path | None = None, languages: Sequence[str] | None = None,
                        on_message: Callable[[str], None] = lambda message: None,
                        terms_per_crosswalk: int = TERMS_PER_CROSSWALK,
                        on_linked: Callable[[int], None] = lambda terms: None,
                        plan: Sequence[PlannedRows] | None = None) -> list[Path]:  # fmt: skip
    """`prepare`'s last step: the pipeline's calibrators from the data folder's crosswalks (rows
    linked once over the label ``languages`` prepared, None: all, and kept in the cache; the fits
    take seconds), written to ``models_dir``/calibration. Nothing when the folder holds crosswalks
    of fewer than ``MIN_COUNTRIES`` countries. ``on_linked(terms)`` follows each crosswalk linked;
    ``plan``: the rows ``plan_rows`` gave for ``calibrated_codes`` (None: planned here)."""
    codes = calibrated_codes(data_dir)
    if not codes:
        return []
    rows = collect_rows(definition, taxonomy, data_dir, codes, terms_per_crosswalk, cache_dir=cache_dir,
                        on_progress=on_message, languages=languages, on_linked=on_linked, plan=plan)  # fmt: skip
    name = str(getattr(definition, "name", ""))
    on_message(f"calibration: fitting {name} on {len(rows):,} candidates")
    return fit_all(rows, name, models_dir)


# Seconds to link one term of the calibration sample, a pipeline built for each crosswalk, on 2
# idle cores: (over other languages only, over its own language too). A first use prepares English
# and the scheme's language (`prepare --langs en,no`), so every other country's crosswalk is linked
# by the cross-lingual variant over English alone, a third of the cost of the query's own language.
# Then the fits, whatever the terms. `benchmarks/calibration_speed.py`, 2026-12-07: `best` over
# en,no 151 s, over en,no,de 173 s (0.031 and 0.082-0.093 s a term, fits 22 s), where one rate of
# 0.25 s had said 15 min; `lexical` 74 s and `fast` 119 s over all languages (fits 19 and 21 s).
# Another pipeline starts from the default; the pace measured here takes over after one run.
SECONDS_PER_TERM = {"lexical": (0.015, 0.015), "fast": (0.027, 0.027), "best": (0.031, 0.087)}
DEFAULT_SECONDS_PER_TERM = (0.1, 0.1)
FIT_SECONDS = 20.0


def estimated_seconds(pipeline: str, to_link: Sequence[tuple[int, bool]]) -> float:
    """What linking takes, for each crosswalk (terms still to link, whether its own language is
    searched), and then fitting (0: nothing to link)."""
    other, own = SECONDS_PER_TERM.get(pipeline, DEFAULT_SECONDS_PER_TERM)
    linking = sum(terms * (own if own_language else other) for terms, own_language in to_link)
    return linking + FIT_SECONDS if linking else 0.0


def calibration_step(definition: object, taxonomy: object, data_dir: str | Path, cache_dir: str | Path | None = None,
                     models_dir: str | Path | None = None, languages: Sequence[str] | None = None,
                     terms_per_crosswalk: int = TERMS_PER_CROSSWALK) -> LastStep:  # fmt: skip
    """``prepare_calibration`` as `prepare`'s last step: estimated from the terms still to link (rows
    kept from an earlier run cost nothing), its progress the share of those terms linked. The
    crosswalks are read once, here, for the estimate and the run."""
    name = str(getattr(definition, "name", ""))
    codes = calibrated_codes(data_dir)
    plan = plan_rows(definition, taxonomy, data_dir, codes, terms_per_crosswalk, cache_dir, languages) if codes else []
    counts = [(planned.to_link(), planned.crosswalk.language in planned.searched) for planned in plan]
    to_link = sum(terms for terms, _ in counts)

    def run(report: Callable[[float, str], None]) -> int:
        linked = 0

        def on_linked(terms: int) -> None:
            nonlocal linked
            linked += terms

        prepare_calibration(definition, taxonomy, data_dir, cache_dir, models_dir, languages,
                            on_message=lambda message: report(linked / to_link if to_link else 1.0, message),
                            terms_per_crosswalk=terms_per_crosswalk, on_linked=on_linked, plan=plan)  # fmt: skip
        return linked

    return LastStep(f"{name} calibration", estimated_seconds(name, counts), run)
