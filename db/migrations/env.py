"""Alembic environment of the crosswalk store.

``db.store.Store`` runs the migrations programmatically and hands over its open connection in
``config.attributes["connection"]``; run by hand (``alembic -c db/alembic.ini ...``) the database
is ``MELO_DB_URL``, else ``melo.db`` in the project root.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine, pool
from sqlalchemy.engine import Connection

from db.models import Base
from melo_core import config as melo_config

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things: later migrations go through batch mode there.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url") or melo_config.database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    if config.config_file_name is not None:
        fileConfig(config.config_file_name)
    url = config.get_main_option("sqlalchemy.url") or melo_config.database_url()
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        _run(connection)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
