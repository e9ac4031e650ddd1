"""The current crosswalk (latest decision per term and concept) and its quality: consistency
warnings, agreement between curators, who decided and when."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from hashlib import blake2b

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.models import (
    MATCH_OUTCOMES,
    OUTCOMES,
    REJECTED,
    UNDECIDED,
    CommentRow,
    DecisionRow,
    ReviewRow,
    SchemeRow,
    TermRow,
)
from db.store.base import StoreBase, chunks
from db.store.decisions import replay
from db.store.records import LABEL_FIELD, Agreement, ConsistencyWarning, Decision, HourCount
from db.store.taxonomies import preferred_labels

IMPORT_CURATOR_PREFIX = "import:"


class CrosswalkQueries(StoreBase):
    """The current crosswalk and its consistency."""

    def crosswalk(
        self,
        scheme: str | None = None,
        outcomes: Iterable[str] | None = MATCH_OUTCOMES,
        curator: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        label_language: str | None = None,
    ) -> list[Decision]:
        """The current crosswalk: the latest decision per (term, concept), filtered by outcome
        (default: the match relations; None for every outcome but ``undecided``), by the curator
        and the time (``since`` inclusive, ``until`` exclusive) of that latest decision.

        ``concept_label`` is the label the curator was shown, else the taxonomy's preferred
        label in ``label_language`` (default: the scheme's language)."""
        wanted = set(OUTCOMES if outcomes is None else outcomes) - {UNDECIDED}
        d, t = DecisionRow, TermRow
        # Plain columns, not ORM entities: a crosswalk has thousands of rows.
        columns = (d.id, d.term_id, SchemeRow.name, t.code, t.uri, t.label, d.concept_uri, d.outcome, d.curator,
                   d.decided_at, d.comment, d.scorer, d.score, d.rank, d.concept_label, d.undoes_id,
                   d.esco_version, d.imported_by, d.original_author, d.original_date, d.proposed_by,
                   d.confidence)  # fmt: skip
        with self.read() as s:
            query = (
                select(*columns, SchemeRow.language)
                .join(TermRow, TermRow.id == DecisionRow.term_id)
                .join(SchemeRow, SchemeRow.id == TermRow.scheme_id)
                .where(DecisionRow.outcome.in_(sorted(wanted)))
                .order_by(SchemeRow.name, TermRow.id, DecisionRow.concept_uri)
            )
            scheme_id = self._scheme_row(s, scheme).id if scheme is not None else None
            query = query.where(DecisionRow.id.in_(self._latest_ids(scheme_id)))
            if scheme_id is not None:
                query = query.where(SchemeRow.id == scheme_id)
            if curator is not None:
                query = query.where(DecisionRow.curator == curator)
            if since is not None:
                query = query.where(DecisionRow.decided_at >= since)
            if until is not None:
                query = query.where(DecisionRow.decided_at < until)
            rows = s.execute(query).all()
            missing: dict[str | None, set[str]] = defaultdict(set)
            for row in rows:
                if row.concept_label is None:
                    missing[label_language or row.language].add(row.concept_uri)
            labels = {lang: preferred_labels(s, uris, lang) for lang, uris in missing.items()}
        result = []
        for row in rows:
            *fields, language = row
            if row.concept_label is None:
                fields[LABEL_FIELD] = labels[label_language or language].get(row.concept_uri)
            result.append(Decision(*fields))
        return result

    def fingerprint(self, scheme: str, reviews: bool = False) -> str:
        """What a scheme's crosswalk is read from, in a few cheap queries: equal fingerprints, equal
        reads, so a view may keep what it read until the fingerprint changes. Decisions (and, with
        ``reviews``, reviews) are append-only: their count and latest id. Terms are edited in place
        by a re-import: a digest of what is read of them. The scheme's own row names its settings
        and target taxonomy (never edited)."""
        with self.read() as s:
            row = s.scalar(select(SchemeRow).where(SchemeRow.name == scheme))
            if row is None:
                raise self.unknown_scheme(scheme)
            terms = blake2b(digest_size=16)
            query = (
                select(TermRow.id, TermRow.code, TermRow.uri, TermRow.label, TermRow.language)
                .where(TermRow.scheme_id == row.id)
                .order_by(TermRow.id)
            )
            for term in s.execute(query):
                terms.update(repr(tuple(term)).encode())
            settings = (row.id, row.name, row.language, row.base_uri, row.taxonomy_id)
            state = (settings, _appended(s, DecisionRow), _appended(s, ReviewRow) if reviews else (), terms.hexdigest())
        return repr(state)

    def discussion_fingerprint(self) -> str:
        """Reviews and comments (of every scheme): with a scheme's ``fingerprint``, what its review
        queue is read from. Kept apart so a view holding both digests the scheme's terms once."""
        with self.read() as s:
            return repr((_appended(s, ReviewRow), _appended(s, CommentRow)))

    def warnings(self, scheme: str | None = None, many: int = 3) -> list[ConsistencyWarning]:
        """Consistency warnings on the current crosswalk: a term with several exactMatch; a
        concept that ``many`` or more terms of one scheme map to exactly; a pair accepted after
        it had been rejected."""
        current = self.crosswalk(scheme, outcomes=MATCH_OUTCOMES)
        found: list[ConsistencyWarning] = []
        exact_by_term: dict[tuple[str, int], list[Decision]] = defaultdict(list)
        exact_by_concept: dict[tuple[str, str], list[Decision]] = defaultdict(list)
        for d in current:
            if d.outcome == "exactMatch":
                exact_by_term[(d.scheme, d.term_id)].append(d)
                exact_by_concept[(d.scheme, d.concept_uri)].append(d)
        for (scheme_name, _), ds in exact_by_term.items():
            if len(ds) > 1:
                found.append(
                    ConsistencyWarning(
                        "several-exact",
                        scheme_name,
                        f"{ds[0].term_code} ({ds[0].term_label}) has {len(ds)} exactMatch concepts",
                        (ds[0].term_code,),
                        tuple(d.concept_uri for d in ds),
                    )
                )
        for (scheme_name, uri), ds in sorted(exact_by_concept.items()):
            if len(ds) >= many:
                label = ds[0].concept_label or uri
                found.append(
                    ConsistencyWarning(
                        "concept-many-exact",
                        scheme_name,
                        f"{len(ds)} terms map exactly to {label}",
                        tuple(d.term_code for d in ds),
                        (uri,),
                    )
                )
        accepted = {(d.term_id, d.concept_uri): d for d in current}
        if accepted:
            with self.read() as s:
                query = (
                    select(DecisionRow.term_id, DecisionRow.concept_uri, func.max(DecisionRow.id))
                    .where(DecisionRow.outcome == REJECTED)
                    .group_by(DecisionRow.term_id, DecisionRow.concept_uri)
                )
                rejected = {(t, u): i for t, u, i in s.execute(query)}
            for key, d in accepted.items():
                if key in rejected and rejected[key] < d.id:
                    found.append(
                        ConsistencyWarning(
                            "accepted-after-rejected",
                            d.scheme,
                            f"{d.term_code} ({d.term_label}) -> {d.concept_label or d.concept_uri}: "
                            f"{d.outcome} by {d.curator} after a rejection",
                            (d.term_code,),
                            (d.concept_uri,),
                        )
                    )
        return found

    def agreement(self, curator_a: str, curator_b: str, scheme: str | None = None) -> Agreement:
        """Cohen's kappa over the (term, concept) pairs both curators decided. A curator's
        judgement on a pair is their latest decision on it that has not been undone (undo
        decisions restore someone's state; they are nobody's judgement, nor are imported ones)."""
        with self.read() as s:
            # Only pairs both touched matter, but undo needs each pair's whole history.
            pairs = select(DecisionRow.term_id, DecisionRow.concept_uri).where(
                DecisionRow.curator.in_((curator_a, curator_b))
            )
            if scheme is not None:
                pairs = pairs.join(TermRow, TermRow.id == DecisionRow.term_id).where(
                    TermRow.scheme_id == self._scheme_row(s, scheme).id
                )
            wanted = set(s.execute(pairs.distinct()).all())
            history: dict[tuple[int, str], list[DecisionRow]] = defaultdict(list)
            term_ids = sorted({t for t, _ in wanted})
            for chunk in chunks(term_ids):
                query = select(DecisionRow).where(DecisionRow.term_id.in_(chunk)).order_by(DecisionRow.id)
                for row in s.scalars(query):
                    if (row.term_id, row.concept_uri) in wanted:
                        history[(row.term_id, row.concept_uri)].append(row)
        a: dict[tuple[int, str], str] = {}
        b: dict[tuple[int, str], str] = {}
        for pair, rows in history.items():
            for row in replay(rows):  # oldest first: a later judgement overwrites
                if row.imported_by is not None:  # a file's decision, not the importer's judgement
                    continue
                if row.curator == curator_a:
                    a[pair] = row.outcome
                elif row.curator == curator_b:
                    b[pair] = row.outcome
        items = sorted(a.keys() & b.keys())
        n = len(items)
        if n == 0:
            return Agreement(curator_a, curator_b, 0, 0, None, None, None)
        agreed = sum(a[k] == b[k] for k in items)
        count_a = Counter(a[k] for k in items)
        count_b = Counter(b[k] for k in items)
        observed = agreed / n
        expected = sum(count_a[c] * count_b[c] for c in count_a) / (n * n)
        kappa = None if expected == 1 else (observed - expected) / (1 - expected)
        return Agreement(curator_a, curator_b, n, agreed, observed, expected, kappa)

    def curators(self, scheme: str | None = None, include_imports: bool = False) -> list[str]:
        """Who decided in the scheme; importers (``import:*``, and a signed-in user who only
        imported) only with ``include_imports``."""
        with self.read() as s:
            query = select(DecisionRow.curator).distinct()
            if not include_imports:
                query = query.where(DecisionRow.imported_by.is_(None))
            if scheme is not None:
                query = query.join(TermRow, TermRow.id == DecisionRow.term_id).where(
                    TermRow.scheme_id == self._scheme_row(s, scheme).id
                )
            names = sorted(s.scalars(query))
        return [n for n in names if include_imports or not n.startswith(IMPORT_CURATOR_PREFIX)]

    def decisions_per_hour(
        self,
        scheme: str | None = None,
        curator: str | None = None,
        since: datetime | None = None,
        include_imports: bool = False,
    ) -> list[HourCount]:
        """Decisions per curator and UTC hour, oldest first (bulk imports left out by default)."""
        with self.read() as s:
            query = select(DecisionRow.decided_at, DecisionRow.curator)
            if not include_imports:  # imported rows, signed-in importers' too
                query = query.where(DecisionRow.imported_by.is_(None))
            if scheme is not None:
                query = query.join(TermRow, TermRow.id == DecisionRow.term_id).where(
                    TermRow.scheme_id == self._scheme_row(s, scheme).id
                )
            if curator is not None:
                query = query.where(DecisionRow.curator == curator)
            if since is not None:
                query = query.where(DecisionRow.decided_at >= since)
            counts: Counter[tuple[datetime, str]] = Counter()
            for decided_at, who in s.execute(query):
                if not include_imports and who.startswith(IMPORT_CURATOR_PREFIX):
                    continue
                hour = decided_at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
                counts[(hour, who)] += 1
        return [HourCount(hour, who, n) for (hour, who), n in sorted(counts.items())]


def _appended(
    session: Session, table: type[DecisionRow] | type[ReviewRow] | type[CommentRow]
) -> tuple[int, int | None]:
    """An append-only table's count and latest id: the count too, as a transaction may commit a
    lower id after a higher one."""
    count, latest = session.execute(select(func.count(table.id), func.max(table.id))).one()
    return count, latest
