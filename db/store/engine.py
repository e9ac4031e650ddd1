"""Opening a store's database and keeping its schema at the latest Alembic revision. SQLite runs
with WAL, foreign keys on and a busy timeout, so several app sessions can share one file; writes
take the write lock up front (``BEGIN IMMEDIATE``) so a read-then-write never fails half-way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from melo_core.errors import MeloInputError

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


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
