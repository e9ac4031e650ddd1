"""Source schemes and their terms: the curation queue (status todo, returned, unsure or done, from
the current decisions and their reviews) and the linker's suggestions per term."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import case, func, select

from db.models import MATCH_OUTCOMES, UNSURE, DecisionRow, ReviewRow, SchemeRow, SuggestionRow, TermRow, utcnow
from db.store.base import StoreBase, like_pattern
from db.store.records import Scheme, Suggestion, Term

# returned: a reviewer rejected one of the term's current mappings; it is the curator's again.
STATUSES = ("todo", "done", "unsure", "returned")


class TermQueries(StoreBase):
    """Schemes, terms, the queue and suggestions."""

    def schemes(self) -> list[Scheme]:
        with self.read() as s:
            counts: dict[int, Counter[str]] = defaultdict(Counter)
            # Grouping by a column of a subquery, not by the CASE itself: PostgreSQL does not see
            # two CASE expressions with separately bound parameters as the same expression.
            statuses = self._statuses()
            query = select(statuses.c.scheme_id, statuses.c.status, func.count()).group_by(
                statuses.c.scheme_id, statuses.c.status
            )
            for scheme_id, state, n in s.execute(query):
                counts[scheme_id][state] += n
            return [
                Scheme(
                    id=r.id,
                    name=r.name,
                    kind=r.kind,
                    language=r.language,
                    base_uri=r.base_uri,
                    terms=sum(counts[r.id].values()),
                    todo=counts[r.id]["todo"],
                    done=counts[r.id]["done"],
                    unsure=counts[r.id]["unsure"],
                )
                for r in s.scalars(select(SchemeRow).order_by(SchemeRow.name))
            ]

    def scheme(self, name: str) -> Scheme | None:
        return next((s for s in self.schemes() if s.name == name), None)

    def _term_flags(self, scheme_id: int | None = None, term_id: int | None = None) -> Any:
        """Per term: whether a current decision is a match, whether one is unsure, and whether a
        reviewer rejected a current match (its latest review)."""
        latest = self._latest_ids(scheme_id, term_id)
        latest_reviews = select(func.max(ReviewRow.id)).group_by(ReviewRow.decision_id)
        rejected = select(ReviewRow.decision_id).where(
            ReviewRow.id.in_(latest_reviews), ReviewRow.verdict == "rejected"
        )
        current_sq = (
            select(
                DecisionRow.term_id,
                DecisionRow.outcome,
                case((DecisionRow.outcome.in_(MATCH_OUTCOMES) & DecisionRow.id.in_(rejected), 1), else_=0).label(
                    "returned"
                ),
            )
            .where(DecisionRow.id.in_(latest))
            .subquery()
        )
        return (
            select(
                current_sq.c.term_id,
                func.max(case((current_sq.c.outcome.in_(MATCH_OUTCOMES), 1), else_=0)).label("matched"),
                func.max(case((current_sq.c.outcome == UNSURE, 1), else_=0)).label("unsure"),
                func.max(current_sq.c.returned).label("returned"),
            )
            .group_by(current_sq.c.term_id)
            .subquery()
        )

    @staticmethod
    def _status_of(flags: Any) -> Any:
        # returned wins (a reviewer sent it back), then unsure (it needs a second look), then any
        # match makes it done.
        return case(
            (flags.c.returned == 1, "returned"),
            (flags.c.unsure == 1, "unsure"),
            (flags.c.matched == 1, "done"),
            else_="todo",
        )

    def _statuses(self, search: str | None = None, scheme_id: int | None = None) -> Any:
        """Subquery: term_id, scheme_id and status of every term (matching ``search``)."""
        flags = self._term_flags(scheme_id)
        query = select(
            TermRow.id.label("term_id"), TermRow.scheme_id, self._status_of(flags).label("status")
        ).outerjoin(flags, flags.c.term_id == TermRow.id)
        if search and search.strip():
            query = query.where(TermRow.search_text.like(like_pattern(search.strip()), escape="\\"))
        return query.subquery()

    def queue(
        self,
        scheme: str,
        status: str | None = "todo",
        search: str | None = None,
        limit: int | None = 50,
        offset: int = 0,
    ) -> list[Term]:
        """Terms of a scheme in import order, filtered by status (todo, done, unsure, returned;
        None for all) and by a case-insensitive substring of code, label or description."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)} or None")
        if (limit is not None and limit < 0) or offset < 0:  # SQLite reads a negative LIMIT as none
            raise ValueError(f"limit (or None) and offset must be 0 or more, got {limit} and {offset}")
        with self.read() as s:
            scheme_row = self._scheme_row(s, scheme)
            flags = self._term_flags(scheme_row.id)
            state = self._status_of(flags).label("status")
            query = (
                select(TermRow, state)
                .outerjoin(flags, flags.c.term_id == TermRow.id)
                .where(TermRow.scheme_id == scheme_row.id)
                .order_by(TermRow.id)
            )
            if status is not None:
                query = query.where(self._status_of(flags) == status)
            if search and search.strip():
                query = query.where(TermRow.search_text.like(like_pattern(search.strip()), escape="\\"))
            if limit is not None:
                query = query.limit(limit)
            query = query.offset(offset)
            return [
                Term(t.id, scheme, t.code, t.uri, t.label, t.description, t.language, st) for t, st in s.execute(query)
            ]

    def queue_counts(self, scheme: str, search: str | None = None) -> dict[str, int]:
        """How many terms of the scheme are todo, done, unsure and returned (after the text search)."""
        with self.read() as s:
            scheme_row = self._scheme_row(s, scheme)
            statuses = self._statuses(search, scheme_row.id)
            query = (
                select(statuses.c.status, func.count())
                .where(statuses.c.scheme_id == scheme_row.id)
                .group_by(statuses.c.status)
            )
            counts = dict.fromkeys(STATUSES, 0)
            counts.update(dict(s.execute(query).all()))
            return counts

    def terms(self, scheme: str) -> list[Term]:
        return self.queue(scheme, status=None, limit=None)

    def term(self, scheme: str, code: str) -> Term | None:
        with self.read() as s:
            scheme_row = self._scheme_row(s, scheme)
            row = s.scalars(select(TermRow).where(TermRow.scheme_id == scheme_row.id, TermRow.code == code)).first()
            term_id = row.id if row else None
        if term_id is None:
            return None
        return self.term_by_id(term_id)

    def term_by_id(self, term_id: int) -> Term:
        with self.read() as s:
            row = s.get(TermRow, term_id)
            if row is None:
                raise KeyError(f"no term with id {term_id}")
            flags = self._term_flags(term_id=term_id)
            state = s.execute(
                select(self._status_of(flags))
                .select_from(TermRow)
                .outerjoin(flags, flags.c.term_id == TermRow.id)
                .where(TermRow.id == term_id)
            ).scalar_one()
            return Term(row.id, row.scheme.name, row.code, row.uri, row.label, row.description, row.language, state)

    def save_suggestions(self, term_id: int, scorer: str,
                         candidates: Sequence[tuple[str, float] | tuple[str, float, float | None]],
                         confidence_offset: float | None = None) -> None:  # fmt: skip
        """Replace the scorer's suggestions for a term with ``candidates`` (best first): (concept URI,
        score) or (concept URI, score, calibrated probability); ``confidence_offset``: the scheme's
        logit shift those probabilities hold (``melo_core.evaluation.calibration.scheme_offset``)."""
        with self.write() as s:
            if s.get(TermRow, term_id) is None:
                raise KeyError(f"no term with id {term_id}")
            for old in s.scalars(
                select(SuggestionRow).where(SuggestionRow.term_id == term_id, SuggestionRow.scorer == scorer)
            ):
                s.delete(old)
            s.flush()
            now = utcnow()
            seen: set[str] = set()
            for rank, (uri, score, *calibrated) in enumerate(candidates, start=1):
                if uri in seen:
                    continue
                seen.add(uri)
                confidence = calibrated[0] if calibrated and calibrated[0] is not None else None
                s.add(
                    SuggestionRow(term_id=term_id, concept_uri=uri, scorer=scorer, score=float(score), rank=rank,
                                  created_at=now, confidence=None if confidence is None else float(confidence),
                                  confidence_offset=None if confidence is None or not confidence_offset
                                  else float(confidence_offset))
                )  # fmt: skip

    def suggestions(self, term_id: int, scorer: str | None = None) -> list[Suggestion]:
        with self.read() as s:
            query = select(SuggestionRow).where(SuggestionRow.term_id == term_id)
            if scorer is not None:
                query = query.where(SuggestionRow.scorer == scorer)
            query = query.order_by(SuggestionRow.scorer, SuggestionRow.rank)
            return [_suggestion(r) for r in s.scalars(query)]

    def top_suggestions(self, scheme: str, max_rank: int = 1) -> list[Suggestion]:
        """The stored suggestions of every term of a scheme up to ``max_rank`` (each scorer's best by
        default), by term (import order), scorer and rank."""
        with self.read() as s:
            scheme_id = self._scheme_row(s, scheme).id
            query = (
                select(SuggestionRow)
                .join(TermRow, TermRow.id == SuggestionRow.term_id)
                .where(TermRow.scheme_id == scheme_id, SuggestionRow.rank <= max_rank)
                .order_by(TermRow.id, SuggestionRow.scorer, SuggestionRow.rank)
            )
            return [_suggestion(r) for r in s.scalars(query)]


def _suggestion(row: SuggestionRow) -> Suggestion:
    return Suggestion(row.term_id, row.concept_uri, row.scorer, row.score, row.rank, row.created_at, row.confidence,
                      row.confidence_offset)  # fmt: skip
