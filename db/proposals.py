"""Batch proposals at a stated precision (``propose``, the Crosswalk page's "Propose at 95 %").

Every undecided term of a scheme is linked; its first candidate's calibrated probability
(``melo_core.evaluation.calibration``) is compared with the threshold at which the calibrator's first
candidates reached the target precision on other countries' crosswalks (``threshold_for``); those
above it become proposals in the store (``Store.add_proposals``), which a person confirms or
rejects in bulk. A rejected pair is never proposed again; proposing twice adds nothing.

Once the scheme has ``MIN_SCHEME_TERMS`` decided terms, the probabilities are shifted by what those
decisions say of the calibrator (``scheme_offset_of``, the Link page's shift), but only down: a scheme's decisions may make proposals more cautious, never bolder. On job-ad titles,
where the calibrator learnt on national crosswalks is overconfident, proposals at 0.95 were right
65 % of the time unshifted (docs/experiments/batch-proposals.md). A decided term counts with the
probabilities the Link page showed for it; one it never showed under the pipeline (imported with
its decisions, or decided while another pipeline served) is linked again (``relink``), without the
scheme's own decisions as known mentions, so that its own label does not find its answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from db.models import MATCH_OUTCOMES
from db.store import NewProposal, Store, Suggestion
from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import scheme_country
from melo_core.evaluation.calibration import MIN_SCHEME_TERMS, TOP_K, scheme_offset, shift_probabilities
from melo_core.linking.linker import Candidate

if TYPE_CHECKING:
    from melo_core.linking.pipeline import PipelineDefinition

BATCH = 128  # terms linked at once
MAX_RELINKED = 200  # decided terms linked again for the shift, the latest: enough to fit one number


class Calibrated(Protocol):
    """What proposing needs of a calibrator (``melo_core.evaluation.calibration.Calibrator``)."""

    def probabilities(
        self, candidates: Sequence[Candidate], query_language: str | None, scheme_terms: int | None = None
    ) -> list[float]: ...

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


def _matched(store: Store, scheme: str) -> dict[int, set[str]]:
    matched: dict[int, set[str]] = {}
    for decision in store.crosswalk(scheme):
        matched.setdefault(decision.term_id, set()).add(decision.concept_uri)
    return matched


def _shown(store: Store, scheme: str, pipeline: str, matched: Mapping[int, set[str]]) -> list[Suggestion]:
    return [s for s in store.top_suggestions(scheme, max_rank=TOP_K)
            if s.scorer == pipeline and s.confidence is not None and s.term_id in matched]  # fmt: skip


def unshown_decisions(store: Store, scheme: str, pipeline: str, limit: int = MAX_RELINKED) -> list[UnshownDecision]:
    """The scheme's terms decided as a match for which the Link page stored no probability of
    ``pipeline`` (imported with their decisions, or decided while another pipeline served): the
    latest ``limit`` in import order."""
    matched = _matched(store, scheme)
    shown = {s.term_id for s in _shown(store, scheme, pipeline, matched)}
    info = store.scheme(scheme)
    default = info.language if info else None
    terms = {t.id: t for t in store.queue(scheme, status=None, limit=None) if t.id in matched and t.id not in shown}
    unshown = [UnshownDecision(t.id, t.label, t.language or default, frozenset(matched[t.id])) for t in terms.values()]
    return unshown[-limit:] if limit else []


def relink(decisions: Sequence[UnshownDecision], link: LinkBatch, calibrator: Calibrated,
           scheme_terms: int | None) -> dict[int, list[tuple[float, str]]]:  # fmt: skip
    """Each decided term linked again (``link`` should leave the scheme's own decisions out of its
    known mentions): its first ``TOP_K`` candidates' unshifted probabilities and concepts."""
    relinked: dict[int, list[tuple[float, str]]] = {}
    by_language: dict[str | None, list[UnshownDecision]] = {}
    for decision in decisions:
        by_language.setdefault(decision.language, []).append(decision)
    for language, group in by_language.items():
        for start in range(0, len(group), BATCH):
            batch = group[start : start + BATCH]
            for decision, candidates in zip(batch, link([d.label for d in batch], language), strict=True):
                top = list(candidates[:TOP_K])
                if top:
                    probabilities = calibrator.probabilities(top, language, scheme_terms)
                    relinked[decision.term_id] = [
                        (float(p), c.concept_uri) for p, c in zip(probabilities, top, strict=True)
                    ]
    return relinked


def scheme_offset_of(store: Store, scheme: str, pipeline: str, spread: float | None = None,
                     relinked: Relinked | None = None) -> tuple[float, int]:  # fmt: skip
    """(the logit shift that fits the scheme's own decisions, the decided terms it is fitted on): the
    probabilities the Link page stored with ``pipeline``'s suggestions for the terms decided as a
    match, right where the decided concept, less the shift each was stored with
    (``melo_core.evaluation.calibration.scheme_offset``, under the prior ``spread``: the calibrator's
    ``offset_spread``); and those of ``relinked`` decided terms the page never showed (``relink``).
    The shift is 0 before ``MIN_SCHEME_TERMS`` such terms."""
    matched = _matched(store, scheme)
    shown = _shown(store, scheme, pipeline, matched)
    seen = {s.term_id for s in shown}
    again = {t: rows for t, rows in (relinked or {}).items() if t in matched and t not in seen and rows}
    decided = len(seen) + len(again)
    if decided < MIN_SCHEME_TERMS:
        return 0.0, decided
    probabilities = [float(s.confidence or 0.0) for s in shown] + [p for rows in again.values() for p, _ in rows]
    labels = [float(s.concept_uri in matched[s.term_id]) for s in shown]
    labels += [float(uri in matched[t]) for t, rows in again.items() for _, uri in rows]
    applied = [s.confidence_offset or 0.0 for s in shown] + [0.0] * (len(probabilities) - len(shown))
    return scheme_offset(probabilities, labels, spread, applied=applied), decided


def cautious(offset: float) -> float:
    """The shift proposals take from a scheme's offset (``scheme_offset_of``): only down, so that a
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
) -> ProposeReport:
    """Propose the first candidate of every undecided term of ``scheme`` whose calibrated
    probability clears ``calibrator.threshold_for(precision)``; ``link`` ranks the terms (the
    pipeline with the scheme's known mentions). ``link_decided`` (the pipeline without the scheme's
    own decisions) links again the decided terms the Link page never showed, for the shift; without
    it only those it showed count. Stops with ``MeloInputError`` when no threshold reaches the
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
    relinked: dict[int, list[tuple[float, str]]] = {}
    if link_decided is not None:
        relinked = relink(unshown_decisions(store, scheme, pipeline), link_decided, calibrator, info.terms)
    offset, decided = scheme_offset_of(store, scheme, pipeline, calibrator.offset_spread, relinked)
    shift = cautious(offset)
    earlier = store.proposals(scheme, status=None)
    waiting = {p.term_id for p in earlier if p.status == "open"}
    turned_down = {(p.term_id, p.concept_uri) for p in earlier if p.status == "rejected"}
    terms = [t for t in store.queue(scheme, status="todo", limit=None) if t.id not in waiting]
    by_language: dict[str | None, list] = {}
    for term in terms:
        by_language.setdefault(term.language or info.language, []).append(term)
    found: list[NewProposal] = []
    linked = 0
    for language, group in by_language.items():
        for start in range(0, len(group), BATCH):
            batch = group[start : start + BATCH]
            for term, candidates in zip(batch, link([t.label for t in batch], language), strict=True):
                if candidates:
                    first = candidates[0]
                    probability = calibrator.probabilities(candidates, language, info.terms)[0]
                    if shift:
                        probability = float(shift_probabilities([probability], shift)[0])
                    if probability >= threshold and (term.id, first.concept_uri) not in turned_down:
                        found.append(NewProposal(term.id, first.concept_uri, first.label or None, relation,
                                                 first.score, min(1.0, max(0.0, probability))))  # fmt: skip
            linked += len(batch)
            on_progress(linked)
    added = store.add_proposals(scheme, found, tool_version=tool_version, pipeline=pipeline,
                                target_precision=precision, threshold=threshold)  # fmt: skip
    return ProposeReport(scheme, pipeline, precision, threshold, linked, len(found), added, shift, decided,
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


def pipeline_link(store: Store, scheme: str, pipeline: str | None, data_dir: str | Path,
                  say: Callable[[str], None] = lambda message: None) -> tuple[str, LinkBatch, LinkBatch]:  # fmt: skip
    """(the pipeline's name, a ``LinkBatch`` through it, one without the scheme's own decisions as
    known mentions, for ``relink``) for linking ``scheme`` from the command line: the pipeline
    named, else the default when it can serve (else its fallback), over the labels in the scheme's
    language and English (as `link` and the calibration's training rows rank them); its known
    mentions are the other countries' crosswalk titles and the store's current decisions, as on
    the Link page."""
    from db.aliases import accepted_aliases
    from melo_core.esco.taxonomy import cached_taxonomy_from_melo, reader_languages
    from melo_core.linking.pipeline import Pipeline, choose_ready, crosswalk_mentions_of

    taxonomy = cached_taxonomy_from_melo(data_dir)
    country = scheme_country(scheme)
    info = store.scheme(scheme)
    languages = list(reader_languages(info.language if info and info.language else "en", taxonomy.languages)) or None

    def mentions_of(definition: PipelineDefinition) -> list[tuple[str, str, str | None]]:
        crosswalks = crosswalk_mentions_of(data_dir, definition.mention_relations, country)
        decided = accepted_aliases(store, relations=definition.mention_relations)
        return [m for m in [*crosswalks, *decided] if m[1] in taxonomy]

    definition, notice = choose_ready(pipeline, taxonomy, languages, lambda d: [t for t, _, _ in mentions_of(d)])
    if notice:
        say(notice)
    linker = Pipeline(definition, taxonomy, languages, cache_dir=config.cache_dir(), show_progress=False,
                      on_status=say)  # fmt: skip
    every = mentions_of(definition)
    own = set(accepted_aliases(store, scheme, relations=definition.mention_relations))
    held = {"every": every, "others": [m for m in every if m not in own]}
    holding: list[str] = []  # which set the linker holds: swapped only when the other is asked for

    def link_holding(which: str) -> LinkBatch:
        def link(labels: Sequence[str], language: str | None) -> list[list[Candidate]]:
            if holding != [which]:
                linker.set_mentions(held[which])
                holding[:] = [which]
            return linker.link(labels, top_k=10, query_language=language)

        return link

    return definition.name, link_holding("every"), link_holding("others")
