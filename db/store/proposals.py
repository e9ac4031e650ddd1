"""Machine proposals (``db.proposals`` makes them): a term's first candidate whose calibrated
probability cleared the threshold of a stated precision, waiting for a person. Confirmed, it
becomes a decision signed by whoever confirmed it, keeping who proposed it and with what
probability (``proposed_by``, ``confidence``); rejected, it stays as such, so the pair is
never proposed again. A proposal is only a proposal: it counts for nothing (queue, crosswalk,
exports) until confirmed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.models import MATCH_OUTCOMES, UNDECIDED, UNSURE, DecisionRow, ProposalRow, TermRow, utcnow
from db.store.accounts import acting_as
from db.store.base import StoreBase, chunks
from db.store.decisions import DecisionQueries
from db.store.records import Actor
from db.store.retry import retried_when_busy

OPEN = "open"
# What a person says of a proposal: it becomes her decision, or it is never proposed again.
PROPOSAL_VERDICTS = ("confirmed", "rejected")
TOOL = "MELO Studio"


@dataclass(frozen=True)
class NewProposal:
    """What ``add_proposals`` records for one term: its first candidate and how sure the machine is."""

    term_id: int
    concept_uri: str
    concept_label: str | None
    relation: str
    score: float  # the pipeline's raw fused score
    confidence: float  # calibrated probability that a curator accepts it


@dataclass(frozen=True)
class Proposal:
    id: int
    term_id: int
    term_code: str
    term_label: str
    concept_uri: str
    concept_label: str | None
    relation: str
    tool: str
    tool_version: str
    pipeline: str
    score: float
    confidence: float
    target_precision: float
    threshold: float
    status: str  # open, confirmed or rejected
    proposed_at: datetime
    resolved_by: str | None
    resolved_at: datetime | None
    decision_id: int | None

    @property
    def proposed_by(self) -> str:
        """Who proposed it, as a decision that confirms it records it: tool, version, pipeline."""
        return f"{self.tool} {self.tool_version} ({self.pipeline})"


def _proposal(row: ProposalRow, term: TermRow) -> Proposal:
    return Proposal(row.id, row.term_id, term.code, term.label, row.concept_uri, row.concept_label, row.relation,
                    row.tool, row.tool_version, row.pipeline, row.score, row.confidence, row.target_precision,
                    row.threshold, row.status, row.proposed_at, row.resolved_by, row.resolved_at,
                    row.decision_id)  # fmt: skip


class ProposalQueries(StoreBase):
    """Machine proposals: record them, list them, confirm or reject them in bulk."""

    @staticmethod
    def _in_force(s: Session, term_ids: Sequence[int]) -> tuple[set[int], set[tuple[int, str]]]:
        """Of these terms: those a person has settled (a current match or unsure decision: no longer
        undecided), and every (term, concept) pair with a decision in force (a rejection too)."""
        settled: set[int] = set()
        pairs: set[tuple[int, str]] = set()
        for chunk in chunks(sorted(set(term_ids))):
            latest = (
                select(func.max(DecisionRow.id))
                .where(DecisionRow.term_id.in_(chunk))
                .group_by(DecisionRow.term_id, DecisionRow.concept_uri)
            )
            query = select(DecisionRow.term_id, DecisionRow.concept_uri, DecisionRow.outcome).where(
                DecisionRow.id.in_(latest)
            )
            for term_id, uri, outcome in s.execute(query):
                if outcome == UNDECIDED:  # undone to nothing
                    continue
                pairs.add((term_id, uri))
                if outcome in MATCH_OUTCOMES or outcome == UNSURE:
                    settled.add(term_id)
        return settled, pairs

    @retried_when_busy
    def add_proposals(self, scheme: str, proposals: Iterable[NewProposal], *, tool_version: str, pipeline: str,
                      target_precision: float, threshold: float) -> int:  # fmt: skip
        """Record proposals for terms of ``scheme``; how many were new. Left out, so that proposing
        again changes nothing: a pair proposed before (whatever became of it: a rejected pair never
        comes back), a term with an open proposal, a term a person has settled, a pair with a
        decision in force (a curator's rejection of that concept)."""
        with self.write() as s:
            scheme_id = self._scheme_row(s, scheme).id
            wanted = list(proposals)
            if not wanted:
                return 0
            term_ids = sorted({p.term_id for p in wanted})
            known: set[int] = set()
            for chunk in chunks(term_ids):
                known.update(s.scalars(select(TermRow.id).where(TermRow.id.in_(chunk), TermRow.scheme_id == scheme_id)))
            if missing := sorted(set(term_ids) - known):
                raise KeyError(f"no term with id {missing[0]} in scheme {scheme!r}")
            proposed: set[tuple[int, str]] = set()
            open_terms: set[int] = set()
            for chunk in chunks(term_ids):
                query = select(ProposalRow.term_id, ProposalRow.concept_uri, ProposalRow.status).where(
                    ProposalRow.term_id.in_(chunk)
                )
                for term_id, uri, status in s.execute(query):
                    proposed.add((term_id, uri))
                    if status == OPEN:
                        open_terms.add(term_id)
            settled, decided = self._in_force(s, term_ids)
            now = utcnow()
            added = 0
            for p in wanted:
                pair = (p.term_id, p.concept_uri)
                if pair in proposed or pair in decided or p.term_id in open_terms or p.term_id in settled:
                    continue
                if p.relation not in MATCH_OUTCOMES:
                    raise ValueError(f"relation must be one of {', '.join(MATCH_OUTCOMES)}")
                if not 0.0 <= p.confidence <= 1.0:
                    raise ValueError(f"confidence must be a probability, got {p.confidence}")
                s.add(ProposalRow(term_id=p.term_id, concept_uri=p.concept_uri, concept_label=p.concept_label,
                                  relation=p.relation, tool=TOOL, tool_version=tool_version, pipeline=pipeline,
                                  score=float(p.score), confidence=float(p.confidence),
                                  target_precision=target_precision, threshold=threshold, status=OPEN,
                                  proposed_at=now))  # fmt: skip
                proposed.add(pair)
                open_terms.add(p.term_id)
                added += 1
            return added

    def proposals(self, scheme: str, status: str | None = OPEN) -> list[Proposal]:
        """The scheme's proposals by term (import order), filtered by ``status`` (None: all). Open
        ones only while their term is undecided and their pair has no decision: a curator who
        decided the term on the Link page meanwhile has answered them."""
        if status is not None and status not in (OPEN, *PROPOSAL_VERDICTS):
            raise ValueError(f"status must be one of {', '.join((OPEN, *PROPOSAL_VERDICTS))} or None")
        with self.read() as s:
            scheme_id = self._scheme_row(s, scheme).id
            query = (
                select(ProposalRow, TermRow)
                .join(TermRow, TermRow.id == ProposalRow.term_id)
                .where(TermRow.scheme_id == scheme_id)
                .order_by(TermRow.id, ProposalRow.id)
            )
            if status is not None:
                query = query.where(ProposalRow.status == status)
            rows = s.execute(query).all()
            settled, decided = self._in_force(s, [p.term_id for p, _ in rows if p.status == OPEN])
            return [
                _proposal(p, t)
                for p, t in rows
                if p.status != OPEN or (p.term_id not in settled and (p.term_id, p.concept_uri) not in decided)
            ]

    @retried_when_busy
    def resolve_proposals(self, proposal_ids: Sequence[int], person: Actor | str, verdict: str,
                          comment: str = "") -> list[Proposal]:  # fmt: skip
        """Confirm or reject open proposals, all or none, as ``person`` (an ``Actor``, or a typed
        name where the store needs no sign-in). Confirmed: each becomes a decision with the
        proposal's relation, signed by ``person``, keeping the proposal's tool and probability.
        A proposal whose term was decided meanwhile is refused: reload."""
        if verdict not in PROPOSAL_VERDICTS:
            raise ValueError(f"verdict must be one of {', '.join(PROPOSAL_VERDICTS)}")
        if not proposal_ids:
            raise ValueError("nothing to resolve: choose at least one proposal")
        with self.write() as s:
            name = acting_as(s, person, self.sign_in_required)
            rows: list[ProposalRow] = []
            for proposal_id in dict.fromkeys(proposal_ids):
                row = s.get(ProposalRow, proposal_id)
                if row is None:
                    raise KeyError(f"no proposal with id {proposal_id}")
                rows.append(row)
            settled, decided = self._in_force(s, [r.term_id for r in rows])
            now = utcnow()
            resolved = []
            for row in rows:
                term = s.get(TermRow, row.term_id)
                assert term is not None
                what = f"“{term.label}” → {row.concept_label or row.concept_uri.rsplit('/', 1)[-1]}"
                if row.status != OPEN:
                    raise ValueError(f"the proposal {what} was {row.status} already: reload")
                if row.term_id in settled or (row.term_id, row.concept_uri) in decided:
                    raise ValueError(f"“{term.label}” was decided meanwhile: reload")
                row.status, row.resolved_by, row.resolved_at = verdict, name, now
                if verdict == "confirmed":
                    decision = DecisionRow(
                        term_id=row.term_id, concept_uri=row.concept_uri, outcome=row.relation, curator=name,
                        decided_at=now, comment=comment.strip(), scorer=row.pipeline, score=row.score, rank=1,
                        concept_label=row.concept_label, esco_version=DecisionQueries._target_version(s, term),
                        proposed_by=f"{row.tool} {row.tool_version} ({row.pipeline})",
                        confidence=row.confidence,
                    )  # fmt: skip
                    s.add(decision)
                    s.flush()
                    row.decision_id = decision.id
                    settled.add(row.term_id)  # a second proposal of the same term in this batch: refused
                resolved.append((row, term))
            s.flush()
            return [_proposal(r, t) for r, t in resolved]
