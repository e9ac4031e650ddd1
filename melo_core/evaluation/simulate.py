"""A simulated curator: does the linker learn from decisions, and what does a term cost?

A national crosswalk is replayed in random order (fixed seed; or in a queue order of
``melo_core.evaluation.effort``) through the linker, as a curator would work through the terms on the Link
page: each term is linked (top ``depth`` concepts), the rank of its gold concept is recorded (inf
when it is not in the top ``depth``), then the curator "accepts" the gold concept. The learning
linker learns as the Link page does from the store's decisions: the term becomes a known mention
of its concept (``Linker.add_mentions``) when the relation is one of the pipeline's mention
relations (a scorer spec: exact or narrow, ``ALIAS_RELATIONS``) and the term is not mostly the
scheme's boilerplate (``scheme_learning.Boilerplate``); and every decision teaches the kind of
concept the scheme maps to (``scheme_learning.TargetKinds``). The static linker learns nothing.
Each rank costs the curator time (``effort.CostModel``): effort per 100 terms. With a calibrator,
ranks are read in the lists as the Link page shows them (an ISCO group's list most probable
first), and a replay can start as "Propose at 95 %" does: a batch of proposals, confirmed or
rejected in bulk (``simulate_many``).

Gold concepts follow the benchmark build (``builder.select_target``): one gold concept per term,
the closest relation up to narrowMatch (closeMatch for Norway), ambiguous and vague terms left
out, as are concepts missing from the taxonomy.

Reported per linker: MRR, acc@1, acc@10, effort per 100 terms and mean rank over the sequence
(the rank at which the curator found the gold concept; ranks past ``depth`` count 0 in MRR and
are counted apart from the mean rank),
and the MRR of the not-yet-decided terms at checkpoints (after 0 %, 25 %, 50 %, 75 % of the
decisions, evaluated without teaching). The static linker's ranks do not depend on the order,
so both linkers share one Linker: the static ranks are taken before any decision is learned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from melo_core.errors import MeloInputError
from melo_core.esco.builder import DEFAULT_LOOSEST_RELATION, LOOSEST_RELATION_BY_CROSSWALK, select_target
from melo_core.esco.crosswalk import ALIAS_RELATIONS, Crosswalk
from melo_core.esco.taxonomy import Taxonomy, crosswalk_languages
from melo_core.evaluation.calibration import Calibrator
from melo_core.evaluation.effort import COSTS, PROPOSAL_PRECISION, CostModel, margin, queue_order
from melo_core.linking.linker import Candidate, Linker
from melo_core.linking.pipeline import Pipeline, PipelineDefinition, crosswalk_mentions_of
from melo_core.linking.scheme_learning import Boilerplate, TargetKinds
from melo_core.metrics import first_rank_accuracy, mean_reciprocal_rank
from melo_core.scorers.hybrid import POOL

DEPTH = 100
CHECKPOINTS = (0.0, 0.25, 0.5, 0.75)
BATCH = 64  # terms per link call when evaluating many at once
LINKERS = ("learning", "static")


@dataclass(frozen=True)
class GoldTerm:
    code: str
    title: str
    concept_uri: str
    relation: str


@dataclass(frozen=True)
class Step:
    position: int  # 0-based place in the curator's order
    term: GoldTerm
    static_rank: float  # 1-based concept rank; inf when not in the top depth
    learning_rank: float
    taught: bool  # the accepted decision became a known mention of the learning linker
    proposed: bool = False  # its first candidate was proposed in the batch (confirmed when static_rank is 1)


@dataclass
class LinkerSummary:
    linker: str
    terms: int
    mrr: float  # over the sequence: 1 / the rank at which the curator found the gold concept
    mean_rank: float  # over the terms found in the top depth (nan when none)
    found: int
    not_found: int
    remaining_mrr: dict[float, float] = field(default_factory=dict)  # checkpoint -> MRR of undecided terms
    acc_at_1: float = 0.0
    acc_at_10: float = 0.0
    effort_per_100: float = 0.0  # seconds per 100 terms (effort.CostModel)
    proposed: int = 0  # terms proposed in the batch first
    confirmed: int = 0  # of them, those whose first candidate was right

    def line(self, depth: int = DEPTH) -> str:
        remaining = "  ".join(f"{share:.0%}: {value:.4f}" for share, value in self.remaining_mrr.items())
        return (
            f"{self.linker:<9} effort {self.effort_per_100:.0f} s/100 terms  MRR {self.mrr:.4f}  "
            f"acc@1 {self.acc_at_1:.3f}  acc@10 {self.acc_at_10:.3f}  mean rank {self.mean_rank:.2f} over "
            f"{self.found} found, {self.not_found} not in the top {depth}  |  MRR of the undecided terms after "
            f"{remaining}"
        )


@dataclass
class Simulation:
    crosswalk: str
    scorer: str
    languages: tuple[str, ...]
    seed: int
    depth: int
    skipped: dict[str, int]  # terms left out by the benchmark's rule: ambiguous, vague, unknown concept
    steps: list[Step]
    summaries: dict[str, LinkerSummary]
    load_seconds: float
    seconds: float  # linking and learning, after the linker is loaded
    order: str = "random"

    @property
    def taught(self) -> int:
        return sum(s.taught for s in self.steps)

    def proposals(self) -> str:
        learning = self.summaries["learning"]
        if not learning.proposed:
            return ""
        rejected = learning.proposed - learning.confirmed
        return f"{learning.proposed} proposed in a batch first ({learning.confirmed} confirmed, {rejected} rejected); "

    def header(self) -> str:
        skipped = ", ".join(f"{n} {why}" for why, n in self.skipped.items() if n) or "none"
        order = f"random order (seed {self.seed})" if self.order == "random" else f"{self.order} order"
        return (
            f"{self.crosswalk}: {len(self.steps)} terms in {order} (left out: {skipped}); "
            f"scorer {self.scorer} over ESCO labels in {', '.join(self.languages)}; "
            f"{self.taught} decisions taught as known mentions; {self.proposals()}"
            f"{self.seconds:.1f} s (+{self.load_seconds:.1f} s loading)"
        )


def gold_terms(crosswalk: Crosswalk, taxonomy: Taxonomy, loosest: str | None = None) -> tuple[list[GoldTerm], dict[str, int]]:  # fmt: skip
    """The crosswalk's terms with one gold concept each, as the benchmark keeps them, and how
    many were left out per reason."""
    loosest = loosest or LOOSEST_RELATION_BY_CROSSWALK.get(crosswalk.name, DEFAULT_LOOSEST_RELATION)
    kept, skipped = [], {"ambiguous": 0, "vague": 0, "unknown concept": 0, "empty title": 0}
    for term in crosswalk.terms:
        target, verdict = select_target(term.matches, loosest)
        if target is None:
            skipped[verdict] += 1
        elif target not in taxonomy:
            skipped["unknown concept"] += 1
        elif not term.title:
            skipped["empty title"] += 1
        else:
            kept.append(GoldTerm(term.code, term.title, target, term.matches[target]))
    return kept, skipped


def _rank(candidates: Sequence, gold: str) -> float:
    return next((float(c.rank) for c in candidates if c.concept_uri == gold), math.inf)


def _margin(candidates: Sequence) -> float:
    return margin([c.score for c in candidates[:2]])


# A linked list as the Link page shows it, given the kinds learnt, with its first ten's
# probabilities (none without a calibrator): ``Calibrator.ranked``.
Shown = Callable[[list[Candidate], TargetKinds | None], tuple[list[Candidate], list[float]]]


def _as_linked(candidates: list[Candidate], kinds: TargetKinds | None) -> tuple[list[Candidate], list[float]]:
    return candidates, []


def _as_ranked(calibrator: Calibrator, crosswalk: Crosswalk, candidates: list[Candidate],
               kinds: TargetKinds | None) -> tuple[list[Candidate], list[float]]:  # fmt: skip
    return calibrator.ranked(candidates, crosswalk.language, crosswalk.scheme_terms, kinds)


def _ranks(linker: Linker, terms: Sequence[GoldTerm], depth: int, on_progress: Callable[[int], None],
           kinds: TargetKinds | None = None, margins: list[float] | None = None,
           firsts: list[float] | None = None, shown: Shown = _as_linked) -> list[float]:  # fmt: skip
    """The gold concepts' ranks in the lists as ``shown``; each term's ``margin`` appended to
    ``margins`` when given, the probability of the first candidate shown (as `propose` computes
    it) to ``firsts``."""
    out: list[float] = []
    for begin in range(0, len(terms), BATCH):
        batch = terms[begin : begin + BATCH]
        results = linker.link([t.title for t in batch], top_k=depth, pool=max(POOL, 5 * depth), kinds=kinds)
        for candidates, term in zip(results, batch, strict=True):
            listed, probabilities = shown(candidates, kinds)
            out.append(_rank(listed, term.concept_uri))
            if firsts is not None:
                firsts.append(probabilities[0] if probabilities else 0.0)
        if margins is not None:
            margins.extend(_margin(candidates) for candidates in results)
        on_progress(len(batch))
    return out


def _summary(name: str, ranks: list[float], remaining: dict[float, float], costs: CostModel,
             proposed: Sequence[bool] | None = None, confirmed: Sequence[bool] | None = None) -> LinkerSummary:  # fmt: skip
    """``proposed``: per term, whether its first candidate was proposed in the batch; ``confirmed``:
    whether that proposal was right (the term then costs the confirmation). A rejected one costs the
    rejection, then the term as usual at its ``rank`` (rank 1 too, when learning put it first later)."""
    found = [r for r in ranks if math.isfinite(r)]
    proposed = proposed or [False] * len(ranks)
    confirmed = confirmed or [False] * len(ranks)
    rejected = sum(proposed) - sum(confirmed)
    effort = costs.per_100(ranks, confirmed) + (100.0 * rejected * costs.confirm_proposal / len(ranks) if ranks else 0)
    return LinkerSummary(
        linker=name,
        terms=len(ranks),
        mrr=mean_reciprocal_rank(ranks),
        mean_rank=sum(found) / len(found) if found else math.nan,
        found=len(found),
        not_found=len(ranks) - len(found),
        remaining_mrr=remaining,
        acc_at_1=first_rank_accuracy(ranks, 1),
        acc_at_10=first_rank_accuracy(ranks, 10),
        effort_per_100=effort,
        proposed=sum(proposed),
        confirmed=sum(confirmed),
    )


def checkpoint_positions(n: int, checkpoints: Sequence[float] = CHECKPOINTS) -> dict[int, float]:
    """Step index (decisions made so far) -> checkpoint share, for the shares that leave terms."""
    positions: dict[int, float] = {}
    for share in checkpoints:
        position = round(share * n)
        if position < n:
            positions.setdefault(position, share)
    return positions


@dataclass(frozen=True)
class Replay:
    """One replay of a crosswalk: the order's seed and what the learning linker learns besides known
    mentions (off: mentions only, as before issue 89)."""

    seed: int = 0
    learn_kinds: bool = True
    skip_boilerplate: bool = True
    proposals: bool = False  # batch proposals first, at ``simulate_many``'s calibrator and precision


def page_calibrator(scorer: str | PipelineDefinition, crosswalk: Crosswalk, proposals: bool, asked: str,
                    say: Callable[[str], None] = lambda message: None) -> Calibrator | None:  # fmt: skip
    """What the Link page and `propose` would use for the crosswalk: the pipeline's calibrator fit by
    `prepare` without the crosswalk's country (it orders the lists an ISCO group leads, and
    proposes). None for a scorer spec, or a pipeline not prepared (lists in score order). With
    ``proposals`` (``asked`` by that option), both are a ``MeloInputError``."""
    from melo_core.evaluation.calibration import calibration_path, load_calibrator

    if isinstance(scorer, str):
        if proposals:
            raise MeloInputError(f"{asked} needs a pipeline (its calibrator), not the scorer {scorer}")
        return None
    calibrator = load_calibrator(scorer.name, crosswalk.country)
    where = calibration_path(scorer.name, crosswalk.country)
    if calibrator is None and proposals:
        raise MeloInputError(f"{asked} needs {where}: run `python -m melo_core prepare --pipeline {scorer.name}` first")
    if calibrator is None:
        say(f"{crosswalk.name}: no calibrator for {scorer.name} ({where}): lists in score order, as the Link "
            "page shows them before `prepare` fits one")  # fmt: skip
    return calibrator


def simulate(
    crosswalk: Crosswalk,
    taxonomy: Taxonomy,
    scorer: str | PipelineDefinition = "char-tfidf",
    languages: Sequence[str] | None = None,
    seed: int = 0,
    limit: int = 0,
    depth: int = DEPTH,
    checkpoints: Sequence[float] = CHECKPOINTS,
    cache_dir: str | Path | None = None,
    index_kind: str = "hnsw",
    on_status: Callable[[str], None] = lambda message: None,
    on_progress: Callable[[int, int], None] = lambda done, total: None,
    data_dir: str | Path | None = None,
    order: str = "random",
    learn_kinds: bool = True,
    skip_boilerplate: bool = True,
    costs: CostModel = COSTS,
    calibrator: Calibrator | None = None,
    proposals: bool | None = None,
) -> Simulation:
    """Replay the crosswalk through a learning and a static linker (see the module docstring).
    ``scorer``: a pipeline (its variant for the crosswalk's language; with ``data_dir``, the
    other countries' crosswalk titles are known mentions from the start) or a scorer spec.
    ``limit``: only the first N terms of the order. ``order``: ``random`` (``seed``), ``file``,
    ``most-confident`` or ``least-confident`` first (by the static linker's margin between its
    first two candidates). ``learn_kinds``/``skip_boilerplate``: what the learning linker learns
    besides known mentions (off: mentions only, as before issue 89). ``calibrator``: lists an ISCO
    group leads are read most probable first, as the Link page shows them, and with ``proposals``
    (by default: when there is a calibrator) the learning linker starts after a batch of proposals
    at 0.95 (``simulate_many``). ``on_progress(done, total)`` counts linked terms."""
    proposing = calibrator is not None if proposals is None else proposals
    replay = Replay(seed, learn_kinds, skip_boilerplate, proposals=proposing)
    [result] = simulate_many(crosswalk, taxonomy, scorer, [replay],
                             languages=languages, limit=limit, depth=depth, checkpoints=checkpoints,
                             cache_dir=cache_dir, index_kind=index_kind, on_status=on_status, on_progress=on_progress,
                             data_dir=data_dir, order=order, costs=costs, calibrator=calibrator)  # fmt: skip
    return result


def simulate_many(
    crosswalk: Crosswalk,
    taxonomy: Taxonomy,
    scorer: str | PipelineDefinition,
    replays: Sequence[Replay],
    languages: Sequence[str] | None = None,
    limit: int = 0,
    depth: int = DEPTH,
    checkpoints: Sequence[float] = CHECKPOINTS,
    cache_dir: str | Path | None = None,
    index_kind: str = "hnsw",
    on_status: Callable[[str], None] = lambda message: None,
    on_progress: Callable[[int, int], None] = lambda done, total: None,
    data_dir: str | Path | None = None,
    order: str = "random",
    costs: CostModel = COSTS,
    calibrator: Calibrator | None = None,
    precision: float = PROPOSAL_PRECISION,
) -> list[Simulation]:
    """``simulate`` once per replay, sharing what does not depend on it: the linker is loaded
    once, the static ranks are taken once, and the learning linker goes back to its first known
    mentions before each replay (an experiment over seeds 0-2 loaded and ranked three times).
    ``checkpoints=()``: no MRR of the undecided terms (a third of the work with `best`).

    With a ``calibrator``, the lists an ISCO group leads are read most probable first, as the Link
    page shows them (``Calibrator.ranked``). A replay with ``proposals`` starts as the Crosswalk
    page's "Propose at 95 %" does: every term whose first candidate's probability (``calibrator``,
    fit without the crosswalk's country) clears ``calibrator.threshold_for(precision)`` is
    proposed; the curator confirms the right ones in bulk (1.5 s each; they become decisions and
    teach at once) and rejects the wrong ones (1.5 s each; those terms come up again in their turn)."""
    terms, skipped = gold_terms(crosswalk, taxonomy)
    if not terms:
        raise MeloInputError(f"crosswalk {crosswalk.name!r} has no term with a single gold concept in the taxonomy")
    if not replays:
        raise MeloInputError("no replay asked for")
    threshold = None
    if any(replay.proposals for replay in replays):
        if calibrator is None:
            raise MeloInputError("batch proposals need a calibrator (`prepare` fits one per pipeline)")
        threshold = calibrator.threshold_for(precision)
        if threshold is None:
            on_status(f"no threshold of the calibrator reaches precision {precision:.2f}: nothing is proposed")
    languages = crosswalk_languages(crosswalk.language, taxonomy, languages)
    alias_language = crosswalk.language or ""
    by_confidence = order in ("most-confident", "least-confident")
    queue_order(order, [])  # an unknown order fails before any work
    count = len(terms) if not limit else min(limit, len(terms))
    done = 0
    total = 0

    def progress(linked: int) -> None:
        nonlocal done
        done += linked
        on_progress(done, total)

    start = time.perf_counter()
    try:
        if isinstance(scorer, PipelineDefinition):
            pipeline = Pipeline(scorer, taxonomy, languages, index_kind=index_kind, cache_dir=cache_dir,
                                on_status=on_status)  # fmt: skip
            if data_dir is not None:
                pipeline.set_mentions(
                    crosswalk_mentions_of(data_dir, scorer.mention_relations, crosswalk.country, cache_dir)
                )
            linker = pipeline.linker(crosswalk.language)
            teaching = tuple(scorer.mention_relations)  # what the Link page makes known mentions of
        else:
            linker = Linker(taxonomy, scorer, languages, index_kind=index_kind, cache_dir=cache_dir,
                            on_status=on_status, query_language=crosswalk.language)  # fmt: skip
            teaching = ALIAS_RELATIONS
    except ValueError as exc:
        raise MeloInputError(str(exc)) from None
    first_mentions = list(linker.mentions_given)
    known_before = len(linker.mentions)
    scorer_name = scorer.name if isinstance(scorer, PipelineDefinition) else scorer
    load_seconds = time.perf_counter() - start
    start = time.perf_counter()

    # The curator's sequence per replay, as term positions; the static ranks (and the first
    # candidates' probabilities) of the terms in any of them.
    firsts: list[float] | None = [] if calibrator is not None and threshold is not None else None
    # The lists as the Link page shows them, under the calibrator `propose` and the page use.
    shown: Shown = _as_linked if calibrator is None else partial(_as_ranked, calibrator, crosswalk)
    margins: list[float] = []
    if by_confidence:
        needed = list(range(len(terms)))
        total = len(terms)
        ranks = _ranks(linker, terms, depth, progress, margins=margins, firsts=firsts, shown=shown)
        sequences = [queue_order(order, margins, replay.seed)[:count] for replay in replays]
    else:
        sequences = [queue_order(order, [0.0] * len(terms), replay.seed)[:count] for replay in replays]
        needed = sorted({i for sequence in sequences for i in sequence})
        total = len(needed)
        ranks = _ranks(linker, [terms[i] for i in needed], depth, progress, firsts=firsts, shown=shown)
    static_of = dict(zip(needed, ranks, strict=True))
    cleared = set()
    if firsts is not None and threshold is not None:
        cleared = {i for i, p in zip(needed, firsts, strict=True) if p >= threshold}
    positions = checkpoint_positions(count, checkpoints)
    # The learning steps and the learning checkpoints past 0 %, per replay.
    total += len(replays) * (count + sum(count - p for p in positions if p > 0))
    boilerplate = Boilerplate.of([t.title for t in crosswalk.terms if t.title])
    linking_seconds = time.perf_counter() - start
    results = []
    for replay, sequence_positions in zip(replays, sequences, strict=True):
        start = time.perf_counter()
        linker.set_mentions(first_mentions)  # what an earlier replay taught is forgotten
        sequence = [terms[i] for i in sequence_positions]
        static_ranks = [static_of[i] for i in sequence_positions]
        proposed = [replay.proposals and i in cleared for i in sequence_positions]
        steps, summaries = _replay(linker, sequence, static_ranks, proposed, positions, depth, progress, teaching,
                                   alias_language, boilerplate if replay.skip_boilerplate else None,
                                   TargetKinds() if replay.learn_kinds else None, known_before, taxonomy,
                                   costs, shown)  # fmt: skip
        seconds = linking_seconds / len(replays) + time.perf_counter() - start
        results.append(Simulation(crosswalk.name, scorer_name, languages, replay.seed, depth, skipped, steps,
                                  summaries, load_seconds / len(replays), seconds, order))  # fmt: skip
    return results


def _replay(linker: Linker, sequence: list[GoldTerm], static_ranks: list[float], proposed: list[bool],
            positions: dict[int, float], depth: int, progress: Callable[[int], None], teaching: tuple[str, ...],
            alias_language: str, boilerplate: Boilerplate | None, kinds: TargetKinds | None, known_before: int,
            taxonomy: Taxonomy, costs: CostModel,
            shown: Shown = _as_linked) -> tuple[list[Step], dict[str, LinkerSummary]]:  # fmt: skip
    """The learning linker through ``sequence``, one decision at a time, after the batch of the
    ``proposed`` terms (right when their static rank is 1: confirmed and learnt first)."""

    def decide(term: GoldTerm) -> bool:
        # The curator accepted the gold concept: the term becomes a known mention of it, unless it
        # is mostly the scheme's boilerplate; the decision teaches the kind of concept either way.
        taught = term.relation in teaching and (boilerplate is None or boilerplate.teaches_mention(term.title))
        if taught:
            linker.add_mentions([(term.title, term.concept_uri, alias_language)])
        if kinds is not None:
            kinds.observe(taxonomy.by_uri[term.concept_uri], term.relation)
        return taught

    confirmed = {i: decide(sequence[i]) for i, p in enumerate(proposed) if p and static_ranks[i] == 1}
    learning_ranks: list[float] = []
    remaining: dict[str, dict[float, float]] = {"learning": {}, "static": {}}
    steps = []
    for i, term in enumerate(sequence):
        if i in positions:
            share = positions[i]
            remaining["static"][share] = mean_reciprocal_rank(static_ranks[i:])
            # With nothing learnt yet the learning linker is the static one: nothing to recompute.
            learned = len(linker.mentions) > known_before or (kinds is not None and kinds.decisions > 0)
            undecided = (
                _ranks(linker, sequence[i:], depth, progress, kinds, shown=shown) if learned else static_ranks[i:]
            )
            remaining["learning"][share] = mean_reciprocal_rank(undecided)
        progress(1)
        if i in confirmed:  # decided in the batch
            learning_ranks.append(1.0)
            steps.append(Step(i, term, static_ranks[i], 1.0, confirmed[i], proposed=True))
            continue
        [candidates] = linker.link([term.title], top_k=depth, pool=max(POOL, 5 * depth), kinds=kinds)
        learning_ranks.append(_rank(shown(candidates, kinds)[0], term.concept_uri))
        steps.append(Step(i, term, static_ranks[i], learning_ranks[-1], decide(term), proposed=proposed[i]))
    summaries = {
        "learning": _summary(
            "learning",
            learning_ranks,
            remaining["learning"],
            costs,
            proposed,
            [i in confirmed for i in range(len(sequence))],
        ),
        "static": _summary("static", static_ranks, remaining["static"], costs),
    }
    return steps, summaries


def step_rows(simulation: Simulation) -> list[dict[str, object]]:
    """Per decision, for a CSV: the term, its gold concept and both linkers' ranks ("inf": not found)."""
    return [
        {
            "step": s.position + 1,
            "code": s.term.code,
            "title": s.term.title,
            "gold_uri": s.term.concept_uri,
            "relation": s.term.relation,
            "static_rank": s.static_rank if math.isinf(s.static_rank) else int(s.static_rank),
            "learning_rank": s.learning_rank if math.isinf(s.learning_rank) else int(s.learning_rank),
            "taught": int(s.taught),
            "proposed": int(s.proposed),
        }
        for s in simulation.steps
    ]


STEP_COLUMNS = ["step", "code", "title", "gold_uri", "relation", "static_rank", "learning_rank", "taught", "proposed"]
