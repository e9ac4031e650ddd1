"""Review of the current crosswalk: a reviewer confirms or rejects a curator's decision; comments on
any decision; conflicts between curators. Reviews and comments are append-only tables of their
own, so decisions are never changed: a mapping's review status is the latest review of its
current decision, and a new decision on the pair makes it "proposed" again."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.models import MATCH_OUTCOMES, UNDECIDED, VERDICTS, CommentRow, DecisionRow, ReviewRow, TermRow, utcnow
from db.store.accounts import NotAllowed, acting_as
from db.store.base import chunks
from db.store.crosswalk import CrosswalkQueries
from db.store.decisions import pair_stack, replay
from db.store.records import Actor, Comment, Review, ReviewItem
from db.store.retry import retried_when_busy

PROPOSED = "proposed"
CONFLICTING = "conflicting"
# What the review queue filters by: a review status, or conflicting (whatever the status).
REVIEW_FILTERS = (PROPOSED, CONFLICTING, "confirmed", "rejected")


def select_all(items: Iterable[ReviewItem], include_conflicting: bool = False) -> list[ReviewItem]:
    """What "select all" selects of the review queue's ``items``: the conflicting ones only when
    asked, since confirming one side of a disagreement in bulk settles it unseen."""
    return [i for i in items if include_conflicting or not i.conflict]


def _review(row: ReviewRow) -> Review:
    return Review(row.id, row.decision_id, row.reviewer, row.verdict, row.reviewed_at, row.comment)


def _comment(row: CommentRow) -> Comment:
    return Comment(row.id, row.decision_id, row.author, row.text, row.created_at)


def _short(uri: str, label: str | None) -> str:
    return label or uri.rsplit("/", 1)[-1]


class ReviewQueries(CrosswalkQueries):
    """Reviews, comments, conflicts and the review queue."""

    @retried_when_busy
    def review(
        self, decision_ids: Sequence[int], reviewer: Actor | str, verdict: str, comment: str = ""
    ) -> list[Review]:
        """Confirm or reject decisions, all or none: each must be the current decision of its
        (term, concept) pair and neither the reviewer's own nor one she imported; a signed-in
        reviewer needs the role ``reviewer``."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}")
        if not decision_ids:
            raise ValueError("nothing to review: choose at least one decision")
        with self.write() as s:
            name = acting_as(s, reviewer, self.sign_in_required, role="reviewer")
            now = utcnow()
            added = []
            for decision_id in dict.fromkeys(decision_ids):
                row = s.get(DecisionRow, decision_id)
                if row is None:
                    raise KeyError(f"no decision with id {decision_id}")
                latest = s.scalar(
                    select(func.max(DecisionRow.id)).where(
                        DecisionRow.term_id == row.term_id, DecisionRow.concept_uri == row.concept_uri
                    )
                )
                # Messages name the mapping as the page shows it, not the decision's internal id.
                mapping = self._mapping_name(s, row)
                if latest != row.id or row.outcome == UNDECIDED:
                    raise ValueError(f"{mapping} is no longer the current decision of its pair: reload")
                # An undo restores an earlier decision: its author's judgement is what is reviewed.
                judged = self._restored(s, row) if row.undoes_id is not None else row
                for signed in (row, judged):
                    if signed.curator == name:
                        raise NotAllowed(f"{mapping} is your own decision: another reviewer reviews it")
                    if signed.imported_by == name:
                        # Whatever curator the file named: she chose to bring it in.
                        raise NotAllowed(f"{mapping} is one you imported: another reviewer reviews it")
                review = ReviewRow(decision_id=row.id, reviewer=name, verdict=verdict, reviewed_at=now,
                                   comment=comment.strip())  # fmt: skip
                s.add(review)
                added.append(review)
            s.flush()
            return [_review(r) for r in added]

    @staticmethod
    def _mapping_name(s: Session, row: DecisionRow) -> str:
        """A decision as a person reads it: “Baker” → baker."""
        term = s.get(TermRow, row.term_id)
        return f"“{term.label if term else row.term_id}” → {_short(row.concept_uri, row.concept_label)}"

    @staticmethod
    def _restored(s: Session, undo: DecisionRow) -> DecisionRow:
        """The decision the pair's current undo row restores (the undo itself when it restores none)."""
        stack = pair_stack(s, undo.term_id, undo.concept_uri)
        return stack[-1] if stack else undo

    def reviews(self, decision_id: int) -> list[Review]:
        """Every review of a decision, oldest first."""
        with self.read() as s:
            query = select(ReviewRow).where(ReviewRow.decision_id == decision_id).order_by(ReviewRow.id)
            return [_review(r) for r in s.scalars(query)]

    def latest_reviews(self, decision_ids: Iterable[int]) -> dict[int, Review]:
        """The latest review of each decision that has one."""
        ids = sorted(set(decision_ids))
        found: dict[int, Review] = {}
        with self.read() as s:
            for chunk in chunks(ids):
                query = select(ReviewRow).where(ReviewRow.decision_id.in_(chunk)).order_by(ReviewRow.id)
                for row in s.scalars(query):
                    found[row.decision_id] = _review(row)
        return found

    @retried_when_busy
    def add_comment(self, decision_id: int, author: Actor | str, text: str) -> Comment:
        """A comment on any decision, by anyone who may act."""
        if not text.strip():
            raise ValueError("an empty comment")
        with self.write() as s:
            name = acting_as(s, author, self.sign_in_required)
            if s.get(DecisionRow, decision_id) is None:
                raise KeyError(f"no decision with id {decision_id}")
            row = CommentRow(decision_id=decision_id, author=name, text=text.strip(), created_at=utcnow())
            s.add(row)
            s.flush()
            return _comment(row)

    def comments(self, decision_ids: Iterable[int]) -> list[Comment]:
        """The comments on these decisions, oldest first."""
        ids = sorted(set(decision_ids))
        found: list[Comment] = []
        with self.read() as s:
            for chunk in chunks(ids):
                found += [_comment(r) for r in s.scalars(select(CommentRow).where(CommentRow.decision_id.in_(chunk)))]
        return sorted(found, key=lambda c: c.id)

    def conflicts(self, scheme: str) -> tuple[dict[tuple[int, str], str], dict[int, str]]:
        """Where curators disagree in a scheme: pairs (term id, concept URI) whose curators' latest
        judgements (undone ones left out, as for kappa) differ in relation, and terms that
        curators matched exactly to different concepts. Values say who chose what."""
        with self.read() as s:
            history = self._scheme_history(s, self._scheme_row(s, scheme).id)
        pairs: dict[tuple[int, str], str] = {}
        exact: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        labels: dict[str, str] = {}
        for (term_id, uri), rows in history.items():
            judged: dict[str, str] = {}
            for row in replay(rows):
                if row.outcome != UNDECIDED:
                    judged[row.curator] = row.outcome
                    labels[uri] = _short(uri, row.concept_label)
            if len(set(judged.values())) > 1:
                pairs[(term_id, uri)] = " · ".join(f"{who}: {outcome}" for who, outcome in sorted(judged.items()))
            for who, outcome in judged.items():
                if outcome == "exactMatch":
                    exact[term_id][who].add(uri)
        terms: dict[int, str] = {}
        for term_id, by_curator in exact.items():
            if len({frozenset(uris) for uris in by_curator.values()}) > 1:
                terms[term_id] = "exact to different concepts: " + "; ".join(
                    f"{who} → {', '.join(sorted(labels[u] for u in uris))}" for who, uris in sorted(by_curator.items())
                )
        return pairs, terms

    @staticmethod
    def _scheme_history(s: Session, scheme_id: int) -> dict[tuple[int, str], list[DecisionRow]]:
        query = (
            select(DecisionRow)
            .join(TermRow, TermRow.id == DecisionRow.term_id)
            .where(TermRow.scheme_id == scheme_id)
            .order_by(DecisionRow.id)
        )
        history: dict[tuple[int, str], list[DecisionRow]] = defaultdict(list)
        for row in s.scalars(query):
            history[(row.term_id, row.concept_uri)].append(row)
        return history

    def review_queue(self, scheme: str, status: str | None = None) -> list[ReviewItem]:
        """The scheme's current mappings (match relations) with their review status, filtered by
        ``status``: proposed, confirmed, rejected, conflicting (any status), None for all."""
        if status is not None and status not in REVIEW_FILTERS:
            raise ValueError(f"status must be one of {', '.join(REVIEW_FILTERS)}")
        mappings = self.crosswalk(scheme, outcomes=MATCH_OUTCOMES)
        reviewed = self.latest_reviews(d.id for d in mappings)
        pairs, terms = self.conflicts(scheme)
        counts: dict[int, int] = defaultdict(int)
        for c in self.comments(d.id for d in mappings):
            counts[c.decision_id] += 1
        items = []
        for d in mappings:
            review = reviewed.get(d.id)
            notes = [n for n in (pairs.get((d.term_id, d.concept_uri)), terms.get(d.term_id)) if n]
            item = ReviewItem(
                decision=d,
                status=review.verdict if review else PROPOSED,
                reviewer=review.reviewer if review else None,
                reviewed_at=review.reviewed_at if review else None,
                conflict="; ".join(notes) or None,
                comments=counts[d.id],
            )
            if status is None or item.status == status or (status == CONFLICTING and item.conflict):
                items.append(item)
        return items

    def confirmed_ids(self, decision_ids: Iterable[int]) -> set[int]:
        """The decisions among these whose latest review confirms them."""
        return {i for i, r in self.latest_reviews(decision_ids).items() if r.verdict == "confirmed"}
