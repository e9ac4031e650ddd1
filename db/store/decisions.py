"""Decisions, append-only: record one, a term's history and current state, and undo (which appends
the decision restoring the state before the latest one)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import OUTCOMES, UNDECIDED, DecisionRow, TaxonomyRow, TermRow, utcnow
from db.store.accounts import NotAllowed, acting_as
from db.store.base import StoreBase
from db.store.records import Actor, Decision, decision_record
from db.store.retry import retried_when_busy


def replay(history: Iterable[DecisionRow]) -> list[DecisionRow]:
    """Replay a pair's decisions in order: a decision pushes a state, an undo pops one."""
    stack: list[DecisionRow] = []
    for row in history:
        if row.undoes_id is None:
            stack.append(row)
        elif stack and stack[-1].id == row.undoes_id:
            stack.pop()
    return stack


def pair_stack(s: Session, term_id: int, concept_uri: str) -> list[DecisionRow]:
    """The decisions in force on a (term, concept) pair, oldest first (``replay`` of its history)."""
    return replay(
        s.scalars(
            select(DecisionRow)
            .where(DecisionRow.term_id == term_id, DecisionRow.concept_uri == concept_uri)
            .order_by(DecisionRow.id)
        )
    )


class DecisionQueries(StoreBase):
    """Decisions and undo."""

    @retried_when_busy
    def decide(
        self,
        term_id: int,
        concept_uri: str,
        outcome: str,
        curator: Actor | str,
        *,
        comment: str = "",
        scorer: str | None = None,
        score: float | None = None,
        rank: int | None = None,
        concept_label: str | None = None,
        decided_at: datetime | None = None,
        confidence: float | None = None,
    ) -> Decision:
        """Record a decision (committed before this returns) by ``curator``: a signed-in ``Actor``,
        or a typed name where the store does not require sign-in. A busy store is waited for
        (``db.store.retry``), at most ``MELO_STORE_BUSY_SECONDS``: then ``StoreBusy``."""
        if outcome not in OUTCOMES or outcome == UNDECIDED:
            raise ValueError(f"outcome must be one of {', '.join(o for o in OUTCOMES if o != UNDECIDED)}")
        if isinstance(curator, str) and not curator.strip():
            raise ValueError("a decision needs a curator")
        if not concept_uri.strip():
            raise ValueError("a decision needs a concept URI")
        with self.write() as s:
            name = acting_as(s, curator, self.sign_in_required)
            term = s.get(TermRow, term_id)
            if term is None:
                raise KeyError(f"no term with id {term_id}")
            row = DecisionRow(
                term_id=term_id,
                concept_uri=concept_uri.strip(),
                outcome=outcome,
                curator=name,
                decided_at=decided_at or utcnow(),
                comment=comment,
                scorer=scorer,
                score=score,
                rank=rank,
                confidence=confidence,
                concept_label=concept_label,
                esco_version=self._target_version(s, term),
            )
            s.add(row)
            s.flush()
            return decision_record(row, term, term.scheme.name)

    @staticmethod
    def _target_version(s: Session, term: TermRow) -> str | None:
        """Version of the taxonomy the term's scheme targets now (None: no target)."""
        taxonomy_id = term.scheme.taxonomy_id
        if taxonomy_id is None:
            return None
        taxonomy = s.get(TaxonomyRow, taxonomy_id)
        return None if taxonomy is None else taxonomy.version

    def history(self, term_id: int, concept_uri: str | None = None) -> list[Decision]:
        """Every decision on a term (or on one of its concepts), oldest first."""
        with self.read() as s:
            term = s.get(TermRow, term_id)
            if term is None:
                raise KeyError(f"no term with id {term_id}")
            query = select(DecisionRow).where(DecisionRow.term_id == term_id)
            if concept_uri is not None:
                query = query.where(DecisionRow.concept_uri == concept_uri)
            return [decision_record(r, term, term.scheme.name) for r in s.scalars(query.order_by(DecisionRow.id))]

    def current(self, term_id: int) -> list[Decision]:
        """The current decision on each concept of a term (undone-to-nothing pairs left out)."""
        latest: dict[str, Decision] = {}
        for decision in self.history(term_id):
            latest[decision.concept_uri] = decision
        return sorted((d for d in latest.values() if d.outcome != UNDECIDED), key=lambda d: (d.concept_uri, d.id))

    @retried_when_busy
    def undo(self, term_id: int, concept_uri: str, curator: Actor | str, comment: str = "") -> Decision | None:
        """Take back the latest decision on a pair by appending one that restores the state
        before it (``undecided`` when there was none). Repeated undos walk further back.
        None when there is nothing left to undo; ``NotAllowed`` when that decision is someone
        else's (a curator changes another's mapping by deciding anew, not by undoing it)."""
        with self.write() as s:
            name = acting_as(s, curator, self.sign_in_required)
            term = s.get(TermRow, term_id)
            if term is None:
                raise KeyError(f"no term with id {term_id}")
            return self._undo(s, term, concept_uri, name, comment)

    def _undo(self, s: Session, term: TermRow, concept_uri: str, curator: str, comment: str) -> Decision | None:
        stack = pair_stack(s, term.id, concept_uri)
        if not stack:
            return None
        undone = stack.pop()
        if undone.curator != curator:
            raise NotAllowed(f"decision {undone.id} is {undone.curator}'s: only they can undo it")
        restored = stack[-1] if stack else None
        row = DecisionRow(
            term_id=term.id,
            concept_uri=concept_uri,
            outcome=restored.outcome if restored else UNDECIDED,
            curator=curator,
            decided_at=utcnow(),
            comment=comment or f"undo of decision {undone.id}",
            scorer=restored.scorer if restored else None,
            score=restored.score if restored else None,
            rank=restored.rank if restored else None,
            confidence=restored.confidence if restored else None,
            concept_label=restored.concept_label if restored else None,
            undoes_id=undone.id,
            # The state restored keeps the version it was decided against.
            esco_version=restored.esco_version if restored else self._target_version(s, term),
            # ... and its provenance: an imported state stays imported (its importer may not review it).
            imported_by=restored.imported_by if restored else None,
            original_author=restored.original_author if restored else None,
            original_date=restored.original_date if restored else None,
            proposed_by=restored.proposed_by if restored else None,
        )
        s.add(row)
        s.flush()
        return decision_record(row, term, term.scheme.name)

    @retried_when_busy
    def undo_last(self, curator: Actor | str, scheme: str | None = None) -> Decision | None:
        """Undo the curator's most recent decision that is still in force."""
        with self.write() as s:
            name = acting_as(s, curator, self.sign_in_required)
            query = select(DecisionRow).where(DecisionRow.curator == name, DecisionRow.undoes_id.is_(None))
            if scheme is not None:
                query = query.join(TermRow, TermRow.id == DecisionRow.term_id).where(
                    TermRow.scheme_id == self._scheme_row(s, scheme).id
                )
            for candidate in s.scalars(query.order_by(DecisionRow.id.desc())):
                stack = pair_stack(s, candidate.term_id, candidate.concept_uri)
                if stack and stack[-1].id == candidate.id:
                    term = s.get(TermRow, candidate.term_id)
                    assert term is not None
                    return self._undo(s, term, candidate.concept_uri, name, "")
            return None
