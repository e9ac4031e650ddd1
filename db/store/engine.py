"""Opening a store's database and keeping its schema at the latest Alembic revision. SQLite runs
with WAL, foreign keys on and a busy timeout, so several app sessions can share one file; writes
take the write lock up front (``BEGIN IMMEDIATE``) so a read-then-write never fails half-way."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from functools import cache
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError

from db.store.retry import lock_wait_seconds
from melo_core.errors import MeloInputError

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 15000  # how long a write waits for SQLite's lock, unless retrying


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's implicit transactions skip
    # DDL and SELECTs), then switch on what the store relies on.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    immediate = connection.get_execution_options().get("melo_write", False)
    wait = lock_wait_seconds()
    if wait is None:
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
        return
    # A write that retries when busy (db.store.retry) waits less for the lock on this try.
    connection.exec_driver_sql(f"PRAGMA busy_timeout={round(wait * 1000)}")
    try:
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
    finally:
        connection.exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")


def _postgresql_on_begin(connection: Connection) -> None:
    wait = lock_wait_seconds()
    if wait is not None:
        # For this transaction only; 0 would mean no limit.
        connection.exec_driver_sql(f"SET LOCAL lock_timeout = {max(1, round(wait * 1000))}")


def create_store_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
        engine = create_engine(parsed)
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise MeloInputError(f"cannot open the store {url!r}: {exc}") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
    elif engine.dialect.name == "postgresql":
        event.listen(engine, "begin", _postgresql_on_begin)
    return engine


SQLITE_HEADER = b"SQLite format 3\x00"


def sqlite_file(engine: Engine) -> Path | None:
    """The file of an SQLite store; None for an in-memory one or another backend."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    return Path(database)


def store_location(engine: Engine) -> str:
    """Where the store is, as the user would name it: the SQLite file, else the URL without password."""
    path = sqlite_file(engine)
    return str(path) if path is not None else engine.url.render_as_string(hide_password=True)


def _tables_and_revisions(engine: Engine) -> tuple[set[str], set[str]]:
    """The database's tables and, when it has ``alembic_version``, the revisions recorded there.
    An SQLite file is read through a read-only connection of its own (the engine's connections
    switch on WAL, which would change a file that is not ours)."""
    path = sqlite_file(engine)
    if path is None:
        with engine.connect() as connection:
            tables = set(inspect(connection).get_table_names())
            if "alembic_version" not in tables:
                return tables, set()
            return tables, set(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())
    with path.open("rb") as handle:
        if handle.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            raise sqlite3.DatabaseError("file is not a database")
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as probe:
        tables = {name for (name,) in probe.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "alembic_version" not in tables:
            return tables, set()
        return tables, {revision for (revision,) in probe.execute("SELECT version_num FROM alembic_version")}


def store_exists(engine: Engine) -> bool:
    """Whether the database holds a store (False: nothing there yet, a store can be created).
    Anything else stops with one line and is left as it is: a file that is not an SQLite
    database, a database with tables but no store revision, or a store of a revision this code
    does not know."""
    where = store_location(engine)
    path = sqlite_file(engine)
    if path is not None:
        if not path.exists():
            return False
        if path.is_dir():
            raise MeloInputError(f"{where} is a folder, not a store")
        if path.stat().st_size == 0:  # SQLite reads an empty file as an empty database
            return False
    try:
        tables, revisions = _tables_and_revisions(engine)
    except (sqlite3.DatabaseError, DatabaseError) as exc:
        if path is not None and "not a database" in str(exc):
            raise MeloInputError(f"{where} is not a store (not an SQLite database); it was left as it is") from None
        reason = getattr(exc, "orig", None) or exc
        raise MeloInputError(f"cannot open the store {where}: {str(reason).strip().splitlines()[0]}") from None
    except OSError as exc:
        raise MeloInputError(f"cannot open the store {where}: {exc.strerror or exc}") from None
    if not tables:
        return False
    if "alembic_version" not in tables:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise MeloInputError(f"{where} is not a store: a database with other tables ({shown}); it was left as it is")
    unknown = revisions - known_revisions()
    if unknown:
        raise MeloInputError(
            f"{where} is not a store this code knows (revision {', '.join(sorted(unknown))}: a newer "
            "MELO Studio, or another program's Alembic); it was left as it is"
        )
    return True


def _alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revisions() -> set[str]:
    return set(ScriptDirectory.from_config(_alembic_config()).get_heads())


@cache
def known_revisions() -> frozenset[str]:
    return frozenset(script.revision for script in ScriptDirectory.from_config(_alembic_config()).walk_revisions())


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
