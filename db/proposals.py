"""Batch proposals at a stated precision (``propose``, the Crosswalk page's "Propose at 95 %").

Every undecided term of a scheme is linked; its first candidate's calibrated probability
(``melo_core.evaluation.calibration``) is compared with the threshold at which the calibrator's first
candidates reached the target precision on other countries' crosswalks (``threshold_for``); those
above it become proposals in the store (``Store.add_proposals``), which a person confirms or
rejects in bulk. A rejected pair is never proposed again; proposing twice adds nothing.

Once the scheme has ``MIN_SCHEME_TERMS`` decided terms, the probabilities are shifted by what those
decisions say of the calibrator (``decisions_offset``, the Link page's shift), but only down: a
scheme's decisions may make proposals more cautious, never bolder. On job-ad titles, where the
calibrator learnt on national crosswalks is overconfident, proposals at 0.95 were right 65 % of the
time unshifted (docs/experiments/batch-proposals.md). A decided term counts with the
probabilities the Link page showed for it; one it never showed under the pipeline (imported with
its decisions, or decided while another pipeline served) is linked again (``relink``), without the
scheme's own decisions as known mentions, so that its own label does not find its answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from db.models import MATCH_OUTCOMES
from db.store import NewProposal, Store
from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import scheme_country
from melo_core.evaluation.calibration import MIN_SCHEME_TERMS, TOP_K, scheme_offset, shift_probabilities
from melo_core.linking.linker import Candidate
from melo_core.linking.scheme_learning import TargetKinds

if TYPE_CHECKING:
    from melo_core.linking.pipeline import PipelineDefinition

BATCH = 128  # terms linked at once
MAX_RELINKED = 200  # decided terms linked again for the shift, the latest: enough to fit one number


class Calibrated(Protocol):
    """What proposing needs of a calibrator (``melo_core.evaluation.calibration.Calibrator``)."""

    def probabilities(
        self, candidates: Sequence[Candidate], query_language: str | None, scheme_terms: int | None = None
    ) -> list[float]: ...

    def ranked(
        self,
        candidates: Sequence[Candidate],
        query_language: str | None,
        scheme_terms: int | None = None,
        kinds: TargetKinds | None = None,
    ) -> tuple[list[Candidate], list[float]]: ...

    def threshold_for(self, precision: float) -> float | None: ...

    @property
    def offset_spread(self) -> float | None: ...


# Links a batch of term labels in one query language: each term's candidates, best first.
LinkBatch = Callable[[Sequence[str], str | None], list[list[Candidate]]]
# A decided term linked again: its first TOP_K candidates' (probability, concept URI), unshifted.
Relinked = Mapping[int, Sequence[tuple[float, str]]]


@dataclass(frozen=True)
class UnshownDecision:
    """A term decided as a match that the Link page never showed with the pipeline's probabilities."""

    term_id: int
    label: str
    language: str | None
    matched: frozenset[str]  # the concepts it was matched to


@dataclass(frozen=True)
class ProposeReport:
    scheme: str
    pipeline: str
    precision: float
    threshold: float
    linked: int  # undecided terms linked (those with an open proposal are not linked again)
    cleared: int  # of them, those whose first candidate's probability cleared the threshold
    proposed: int  # new proposals (a pair rejected or proposed before is not proposed again)
    shift: float = 0.0  # the logit shift from the scheme's own decisions (0 or below)
    decided: int = 0  # the scheme's decided terms that the shift was fitted on
    national: bool = False  # a scheme named like a national crosswalk: the calibrator's own kind
    relinked: int = 0  # of ``decided``, those linked again (the Link page never showed them)

    def summary(self) -> str:
        shift = f"shifted by {self.shift:+.2f} (logit)" if self.shift < 0 else "not shifted: they run no higher there"
        again = f" ({self.relinked} linked again: imported, or decided under another pipeline)" if self.relinked else ""
        checked = (f"; probabilities checked on the scheme's {self.decided} decided terms{again}, {shift}"
                   if self.decided >= MIN_SCHEME_TERMS else "" if self.national else
                   f"; probabilities learnt on national crosswalks, unchecked on this scheme until {MIN_SCHEME_TERMS} "
                   f"decided terms shift them ({self.decided} so far)")  # fmt: skip
        return (
            f"scheme {self.scheme}: {self.proposed} new proposal(s) at precision {self.precision:.2f} "
            f"(pipeline {self.pipeline}, probability >= {self.threshold:.3f}); {self.cleared} of {self.linked} "
            f"undecided term(s) linked cleared it{checked}"
        )


@dataclass(frozen=True)
class SchemeDecisions:
    """A scheme's terms decided as a match, as its shift under one pipeline reads them: the top
    ``TOP_K`` candidates the Link page showed them with (probability, 1 where the decided concept,
    the shift it already held), and the latest ``MAX_RELINKED`` decided terms it never showed."""

    probabilities: tuple[float, ...]
    right: tuple[float, ...]
    applied: tuple[float, ...]
    shown_terms: int
    unshown: tuple[UnshownDecision, ...]


def scheme_decisions(store: Store, scheme: str, pipeline: str, limit: int = MAX_RELINKED) -> SchemeDecisions:
    """``SchemeDecisions`` of ``scheme`` under ``pipeline``: the current matches and the stored
    suggestions read once; the terms only where some decided ones were never shown (imported with
    their decisions, or decided while another pipeline served), the latest ``limit`` in import order."""
    matched: dict[int, set[str]] = {}
    for decision in store.crosswalk(scheme):
        matched.setdefault(decision.term_id, set()).add(decision.concept_uri)
    shown = [s for s in store.top_suggestions(scheme, max_rank=TOP_K)
             if s.scorer == pipeline and s.confidence is not None and s.term_id in matched]  # fmt: skip
    seen = {s.term_id for s in shown}
    missing = set(sorted(set(matched) - seen)[-limit:] if limit else [])  # term ids grow in import order
    unshown: tuple[UnshownDecision, ...] = ()
    if missing:
        info = store.scheme(scheme)
        default = info.language if info else None
        unshown = tuple(UnshownDecision(t.id, t.label, t.language or default, frozenset(matched[t.id]))
                        for t in store.terms(scheme) if t.id in missing)  # fmt: skip
    return SchemeDecisions(tuple(float(s.confidence or 0.0) for s in shown),
                           tuple(float(s.concept_uri in matched[s.term_id]) for s in shown),
                           tuple(s.confidence_offset or 0.0 for s in shown), len(seen), unshown)  # fmt: skip


class _Labelled(Protocol):
    @property
    def label(self) -> str: ...


Item = TypeVar("Item", bound=_Labelled)


def _linked(items: Sequence[Item], languages: Sequence[str | None], link: LinkBatch,
            on_progress: Callable[[int], None] = lambda items: None) -> Iterator[tuple[Item, str | None, list[Candidate]]]:  # fmt: skip
    """Each item with its query language and candidates, linked ``BATCH`` at a time per language;
    ``on_progress`` is told how many are linked after each batch."""
    by_language: dict[str | None, list[Item]] = {}
    for item, language in zip(items, languages, strict=True):
        by_language.setdefault(language, []).append(item)
    linked = 0
    for language, group in by_language.items():
        for start in range(0, len(group), BATCH):
            batch = group[start : start + BATCH]
            for item, candidates in zip(batch, link([i.label for i in batch], language), strict=True):
                yield item, language, candidates
            linked += len(batch)
            on_progress(linked)


def relink(decisions: Sequence[UnshownDecision], link: LinkBatch, calibrator: Calibrated,
           scheme_terms: int | None) -> dict[int, list[tuple[float, str]]]:  # fmt: skip
    """Each decided term linked again (``link`` should leave the scheme's own decisions out of its
    known mentions): its first ``TOP_K`` candidates' unshifted probabilities and concepts."""
    relinked: dict[int, list[tuple[float, str]]] = {}
    for decision, language, candidates in _linked(decisions, [d.language for d in decisions], link):
        top = list(candidates[:TOP_K])
        if top:
            probabilities = calibrator.probabilities(top, language, scheme_terms)
            relinked[decision.term_id] = [(float(p), c.concept_uri) for p, c in zip(probabilities, top, strict=True)]
    return relinked


def decisions_offset(decisions: SchemeDecisions, spread: float | None = None,
                     relinked: Relinked | None = None) -> tuple[float, int]:  # fmt: skip
    """(the logit shift that fits the scheme's own decisions, the decided terms it is fitted on): the
    probabilities the Link page showed for the terms decided as a match, right where the decided
    concept, less the shift each was stored with (``melo_core.evaluation.calibration.scheme_offset``,
    under the prior ``spread``: the calibrator's ``offset_spread``); and those of the ``relinked``
    decided terms it never showed (``relink``). The shift is 0 before ``MIN_SCHEME_TERMS`` such terms."""
    matched = {u.term_id: u.matched for u in decisions.unshown}
    again = {t: rows for t, rows in (relinked or {}).items() if t in matched and rows}
    decided = decisions.shown_terms + len(again)
    if decided < MIN_SCHEME_TERMS:
        return 0.0, decided
    probabilities = [*decisions.probabilities, *(p for rows in again.values() for p, _ in rows)]
    labels = [*decisions.right, *(float(uri in matched[t]) for t, rows in again.items() for _, uri in rows)]
    applied = [*decisions.applied, *[0.0] * (len(probabilities) - len(decisions.probabilities))]
    return scheme_offset(probabilities, labels, spread, applied=applied), decided


def cautious(offset: float) -> float:
    """The shift proposals take from a scheme's offset (``decisions_offset``): only down, so that a
    scheme's decisions may make proposals more cautious, never bolder (docs/experiments/batch-proposals.md)."""
    return min(offset, 0.0)


def scheme_relation(store: Store, scheme: str) -> str:
    """The relation a proposal of ``scheme`` carries: the one its current matches use most (nor_no maps
    to ISCO groups by closeMatch), else exactMatch."""
    counts = Counter(d.outcome for d in store.crosswalk(scheme, outcomes=MATCH_OUTCOMES))
    return counts.most_common(1)[0][0] if counts else "exactMatch"


def propose(
    store: Store,
    scheme: str,
    precision: float,
    link: LinkBatch,
    calibrator: Calibrated,
    *,
    pipeline: str,
    tool_version: str,
    on_progress: Callable[[int], None] = lambda terms: None,
    link_decided: LinkBatch | None = None,
    kinds: TargetKinds | None = None,
) -> ProposeReport:
    """Propose the first candidate of every undecided term of ``scheme`` whose calibrated
    probability clears ``calibrator.threshold_for(precision)``; ``link`` ranks the terms (the
    pipeline with the scheme's known mentions). ``link_decided`` (the pipeline without the scheme's
    own decisions) links again the decided terms the Link page never showed, for the shift; without
    it only those it showed count. ``kinds``: the scheme's kinds (``pipeline_link``), as the Link
    page orders a list an ISCO group leads (``Calibrator.ranked``). Stops with ``MeloInputError`` when no threshold reaches the
    precision on other countries."""
    if not 0.0 < precision < 1.0:
        raise MeloInputError(f"--precision must lie between 0 and 1, got {precision}")
    info = store.scheme(scheme)
    if info is None:
        raise store.unknown_scheme(scheme)
    threshold = calibrator.threshold_for(precision)
    if threshold is None:
        raise MeloInputError(
            f"no probability threshold of pipeline {pipeline} reaches precision {precision:.2f} on other countries' "
            "crosswalks: nothing proposed (try a lower target: --precision, or the Crosswalk page's Target precision)"
        )
    relation = scheme_relation(store, scheme)
    decisions = scheme_decisions(store, scheme, pipeline)
    relinked = relink(decisions.unshown, link_decided, calibrator, info.terms) if link_decided is not None else {}
    offset, decided = decisions_offset(decisions, calibrator.offset_spread, relinked)
    shift = cautious(offset)
    earlier = store.proposals(scheme, status=None)
    waiting = {p.term_id for p in earlier if p.status == "open"}
    turned_down = {(p.term_id, p.concept_uri) for p in earlier if p.status == "rejected"}
    terms = [t for t in store.queue(scheme, status="todo", limit=None) if t.id not in waiting]
    found: list[NewProposal] = []
    for term, language, candidates in _linked(terms, [t.language or info.language for t in terms], link, on_progress):
        if candidates:  # the first candidate the Link page shows (an ISCO group's list reordered)
            shown, probabilities = calibrator.ranked(candidates, language, info.terms, kinds)
            first, probability = shown[0], probabilities[0]
            if shift:
                probability = float(shift_probabilities([probability], shift)[0])
            if probability >= threshold and (term.id, first.concept_uri) not in turned_down:
                found.append(NewProposal(term.id, first.concept_uri, first.label or None, relation,
                                         first.score, min(1.0, max(0.0, probability))))  # fmt: skip
    added = store.add_proposals(scheme, found, tool_version=tool_version, pipeline=pipeline,
                                target_precision=precision, threshold=threshold)  # fmt: skip
    return ProposeReport(scheme, pipeline, precision, threshold, len(terms), len(found), added, shift, decided,
                         scheme_country(scheme) is not None, len(relinked))  # fmt: skip


def scheme_calibrator(pipeline: str, scheme: str) -> Calibrated:
    """What `prepare` fitted for ``pipeline`` without the scheme's country (any other scheme: on
    every country); ``MeloInputError`` when there is none yet."""
    from melo_core.evaluation.calibration import load_calibrator

    country = scheme_country(scheme)
    calibrator = load_calibrator(pipeline, country)
    if calibrator is None:
        raise MeloInputError(
            f"no calibrated confidence for pipeline {pipeline}"
            + (f" without {country}" if country else "")
            + f": fit it with `python -m melo_core prepare --pipeline {pipeline}`"
        )
    return calibrator


def without_scheme_decisions(store: Store, scheme: str, mentions: Sequence[tuple[str, str, str | None]],
                             relations: tuple[str, ...]) -> list[tuple[str, str, str | None]]:  # fmt: skip
    """``mentions`` less the scheme's own current decisions by ``relations``: what a decided term is
    linked again with (``relink``), so that its own label does not find its answer."""
    from db.aliases import accepted_aliases

    own = set(accepted_aliases(store, scheme, relations=relations))
    return [m for m in mentions if m not in own]


class SchemeLinking(NamedTuple):
    """How `propose` links a scheme's terms (``pipeline_link``)."""

    pipeline: str  # the pipeline's name
    link: LinkBatch  # with the scheme's decisions as known mentions and its kinds
    link_decided: LinkBatch  # without its own decisions, for ``relink``
    kinds: TargetKinds  # what the scheme's decisions show of the kind of concept it maps to


def pipeline_link(store: Store, scheme: str, pipeline: str | None, data_dir: str | Path,
                  say: Callable[[str], None] = lambda message: None) -> SchemeLinking:  # fmt: skip
    """(the pipeline's name, a ``LinkBatch`` through it, one without the scheme's own decisions as
    known mentions, for ``relink``, the scheme's kinds) for linking ``scheme`` from the command line: the pipeline
    named, else the default when it can serve (else its fallback), over the labels in the scheme's
    language and English (as `link` and the calibration's training rows rank them). As on the Link
    page, its known mentions are the other countries' crosswalk titles and the store's current
    decisions less the scheme's boilerplate (``decided_mentions``), and the first ``LinkBatch``
    ranks with the kinds of concept the scheme's decisions show (``scheme_kinds``): a proposal is
    the candidate the Link page would show first. Linked again, a decided term gets no kinds, as on
    the page (``ui.calibration.relinked_decisions``)."""
    from db.aliases import decided_mentions, scheme_boilerplate, scheme_kinds
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo, reader_languages
    from melo_core.linking.pipeline import Pipeline, choose_ready, crosswalk_mentions_of

    taxonomy = cached_taxonomy_from_melo(data_dir)
    country = scheme_country(scheme)
    info = store.scheme(scheme)
    languages = list(reader_languages(info.language if info and info.language else "en", taxonomy.languages)) or None

    boilerplate = scheme_boilerplate(store, scheme)

    def mentions_of(definition: PipelineDefinition) -> list[tuple[str, str, str | None]]:
        relations = definition.mention_relations
        crosswalks = [m for m in crosswalk_mentions_of(data_dir, relations, country) if m[1] in taxonomy]
        return [*crosswalks, *decided_mentions(store, scheme, relations, taxonomy, boilerplate)]

    definition, notice = choose_ready(pipeline, taxonomy, languages, lambda d: [t for t, _, _ in mentions_of(d)])
    if notice:
        say(notice)
    linker = Pipeline(definition, taxonomy, languages, cache_dir=config.cache_dir(), show_progress=False,
                      on_status=say)  # fmt: skip
    every = mentions_of(definition)
    held = {"every": every, "others": without_scheme_decisions(store, scheme, every, definition.mention_relations)}
    holding = ""  # which set the linker holds: swapped only when the other is asked for

    def link_holding(which: str, kinds: TargetKinds | None) -> LinkBatch:
        def link(labels: Sequence[str], language: str | None) -> list[list[Candidate]]:
            nonlocal holding
            if holding != which:
                linker.set_mentions(held[which])
                holding = which
            return linker.linker(language).link(labels, top_k=10, kinds=kinds)

        return link

    kinds = scheme_kinds(store, scheme, taxonomy.by_uri)
    return SchemeLinking(definition.name, link_holding("every", kinds), link_holding("others", None), kinds)
