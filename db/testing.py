"""Helpers for the store's tests: an empty store on SQLite, or on PostgreSQL when
``MELO_TEST_PG_URL`` names a server (e.g. ``postgresql+psycopg://user@localhost/melo_test``).

Each PostgreSQL store lives in a schema of its own (created empty, dropped afterwards), so tests
never see each other's rows and need no CREATE DATABASE privilege.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

PG_ENV = "MELO_TEST_PG_URL"
BACKENDS = ("sqlite", "postgresql")


def pg_url() -> str | None:
    return os.environ.get(PG_ENV) or None


@contextmanager
def empty_store_url(backend: str, folder: Path) -> Iterator[str]:
    """The URL of an empty database for a store (no tables yet)."""
    if backend == "sqlite":
        yield f"sqlite:///{folder / 'melo.db'}"
        return
    base = pg_url()
    if base is None:
        raise RuntimeError(f"{PG_ENV} is not set")
    schema = f"melo_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


def snapshot(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, in primary-key order: to check that nothing changed."""
    engine = create_engine(url)
    try:
        tables = sorted(inspect(engine).get_table_names())
        with engine.connect() as connection:
            return {
                name: [tuple(row) for row in connection.execute(text(f'SELECT * FROM "{name}" ORDER BY 1'))]
                for name in tables
            }
    finally:
        engine.dispose()


def run_cli(*args: str) -> tuple[int, str, str]:
    """``python -m melo_core ARGS`` in this process: (exit code, stdout, stderr); argparse's
    refusals (``SystemExit``) give their exit code too, as the command line would."""
    import contextlib
    import io

    from melo_core.cli.commands import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def run_cli_ok(*args: str) -> str:
    """``run_cli`` that must succeed; returns stdout."""
    code, out, err = run_cli(*args)
    assert code == 0, err
    return out


def run_cli_refused(*args: str) -> str:
    """``run_cli`` that must be refused on the user's input: exit code 2 and one line on stderr
    starting with ``error: `` (no traceback); returns that line."""
    code, out, err = run_cli(*args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]
