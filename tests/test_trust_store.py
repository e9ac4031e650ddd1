"""Issue 87, the store's part: an existing store or nothing; values too long for their column and
a full disk stop with one line; a taxonomy import cannot wipe a taxonomy without --replace.

On SQLite and, when ``MELO_TEST_PG_URL`` is set, PostgreSQL; the full disk is SQLite's own
(``PRAGMA max_page_count``), which no server offers to a test."""

from __future__ import annotations

import csv
import itertools
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import String, create_engine, event, select, text
from sqlalchemy.engine import Engine

from db.models import Base, Bounded, SchemeRow, TermRow
from db.store import Store
from db.testing import empty_store_url, run_cli_ok, snapshot
from db.testing import run_cli_refused as refused
from melo_core.errors import MeloInputError
from tests.conftest import BACKENDS_UNDER_TEST, esco_csv_dir

SKOS_HEADER = "source_uri,source_code,source_label,relation,target_uri,target_label,curator,decided_at\n"


def terms_csv(folder: Path, rows: int = 3, name: str = "terms.csv") -> Path:
    path = folder / name
    path.write_text("code,label\n" + "".join(f"C{i},Title number {i}\n" for i in range(rows)), encoding="utf-8")
    return path


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# -- an existing store or nothing ---------------------------------------------------------------


def test_a_mistyped_sqlite_path_is_refused_and_nothing_is_left_behind(tmp_path: Path) -> None:
    csv = terms_csv(tmp_path)
    missing = tmp_path / "mleo.db"
    url = f"sqlite:///{missing}"
    for args in (
        ("import-terms", "--scheme", "s", "--csv", str(csv)),
        ("export", "--scheme", "s", "--format", "skos-csv", "--out", "-"),
        ("users", "list"),
        ("users", "add", "ann", "--oidc"),
        ("import-results", "--data", str(tmp_path)),
        ("migrate", "--scheme", "s"),
    ):
        line = refused(*args, "--db", url)
        if args[0] != "import-results":  # that one first finds no results in the folder
            assert (
                line
                == f"error: no store at {missing}: create one with import-taxonomy, or --create (import-terms, import-results, users add, eval --store)"
            )
    assert files_in(tmp_path) == ["terms.csv"]  # no empty store, no -wal or -shm

    out = run_cli_ok("import-terms", "--scheme", "s", "--csv", str(csv), "--db", url, "--create")
    assert "3 terms added" in out
    assert "ann" in run_cli_ok("users", "add", "ann", "--oidc", "--db", url)  # now it exists


def test_eval_store_records_runs_in_an_existing_store_or_one_it_is_told_to_create(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    args = ("eval", "--datasets", str(tiny_dataset), "--scorers", "edit-distance", "--store", "--db", url, "--quiet")
    line = refused(*args)
    assert (
        line
        == f"error: no store at {tmp_path / 'runs.db'}: create one with import-taxonomy, or --create (import-terms, import-results, users add, eval --store)"
    )
    assert not (tmp_path / "runs.db").exists()
    assert "stored run 1 " in run_cli_ok(*args, "--create")
    assert refused("eval", "--datasets", str(tiny_dataset), "--scorers", "edit-distance", "--create") == (
        "error: --create goes with --store"
    )


@pytest.mark.parametrize("backend", BACKENDS_UNDER_TEST)
def test_an_empty_database_is_a_store_only_once_created(backend: str, tmp_path: Path) -> None:
    with empty_store_url(backend, tmp_path) as url:
        with pytest.raises(MeloInputError, match=r"no store at .*import-taxonomy, or --create"):
            Store(url)
        assert snapshot(url) == {}  # not even alembic_version
        refused("users", "add", "ann", "--oidc", "--db", url)
        run_cli_ok("users", "add", "ann", "--oidc", "--db", url, "--create")
        with Store(url) as store:
            assert [a.username for a in store.accounts()] == ["ann"]


def sqlite_with_other_tables(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        connection.execute("INSERT INTO invoices (total) VALUES (12.5)")
    connection.close()


NOT_STORES = {
    "random bytes": (lambda p: p.write_bytes(bytes(range(256)) * 40), "not a store (not an SQLite database)"),
    "a CSV": (lambda p: p.write_text("code,label\nC1,Baker\n", encoding="utf-8"), "not a store (not an SQLite"),
    "an SQLite database of another program": (sqlite_with_other_tables, "a database with other tables (invoices)"),
}


@pytest.mark.parametrize("kind", NOT_STORES)
def test_a_file_that_is_not_a_store_is_named_and_left_as_it_is(kind: str, tmp_path: Path) -> None:
    make, words = NOT_STORES[kind]
    target = tmp_path / "data.db"
    make(target)
    before = target.read_bytes()
    csv = terms_csv(tmp_path)
    url = f"sqlite:///{target}"
    for args in (
        ("import-terms", "--scheme", "s", "--csv", str(csv), "--create"),
        ("import-taxonomy", "--esco-csv", str(tmp_path / "nowhere"), "--quiet"),
        ("export", "--scheme", "s", "--format", "skos-csv", "--out", "-"),
        ("users", "list"),
    ):
        line = refused(*args, "--db", url)
        if args[0] != "import-taxonomy":  # the missing ESCO folder is found first
            assert line.startswith(f"error: {target} ") and words in line, line
    assert target.read_bytes() == before
    assert files_in(tmp_path) == ["data.db", "terms.csv"]


@pytest.mark.parametrize("backend", BACKENDS_UNDER_TEST)
def test_a_database_with_foreign_tables_or_an_unknown_revision_is_never_migrated(backend: str, tmp_path: Path) -> None:
    with empty_store_url(backend, tmp_path) as url:
        engine = create_engine(url)
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE invoices (id INTEGER PRIMARY KEY)"))
        with pytest.raises(MeloInputError, match=r"not a store: a database with other tables \(invoices\)"):
            Store(url, create=True)
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)"))
            connection.execute(text("INSERT INTO alembic_version VALUES ('9999_from_the_future')"))
        before = snapshot(url)
        with pytest.raises(MeloInputError, match="revision 9999_from_the_future"):
            Store(url, create=True)
        assert snapshot(url) == before
        engine.dispose()


# -- limits as one line ------------------------------------------------------------------------


def test_every_bounded_column_is_checked_in_one_place() -> None:
    """Every String(n) column of the models checks its values (columns added later too)."""
    for table in Base.metadata.tables.values():
        for column in table.columns:
            if isinstance(column.type, String) and column.type.length:
                assert isinstance(column.type, Bounded), f"{table.name}.{column.name}"


def skos_file(
    folder: Path, name: str, *, curator: str = "ann", concept: str = "http://data.europa.eu/esco/occupation/1"
) -> Path:
    path = folder / name
    row = f"urn:x:A,A,Alpha,skos:exactMatch,{concept},Baker,{curator},2025-01-01T00:00:00Z\n"
    path.write_text(SKOS_HEADER + row, encoding="utf-8")
    return path


def test_values_too_long_for_their_columns_stop_with_one_line_and_write_nothing(store_url: str, tmp_path: Path) -> None:
    run_cli_ok("import-terms", "--scheme", "kept", "--csv", str(terms_csv(tmp_path)), "--db", store_url)
    before = snapshot(store_url)
    esco = esco_slice(tmp_path)
    cases = [
        (("import-terms", "--scheme", "s", "--skos-csv", str(skos_file(tmp_path, "curator.csv", curator="c" * 300))), "curator"),
        (("import-terms", "--scheme", "s", "--skos-csv",
          str(skos_file(tmp_path, "uri.csv", concept="http://data.europa.eu/esco/" + "o" * 600))), "uri"),
        (("import-terms", "--scheme", "s" * 300, "--csv", str(terms_csv(tmp_path))), "name"),
        (("import-taxonomy", "--esco-csv", str(esco), "--version", "v" * 300, "--quiet"), "version"),
        (("migrate", "--scheme", "kept", "--to", "v2", "--curator", "c" * 300), "curator"),
        (("import-taxonomy", "--esco-csv", str(esco), "--name", "e\x07sco", "--quiet"), "name"),
    ]  # fmt: skip
    for args, column in cases:
        line = refused(*args, "--db", store_url)
        assert "Traceback" not in line and column in line, line
        assert "longer than" in line or "control character" in line, line
        assert snapshot(store_url) == before, args


def esco_slice(folder: Path, occupations: int = 3, groups: int = 0, name: str = "esco-slice",
               relabel: int = 0) -> Path:  # fmt: skip
    """The first ``occupations`` occupations and ``groups`` ISCO groups of the shared ESCO CSV
    export (English), in a folder of their own; with ``relabel``, as many occupations get a new
    preferred label."""
    target = folder / name
    target.mkdir()
    for file_name, keep in (("occupations_en.csv", occupations), ("ISCOGroups_en.csv", groups)):
        source = esco_csv_dir() / file_name
        if not source.is_file():
            pytest.skip(f"ESCO CSV export not found at {esco_csv_dir()}")
        with source.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            fields = reader.fieldnames or []
            rows = list(itertools.islice(reader, keep))
        for row in rows[:relabel] if file_name.startswith("occupations") else []:
            row["preferredLabel"] += " (renamed)"
        if keep or file_name.startswith("occupations"):
            with (target / file_name).open("w", encoding="utf-8", newline="") as out:
                writer = csv.DictWriter(out, fieldnames=fields)
                writer.writeheader()
                writer.writerows(rows)
    return target


def test_the_library_refuses_too_long_names_as_one_error(store: Store, tmp_path: Path) -> None:
    run_cli_ok("import-terms", "--scheme", "s", "--csv", str(terms_csv(tmp_path)), "--db", store.url)
    term = store.terms("s")[0]
    before = snapshot(store.url)
    with pytest.raises(MeloInputError, match=r"decisions\.scorer longer than 200 characters"):
        store.decide(term.id, "http://data.europa.eu/esco/occupation/1", "exactMatch", "ann", scorer="s" * 300)
    with pytest.raises(MeloInputError, match=r"decisions\.concept_uri longer than 500 characters"):
        store.decide(term.id, "http://x.org/" + "o" * 600, "exactMatch", "ann")
    with pytest.raises(MeloInputError, match=r"source_terms\.code longer than 500 characters"):
        store.term("s", "x" * 600)  # a lookup by a value no row can hold: one line too
    assert snapshot(store.url) == before


def test_a_constraint_refused_in_a_bulk_insert_is_one_line_on_both_backends(store: Store) -> None:
    """PostgreSQL's COPY raises the driver's own error, outside SQLAlchemy: one line too."""
    from db.imports import _bulk_insert
    from db.models import SchemeRow, utcnow

    before = snapshot(store.url)
    with pytest.raises(MeloInputError, match=r"refused the write, nothing was written: .*kind"):
        with store.write() as s:
            _bulk_insert(s, SchemeRow, [{"name": "ok", "kind": "terminology", "created_at": utcnow()},
                                        {"name": "bad", "kind": "bogus", "created_at": utcnow()}])  # fmt: skip
    assert snapshot(store.url) == before


# -- a full disk -------------------------------------------------------------------------------


@contextmanager
def full_sqlite(path: Path) -> Iterator[None]:
    """Every new connection to any SQLite database may not grow ``path``'s database beyond its
    size now: a full disk, as SQLite reports it (SQLITE_FULL)."""
    with sqlite3.connect(path) as probe:
        pages = probe.execute("PRAGMA page_count").fetchone()[0]
    probe.close()

    def limit(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")

    event.listen(Engine, "connect", limit)
    try:
        yield
    finally:
        event.remove(Engine, "connect", limit)


def test_a_full_disk_during_import_terms_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "melo.db"
    url = f"sqlite:///{path}"
    run_cli_ok("import-terms", "--scheme", "small", "--csv", str(terms_csv(tmp_path)), "--db", url, "--create")
    big = terms_csv(tmp_path, rows=5000, name="big.csv")
    before = snapshot(url)
    with full_sqlite(path):
        line = refused("import-terms", "--scheme", "big", "--csv", str(big), "--db", url)
        assert "database or disk is full" in line
        # Refused at its first batch: no term and no empty scheme went in.
        assert snapshot(url) == before
        with Store(url) as store:
            term = store.terms("small")[0]
            decided = 0
            with pytest.raises(MeloInputError, match="database or disk is full") as raised:
                for n in range(200):  # the free room left in the file's pages, then a full disk
                    store.decide(term.id, f"http://data.europa.eu/esco/occupation/{n}", "exactMatch", "ann",
                                 comment="x" * 500)  # fmt: skip
                    decided += 1
            assert "refused the write, nothing was written" in str(raised.value)
            assert len(store.history(term.id)) == decided  # the refused decision is not there


# -- a taxonomy import cannot wipe a taxonomy ---------------------------------------------------


def test_an_import_that_would_remove_most_concepts_stops_with_its_diff(store_url: str, tmp_path: Path) -> None:
    def esco(name: str, occupations: int, relabel: int = 0) -> str:
        return str(esco_slice(tmp_path, occupations, groups=20, name=name, relabel=relabel))

    run_cli_ok("import-taxonomy", "--esco-csv", esco("full", 100), "--version", "v1", "--db", store_url, "--quiet")
    # One occupation fewer (1 of 120 concepts, under 2 %) and one relabelled: replaced, with the diff.
    out = run_cli_ok("import-taxonomy", "--esco-csv", esco("fewer", 99, relabel=1), "--version", "v1",
                     "--db", store_url, "--quiet")  # fmt: skip
    assert "replaced, 119 concepts" in out
    assert "diff: concepts +0 -1 of 120 (1 relabelled)" in out and "languages en (unchanged)" in out
    before = snapshot(store_url)

    # A header-only occupations file (the ISCO groups alone), or a single occupation: stopped.
    refused("import-taxonomy", "--esco-csv", esco("header-only", 0), "--version", "v1", "--db", store_url, "--quiet")
    assert snapshot(store_url) == before
    line = refused("import-taxonomy", "--esco-csv", esco("one", 1), "--version", "v1", "--db", store_url, "--quiet")
    assert line.startswith("error: taxonomy esco v1 not replaced: it would remove 98 of 119 concepts (more than 2%)")
    assert "give --replace" in line and "diff: concepts +0 -98 of 119 (1 relabelled)" in line
    assert snapshot(store_url) == before

    out = run_cli_ok("import-taxonomy", "--esco-csv", esco("one-again", 1), "--version", "v1", "--replace",
                     "--db", store_url, "--quiet")  # fmt: skip
    assert "replaced, 21 concepts" in out and "diff: concepts +0 -98 of 119" in out
    with Store(store_url) as store:
        assert [t.concepts for t in store.taxonomies()] == [21]


@pytest.fixture
def two_language_melo(datasets_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A MELO data folder with the Norwegian datasets: labels in Norwegian and English."""
    root = tmp_path / "melo"
    (root / "processed" / "melo").mkdir(parents=True)
    for name in ("nor_q_no_c_no", "nor_q_no_c_en"):
        (root / "processed" / "melo" / name).symlink_to(datasets_dir / name)
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    return root


def test_the_melo_union_is_replaced_only_by_the_melo_corpora_in_the_same_languages(
    store_url: str, two_language_melo: Path, tmp_path: Path
) -> None:
    run_cli_ok("import-taxonomy", "--data", str(two_language_melo), "--db", store_url, "--quiet")
    before = snapshot(store_url)
    line = refused("import-taxonomy", "--data", str(two_language_melo), "--langs", "no", "--db", store_url, "--quiet")
    assert "taxonomy esco melo-union not replaced: it would change the label languages (en,no -> no)" in line
    assert "languages en,no -> no" in line and "labels +0 -" in line

    english = str(esco_slice(tmp_path, 40, groups=5))
    line = refused("import-taxonomy", "--esco-csv", english, "--version", "melo-union", "--db", store_url, "--quiet")
    assert "the version melo-union is kept for the ESCO union of the MELO corpora (--data)" in line
    assert snapshot(store_url) == before

    out = run_cli_ok("import-taxonomy", "--esco-csv", english, "--version", "melo-union", "--replace",
                     "--db", store_url, "--quiet")  # fmt: skip
    assert "taxonomy esco melo-union: replaced, 45 concepts" in out and "languages en,no -> en" in out


@pytest.mark.parametrize("label", ["baker\nwith a line break", "b" * 1001, "nul\x00"])
def test_a_label_the_readers_would_refuse_is_refused_by_the_store_too(store_url: str, label: str) -> None:
    """Titles and labels follow one rule whatever writes them (an import, the Link page, the
    library): the store checks its label columns as the readers check files."""
    with Store(store_url) as store:
        with store.write() as s:
            s.add(SchemeRow(name="s", kind="terminology"))
        with store.read() as s:
            scheme_id = s.scalars(select(SchemeRow.id)).one()
        with store.write() as s:
            s.add(TermRow(scheme_id=scheme_id, code="B1", uri="urn:x:B1", label="Baker", description=""))
        [term] = store.terms("s")
        before = snapshot(store_url)
        with pytest.raises(MeloInputError, match=r"decisions\.concept_label"):
            store.decide(term.id, "http://data.europa.eu/esco/occupation/1", "exactMatch", "ann", concept_label=label)
        with pytest.raises(MeloInputError, match=r"source_terms\.label"):
            with store.write() as s:
                s.add(TermRow(scheme_id=scheme_id, code="B2", uri="urn:x:B2", label=label, description=""))
        assert snapshot(store_url) == before
