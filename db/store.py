"""The crosswalk store: what the CLI and the Streamlit pages call.

``Store(url)`` opens any SQLAlchemy URL (default ``MELO_DB_URL``, else the SQLite file ``melo.db``
in the project root) and upgrades the schema to the latest Alembic revision. SQLite runs with
WAL, foreign keys on and a busy timeout, so several app sessions can share one file; writes take
the write lock up front (``BEGIN IMMEDIATE``) so a read-then-write never fails half-way.

Every method opens and closes its own transaction and returns plain frozen dataclasses, so
callers never hold ORM objects or sessions. A decision is committed before ``decide`` returns.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, case, create_engine, event, func, select, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from db.formats import search_fold
from db.models import (
    MATCH_OUTCOMES,
    OUTCOMES,
    REJECTED,
    UNDECIDED,
    UNSURE,
    ConceptRow,
    DecisionRow,
    LabelRow,
    SchemeRow,
    SuggestionRow,
    TaxonomyRow,
    TermRow,
    utcnow,
)
from melo_core import config
from melo_core.errors import MeloInputError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
STATUSES = ("todo", "done", "unsure")
IMPORT_CURATOR_PREFIX = "import:"
_CHUNK = 500  # bound parameters per IN (...) list


@dataclass(frozen=True)
class Scheme:
    id: int
    name: str
    kind: str
    language: str | None
    base_uri: str | None
    terms: int
    todo: int
    done: int
    unsure: int


@dataclass(frozen=True)
class TaxonomyInfo:
    id: int
    name: str
    version: str
    source: str
    imported_at: datetime
    concepts: int


@dataclass(frozen=True)
class Term:
    id: int
    scheme: str
    code: str
    uri: str
    label: str
    description: str
    language: str | None
    status: str  # todo, done or unsure


@dataclass(frozen=True)
class Decision:
    id: int
    term_id: int
    scheme: str
    term_code: str
    term_uri: str
    term_label: str
    concept_uri: str
    outcome: str
    curator: str
    decided_at: datetime
    comment: str
    scorer: str | None
    score: float | None
    rank: int | None
    # Label shown to the curator, or (in crosswalk()) the taxonomy's label when none was stored.
    concept_label: str | None
    undoes_id: int | None


_LABEL_FIELD = [f.name for f in dataclass_fields(Decision)].index("concept_label")


@dataclass(frozen=True)
class Suggestion:
    term_id: int
    concept_uri: str
    scorer: str
    score: float
    rank: int


@dataclass(frozen=True)
class ConsistencyWarning:
    kind: str  # several-exact, concept-many-exact, accepted-after-rejected
    scheme: str
    message: str
    term_codes: tuple[str, ...]
    concept_uris: tuple[str, ...]


@dataclass(frozen=True)
class Agreement:
    """Cohen's kappa between two curators over the (term, concept) pairs both decided."""

    curator_a: str
    curator_b: str
    items: int
    agreed: int
    observed: float | None
    expected: float | None
    kappa: float | None  # None when undefined: no common items, or chance agreement is 1


@dataclass(frozen=True)
class HourCount:
    hour: datetime
    curator: str
    decisions: int


@dataclass(frozen=True)
class LabelMatch:
    """A concept found by one of its labels (``find_concepts``)."""

    uri: str
    label: str  # the label that matched
    language: str
    label_kind: str  # preferred, alternative or hidden
    concept_kind: str
    isco_code: str | None


@dataclass(frozen=True)
class ConceptInfo:
    uri: str
    kind: str
    isco_code: str | None
    description: str
    taxonomy: str
    labels: dict[str, dict[str, list[str]]]  # language -> kind -> texts in order


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's implicit transactions skip
    # DDL and SELECTs), then switch on what the store relies on.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=15000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    immediate = connection.get_execution_options().get("melo_write", False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def create_store_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
        engine = create_engine(parsed)
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise MeloInputError(f"cannot open the store {url!r}: {exc}") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revisions() -> set[str]:
    return set(ScriptDirectory.from_config(_alembic_config()).get_heads())


def upgrade_schema(engine: Engine) -> None:
    """Bring the schema to the latest revision; a no-op (one SELECT) when it already is."""
    heads = head_revisions()
    with engine.connect() as connection:
        if set(MigrationContext.configure(connection).get_current_heads()) == heads:
            return
    with engine.execution_options(melo_write=True).begin() as connection:
        if connection.dialect.name == "postgresql":
            # Two processes opening a new store at once: one migrates, the other waits.
            connection.execute(text("SELECT pg_advisory_xact_lock(4201837)"))
        if set(MigrationContext.configure(connection).get_current_heads()) == heads:
            return
        command.upgrade(_alembic_config(connection), "head")


def current_revisions(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        return set(MigrationContext.configure(connection).get_current_heads())


def _decision(row: DecisionRow, term: TermRow, scheme: str) -> Decision:
    return Decision(
        id=row.id,
        term_id=row.term_id,
        scheme=scheme,
        term_code=term.code,
        term_uri=term.uri,
        term_label=term.label,
        concept_uri=row.concept_uri,
        outcome=row.outcome,
        curator=row.curator,
        decided_at=row.decided_at,
        comment=row.comment,
        scorer=row.scorer,
        score=row.score,
        rank=row.rank,
        concept_label=row.concept_label,
        undoes_id=row.undoes_id,
    )


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _like_escape(folded: str) -> str:
    return re.sub(r"([\\%_])", r"\\\1", folded)


def _like_pattern(query: str) -> str:
    return f"%{_like_escape(search_fold(query))}%"


def search_text(code: str, label: str, description: str) -> str:
    return search_fold("\n".join((code, label, description)))


def _stack(history: Iterable[DecisionRow]) -> list[DecisionRow]:
    """Replay a pair's decisions in order: a decision pushes a state, an undo pops one."""
    stack: list[DecisionRow] = []
    for row in history:
        if row.undoes_id is None:
            stack.append(row)
        elif stack and stack[-1].id == row.undoes_id:
            stack.pop()
    return stack


class Store:
    """The crosswalk store at ``url`` (default: ``MELO_DB_URL`` or ``melo.db``)."""

    def __init__(self, url: str | None = None, *, upgrade: bool = True):
        self.url = url or config.database_url()
        self.engine = create_store_engine(self.url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._write_sessions = sessionmaker(self.engine.execution_options(melo_write=True), expire_on_commit=False)
        if upgrade:
            try:
                upgrade_schema(self.engine)
            except OperationalError as exc:
                self.engine.dispose()
                raise MeloInputError(f"cannot open the store {self.display_url}: {exc.orig}") from None

    @property
    def display_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One write transaction: committed when the block ends, rolled back on any error."""
        with self._write_sessions() as session, session.begin():
            yield session

    # -- taxonomies and concepts ---------------------------------------------------------------

    def taxonomies(self) -> list[TaxonomyInfo]:
        with self.read() as s:
            counts = dict(
                s.execute(select(ConceptRow.taxonomy_id, func.count()).group_by(ConceptRow.taxonomy_id)).all()
            )
            rows = s.scalars(select(TaxonomyRow).order_by(TaxonomyRow.id)).all()
            return [TaxonomyInfo(t.id, t.name, t.version, t.source, t.imported_at, counts.get(t.id, 0)) for t in rows]

    def concept_labels(self, uris: Iterable[str], language: str | None = None) -> dict[str, str]:
        """Preferred label of each concept in ``language``, else English, else the first language
        (alphabetically); among taxonomies with that language, the most recently imported."""
        with self.read() as s:
            return self._concept_labels(s, uris, language)

    @staticmethod
    def _concept_labels(session: Session, uris: Iterable[str], language: str | None) -> dict[str, str]:
        best: dict[str, tuple[tuple[int, int, str], str]] = {}

        def fetch(wanted: Sequence[str], languages: Sequence[str] | None) -> None:
            for chunk in _chunks(sorted(wanted)):
                query = (
                    select(ConceptRow.uri, ConceptRow.taxonomy_id, LabelRow.language, LabelRow.text)
                    .join(LabelRow, LabelRow.concept_id == ConceptRow.id)
                    .where(LabelRow.kind == "preferred", ConceptRow.uri.in_(chunk))
                )
                if languages is not None:
                    query = query.where(LabelRow.language.in_(languages))
                for uri, taxonomy_id, lang, label in session.execute(query):
                    rank = (0 if lang == language else 1 if lang == "en" else 2, -taxonomy_id, lang)
                    if uri not in best or rank < best[uri][0]:
                        best[uri] = (rank, label)

        wanted = set(uris)
        # The wanted languages first; all languages (21 in the MELO union) only for the rest.
        fetch(sorted(wanted), sorted({language or "en", "en"}))
        rest = wanted - best.keys()
        if rest:
            fetch(sorted(rest), None)
        return {uri: label for uri, (_, label) in best.items()}

    def find_concepts(self, text: str, limit: int = 20, languages: Iterable[str] | None = None) -> list[LabelMatch]:
        """Concepts having a label that contains ``text`` (any language, or ``languages``), one
        match per concept, best first: the label equal to the text, then labels starting with
        it, then shorter labels. Case- and accent-insensitive on every backend (``search_fold``:
        ``backer`` finds ``Bäcker``)."""
        needle = search_fold(text.strip())
        if not needle:
            return []
        folded = LabelRow.search_text
        escaped = _like_escape(needle)
        closeness = case((folded == needle, 0), (folded.like(f"{escaped}%", escape="\\"), 1), else_=2)
        query = (
            select(
                ConceptRow.uri, LabelRow.text, LabelRow.language, LabelRow.kind, ConceptRow.kind, ConceptRow.isco_code
            )
            .join(LabelRow, LabelRow.concept_id == ConceptRow.id)
            .where(folded.like(f"%{escaped}%", escape="\\"))
            .order_by(closeness, func.length(LabelRow.text), LabelRow.text, ConceptRow.uri)
            .limit(limit * 10)
        )
        if languages is not None:
            query = query.where(LabelRow.language.in_(sorted(set(languages))))
        found: dict[str, LabelMatch] = {}
        with self.read() as s:
            for row in s.execute(query):
                if row[0] not in found:
                    found[row[0]] = LabelMatch(*row)
        return list(found.values())[:limit]

    def concept(self, uri: str) -> ConceptInfo | None:
        """A concept as the most recently imported taxonomy that has it describes it."""
        with self.read() as s:
            row = s.scalars(
                select(ConceptRow).where(ConceptRow.uri == uri).order_by(ConceptRow.taxonomy_id.desc()).limit(1)
            ).first()
            if row is None:
                return None
            labels: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
            query = (
                select(LabelRow)
                .where(LabelRow.concept_id == row.id)
                .order_by(LabelRow.language, LabelRow.kind, LabelRow.position)
            )
            for label in s.scalars(query):
                labels[label.language][label.kind].append(label.text)
            taxonomy = s.get(TaxonomyRow, row.taxonomy_id)
            assert taxonomy is not None
            return ConceptInfo(
                uri=row.uri,
                kind=row.kind,
                isco_code=row.isco_code,
                description=row.description,
                taxonomy=f"{taxonomy.name} {taxonomy.version}",
                labels={lang: dict(kinds) for lang, kinds in labels.items()},
            )

    # -- schemes and terms ---------------------------------------------------------------------

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

    @staticmethod
    def _scheme_row(session: Session, name: str) -> SchemeRow:
        row = session.scalars(select(SchemeRow).where(SchemeRow.name == name)).first()
        if row is None:
            raise KeyError(f"no source scheme named {name!r}")
        return row

    @staticmethod
    def _latest_ids(scheme_id: int | None = None, term_id: int | None = None) -> Any:
        """ids of the current decision of every (term, concept) pair (of a scheme, of a term)."""
        query = select(func.max(DecisionRow.id)).group_by(DecisionRow.term_id, DecisionRow.concept_uri)
        if scheme_id is not None:
            query = query.where(DecisionRow.term_id.in_(select(TermRow.id).where(TermRow.scheme_id == scheme_id)))
        if term_id is not None:
            query = query.where(DecisionRow.term_id == term_id)
        return query

    def _term_flags(self, scheme_id: int | None = None, term_id: int | None = None) -> Any:
        """Per term: whether a current decision is a match, and whether one is unsure."""
        latest = self._latest_ids(scheme_id, term_id)
        current_sq = select(DecisionRow.term_id, DecisionRow.outcome).where(DecisionRow.id.in_(latest)).subquery()
        return (
            select(
                current_sq.c.term_id,
                func.max(case((current_sq.c.outcome.in_(MATCH_OUTCOMES), 1), else_=0)).label("matched"),
                func.max(case((current_sq.c.outcome == UNSURE, 1), else_=0)).label("unsure"),
            )
            .group_by(current_sq.c.term_id)
            .subquery()
        )

    @staticmethod
    def _status_of(flags: Any) -> Any:
        # unsure wins (the term needs a second look), then any match makes it done.
        return case((flags.c.unsure == 1, "unsure"), (flags.c.matched == 1, "done"), else_="todo")

    def _statuses(self, search: str | None = None, scheme_id: int | None = None) -> Any:
        """Subquery: term_id, scheme_id and status of every term (matching ``search``)."""
        flags = self._term_flags(scheme_id)
        query = select(
            TermRow.id.label("term_id"), TermRow.scheme_id, self._status_of(flags).label("status")
        ).outerjoin(flags, flags.c.term_id == TermRow.id)
        if search and search.strip():
            query = query.where(TermRow.search_text.like(_like_pattern(search.strip()), escape="\\"))
        return query.subquery()

    def queue(
        self,
        scheme: str,
        status: str | None = "todo",
        search: str | None = None,
        limit: int | None = 50,
        offset: int = 0,
    ) -> list[Term]:
        """Terms of a scheme in import order, filtered by status (todo, done, unsure; None for
        all) and by a case-insensitive substring of code, label or description."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)} or None")
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
                query = query.where(TermRow.search_text.like(_like_pattern(search.strip()), escape="\\"))
            if limit is not None:
                query = query.limit(limit)
            query = query.offset(offset)
            return [
                Term(t.id, scheme, t.code, t.uri, t.label, t.description, t.language, st) for t, st in s.execute(query)
            ]

    def queue_counts(self, scheme: str, search: str | None = None) -> dict[str, int]:
        """How many terms of the scheme are todo, done and unsure (after the text search)."""
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

    # -- suggestions ---------------------------------------------------------------------------

    def save_suggestions(self, term_id: int, scorer: str, candidates: Sequence[tuple[str, float]]) -> None:
        """Replace the scorer's suggestions for a term with ``candidates`` (best first)."""
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
            for rank, (uri, score) in enumerate(candidates, start=1):
                if uri in seen:
                    continue
                seen.add(uri)
                s.add(
                    SuggestionRow(
                        term_id=term_id, concept_uri=uri, scorer=scorer, score=float(score), rank=rank, created_at=now
                    )
                )

    def suggestions(self, term_id: int, scorer: str | None = None) -> list[Suggestion]:
        with self.read() as s:
            query = select(SuggestionRow).where(SuggestionRow.term_id == term_id)
            if scorer is not None:
                query = query.where(SuggestionRow.scorer == scorer)
            query = query.order_by(SuggestionRow.scorer, SuggestionRow.rank)
            return [Suggestion(r.term_id, r.concept_uri, r.scorer, r.score, r.rank) for r in s.scalars(query)]

    # -- decisions -----------------------------------------------------------------------------

    def decide(
        self,
        term_id: int,
        concept_uri: str,
        outcome: str,
        curator: str,
        *,
        comment: str = "",
        scorer: str | None = None,
        score: float | None = None,
        rank: int | None = None,
        concept_label: str | None = None,
        decided_at: datetime | None = None,
    ) -> Decision:
        """Record a decision (committed before this returns)."""
        if outcome not in OUTCOMES or outcome == UNDECIDED:
            raise ValueError(f"outcome must be one of {', '.join(o for o in OUTCOMES if o != UNDECIDED)}")
        if not curator.strip():
            raise ValueError("a decision needs a curator")
        if not concept_uri.strip():
            raise ValueError("a decision needs a concept URI")
        with self.write() as s:
            term = s.get(TermRow, term_id)
            if term is None:
                raise KeyError(f"no term with id {term_id}")
            row = DecisionRow(
                term_id=term_id,
                concept_uri=concept_uri.strip(),
                outcome=outcome,
                curator=curator.strip(),
                decided_at=decided_at or utcnow(),
                comment=comment,
                scorer=scorer,
                score=score,
                rank=rank,
                concept_label=concept_label,
            )
            s.add(row)
            s.flush()
            return _decision(row, term, term.scheme.name)

    def history(self, term_id: int, concept_uri: str | None = None) -> list[Decision]:
        """Every decision on a term (or on one of its concepts), oldest first."""
        with self.read() as s:
            term = s.get(TermRow, term_id)
            if term is None:
                raise KeyError(f"no term with id {term_id}")
            query = select(DecisionRow).where(DecisionRow.term_id == term_id)
            if concept_uri is not None:
                query = query.where(DecisionRow.concept_uri == concept_uri)
            return [_decision(r, term, term.scheme.name) for r in s.scalars(query.order_by(DecisionRow.id))]

    def current(self, term_id: int) -> list[Decision]:
        """The current decision on each concept of a term (undone-to-nothing pairs left out)."""
        latest: dict[str, Decision] = {}
        for decision in self.history(term_id):
            latest[decision.concept_uri] = decision
        return sorted((d for d in latest.values() if d.outcome != UNDECIDED), key=lambda d: (d.concept_uri, d.id))

    def undo(self, term_id: int, concept_uri: str, curator: str, comment: str = "") -> Decision | None:
        """Take back the latest decision on a pair by appending one that restores the state
        before it (``undecided`` when there was none). Repeated undos walk further back.
        None when there is nothing left to undo."""
        with self.write() as s:
            term = s.get(TermRow, term_id)
            if term is None:
                raise KeyError(f"no term with id {term_id}")
            return self._undo(s, term, concept_uri, curator, comment)

    def _undo(self, s: Session, term: TermRow, concept_uri: str, curator: str, comment: str) -> Decision | None:
        history = s.scalars(
            select(DecisionRow)
            .where(DecisionRow.term_id == term.id, DecisionRow.concept_uri == concept_uri)
            .order_by(DecisionRow.id)
        ).all()
        stack = _stack(history)
        if not stack:
            return None
        undone = stack.pop()
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
            concept_label=restored.concept_label if restored else None,
            undoes_id=undone.id,
        )
        s.add(row)
        s.flush()
        return _decision(row, term, term.scheme.name)

    def undo_last(self, curator: str, scheme: str | None = None) -> Decision | None:
        """Undo the curator's most recent decision that is still in force."""
        with self.write() as s:
            query = select(DecisionRow).where(DecisionRow.curator == curator, DecisionRow.undoes_id.is_(None))
            if scheme is not None:
                query = query.join(TermRow, TermRow.id == DecisionRow.term_id).where(
                    TermRow.scheme_id == self._scheme_row(s, scheme).id
                )
            for candidate in s.scalars(query.order_by(DecisionRow.id.desc())):
                history = s.scalars(
                    select(DecisionRow)
                    .where(DecisionRow.term_id == candidate.term_id, DecisionRow.concept_uri == candidate.concept_uri)
                    .order_by(DecisionRow.id)
                ).all()
                stack = _stack(history)
                if stack and stack[-1].id == candidate.id:
                    term = s.get(TermRow, candidate.term_id)
                    assert term is not None
                    return self._undo(s, term, candidate.concept_uri, curator, "")
            return None

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
                   d.decided_at, d.comment, d.scorer, d.score, d.rank, d.concept_label, d.undoes_id)  # fmt: skip
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
            labels = {lang: self._concept_labels(s, uris, lang) for lang, uris in missing.items()}
        result = []
        for row in rows:
            *fields, language = row
            if row.concept_label is None:
                fields[_LABEL_FIELD] = labels[label_language or language].get(row.concept_uri)
            result.append(Decision(*fields))
        return result

    # -- quality -------------------------------------------------------------------------------

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
        decisions restore someone's state; they are nobody's judgement)."""
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
            for chunk in _chunks(term_ids):
                query = select(DecisionRow).where(DecisionRow.term_id.in_(chunk)).order_by(DecisionRow.id)
                for row in s.scalars(query):
                    if (row.term_id, row.concept_uri) in wanted:
                        history[(row.term_id, row.concept_uri)].append(row)
        a: dict[tuple[int, str], str] = {}
        b: dict[tuple[int, str], str] = {}
        for pair, rows in history.items():
            for row in _stack(rows):  # oldest first: a later judgement overwrites
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
        with self.read() as s:
            query = select(DecisionRow.curator).distinct()
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
