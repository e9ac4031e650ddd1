"""``StoreBase``: a store's engine, its transactions (``read``, ``write``), and the pieces every
group of queries shares (a scheme by name, the current decision of each pair, text search)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self

from sqlalchemy import func, select
from sqlalchemy.exc import DataError, IntegrityError, OperationalError, StatementError
from sqlalchemy.orm import Session, sessionmaker

from db.formats import search_fold
from db.models import ColumnValueError, DecisionRow, SchemeRow, TermRow
from db.store.engine import create_store_engine, store_exists, store_location, upgrade_schema
from db.store.retry import is_busy
from melo_core import config
from melo_core.errors import MeloInputError

CHUNK = 500  # bound parameters per IN (...) list


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _first_line(error: object) -> str:
    """A database's message on one line (PostgreSQL adds DETAIL and HINT lines)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


# PostgreSQL error classes of a write the database refuses (not a bug in a query): data
# exceptions, integrity, insufficient resources (disk full), program limits, a trigger's RAISE.
_REFUSED_SQLSTATES = ("22", "23", "53", "54", "P0001")


def _refused_by_the_database(error: StatementError) -> bool:
    """SQLite's disk full, constraint or trigger refusal; PostgreSQL's by its error class."""
    sqlstate = getattr(error.orig, "sqlstate", None) or ""
    return isinstance(error, (OperationalError, DataError, IntegrityError)) or sqlstate.startswith(_REFUSED_SQLSTATES)


def like_escape(folded: str) -> str:
    return re.sub(r"([\\%_])", r"\\\1", folded)


def like_pattern(query: str) -> str:
    return f"%{like_escape(search_fold(query))}%"


def search_text(code: str, label: str, description: str) -> str:
    return search_fold("\n".join((code, label, description)))


class StoreBase:
    """What every group of queries builds on: the engine at ``url`` (default: ``MELO_DB_URL`` or
    ``melo.db``), its schema upgraded on opening, and its transactions. It opens an existing
    store only, unless ``create`` (then an empty database or a missing SQLite file becomes one);
    a file or database that is not a store is refused and left as it is. With ``sign_in`` every
    write that records a person needs a signed-in ``Actor`` (``db.store.accounts``)."""

    def __init__(self, url: str | None = None, *, upgrade: bool = True, sign_in: bool = False, create: bool = False):
        self.url = url or config.database_url()
        # A shared app's store: decisions, undos, reviews and comments need a signed-in Actor.
        self.sign_in_required = sign_in
        self.engine = create_store_engine(self.url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._write_sessions = sessionmaker(self.engine.execution_options(melo_write=True), expire_on_commit=False)
        try:
            # An existing store or nothing: a mistyped path must not become a new empty store,
            # and a file that is not a store is never touched.
            if not store_exists(self.engine) and not create:
                raise MeloInputError(
                    f"no store at {store_location(self.engine)}: create one with import-taxonomy, "
                    "or --create (import-terms, import-results, users add, eval --store)"
                )
            if upgrade:
                upgrade_schema(self.engine)
        except OperationalError as exc:
            self.engine.dispose()
            raise MeloInputError(f"cannot open the store {self.display_url}: {_first_line(exc.orig)}") from None
        except BaseException:
            self.engine.dispose()
            raise

    @property
    def display_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def read(self) -> Iterator[Session]:
        try:
            with self._sessions() as session, session.begin():
                yield session
        except StatementError as exc:
            if isinstance(exc.orig, ColumnValueError):  # a lookup by a value no column can hold
                raise MeloInputError(str(exc.orig)) from None
            raise

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One write transaction: committed when the block ends, rolled back on any error. What
        the database refuses (a value too long for its column, a full disk, a constraint) stops
        with one ``MeloInputError`` line once the transaction is rolled back; a lock not granted
        in time stays a ``DBAPIError``, for ``db.store.retry`` to recognise and retry."""
        try:
            with self._write_sessions() as session, session.begin():
                yield session
        except ColumnValueError as exc:  # checked outside SQLAlchemy: PostgreSQL's COPY
            raise MeloInputError(str(exc)) from None
        except self.engine.dialect.loaded_dbapi.Error as exc:  # the driver's own, outside SQLAlchemy: COPY
            if not (getattr(exc, "sqlstate", None) or "").startswith(_REFUSED_SQLSTATES):
                raise
            raise MeloInputError(
                f"the store {self.display_url} refused the write, nothing was written: {_first_line(exc)}"
            ) from None
        except StatementError as exc:
            if isinstance(exc.orig, ColumnValueError):
                raise MeloInputError(str(exc.orig)) from None
            if not _refused_by_the_database(exc) or is_busy(exc):
                raise
            raise MeloInputError(
                f"the store {self.display_url} refused the write, nothing was written: {_first_line(exc.orig)}"
            ) from None

    # -- shared by the queries ---------------------------------------------------------------

    def unknown_scheme(self, name: str) -> MeloInputError:
        """The error for a scheme the store does not have, naming those it has."""
        with self.read() as s:
            return self._unknown_scheme(s, name)

    @staticmethod
    def _unknown_scheme(session: Session, name: str) -> MeloInputError:
        known = ", ".join(session.scalars(select(SchemeRow.name).order_by(SchemeRow.name))) or "none yet"
        return MeloInputError(f"no source scheme {name!r} in the store (schemes: {known})")

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
