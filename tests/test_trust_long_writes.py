"""Long writes never block curators (issue 87): a term import writes in short transactions and a
re-import is linear; a decision waits for a busy store, then says so in one line, and the Link
page shows that line instead of a traceback. On SQLite and PostgreSQL."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from streamlit.testing.v1 import AppTest

from db.imports import WRITE_BATCH, import_terms, read_terms_csv
from db.quickstart import start_curation
from db.store import Store, StoreBusy
from db.store.retry import BUSY_SECONDS_ENV
from db.testing import run_cli

ROOT = Path(__file__).resolve().parent.parent
TERMS = 3000  # two batches of WRITE_BATCH rows
URI = "http://data.europa.eu/esco/occupation/test"


def terms_csv(folder: Path, label: str, count: int = TERMS) -> Path:
    """A terms CSV of ``count`` codes T00000... whose labels start with ``label``."""
    path = folder / f"terms-{label.replace(' ', '-')}.csv"
    lines = ["code,label"] + [f"T{i:05d},{label} {i}" for i in range(count)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def labels(store: Store, scheme: str) -> list[str]:
    return [t.label for t in store.queue(scheme, status=None, limit=TERMS * 2)]


@contextmanager
def write_lock_held(url: str) -> Iterator[threading.Event]:
    """Another connection holds the store's write lock (as an import's batch does) until the
    event yielded is set; on PostgreSQL, which locks rows, a table lock on the decisions
    stands in for it."""
    holder = Store(url)
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.write() as s:
            if s.get_bind().dialect.name == "postgresql":
                s.execute(text("LOCK TABLE decisions, reviews IN EXCLUSIVE MODE"))
            else:
                s.execute(text("SELECT 1"))  # BEGIN IMMEDIATE: the write lock
            taken.set()
            release.wait(30)  # bounded: code that waits for ever still ends

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert taken.wait(30)
        yield release
    finally:
        release.set()
        thread.join()
        holder.close()


@contextmanager
def before_each_transaction(store: Store, action: Callable[[Any], None]) -> Iterator[None]:
    """Run ``action(connection)`` as each of the store's transactions starts, before it takes
    any lock: before SQLite's BEGIN, at PostgreSQL's begin (locks come with the statements)."""

    def on_execute(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if statement.startswith("BEGIN"):
            action(conn)

    sqlite = store.engine.dialect.name == "sqlite"
    name, listener = ("before_cursor_execute", on_execute) if sqlite else ("begin", action)
    event.listen(store.engine, name, listener)
    try:
        yield
    finally:
        event.remove(store.engine, name, listener)


def one_term(store: Store, tmp_path: Path) -> int:
    import_terms(store, "titles", read_terms_csv(terms_csv(tmp_path, "baker", count=1)))
    return store.queue("titles")[0].id


# -- imports: short transactions, linear re-import ------------------------------------------


def test_a_reimport_of_changed_labels_updates_every_term_in_few_statements_and_short_transactions(
    store_url: str, tmp_path: Path
) -> None:
    with Store(store_url) as store:
        import_terms(store, "titles", read_terms_csv(terms_csv(tmp_path, "baker")))
        changed = read_terms_csv(terms_csv(tmp_path, "master baker"))
        statements: list[str] = []
        transactions: list[int] = []  # rows updated in each transaction

        def on_execute(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
            statements.append(statement)
            if statement.lstrip().upper().startswith("UPDATE"):
                transactions[-1] += len(parameters) if many else 1

        def on_begin(conn: Any) -> None:
            transactions.append(0)

        event.listen(store.engine, "before_cursor_execute", on_execute)
        event.listen(store.engine, "begin", on_begin)
        try:
            report = import_terms(store, "titles", changed)
        finally:
            event.remove(store.engine, "before_cursor_execute", on_execute)
            event.remove(store.engine, "begin", on_begin)
        assert (report.added, report.updated, report.unchanged) == (0, TERMS, 0)
        assert labels(store, "titles") == [f"master baker {i}" for i in range(TERMS)]
    # Linear: a statement per batch, not per row (it was one UPDATE per term).
    assert len(statements) < TERMS / 100 + 20, statements[:30]
    # The write lock is let go between batches: no transaction updates more than a batch.
    assert sum(transactions) == TERMS
    assert max(transactions) <= WRITE_BATCH
    assert len([t for t in transactions if t]) == math.ceil(TERMS / WRITE_BATCH)


def test_a_decision_made_between_two_batches_of_an_import_is_saved_before_the_import_ends(
    store_url: str, tmp_path: Path
) -> None:
    with Store(store_url) as store, Store(store_url) as curators:
        term_id = one_term(store, tmp_path)
        importer = threading.get_ident()
        write_transactions = 0
        saved: list[tuple[int, int]] = []  # (decision id, labels already changed then)

        def curator_decides() -> None:
            decision = curators.decide(term_id, URI, "exactMatch", "alice")
            saved.append((decision.id, sum(label.startswith("master") for label in labels(curators, "titles"))))

        def before_write(conn: Any) -> None:
            nonlocal write_transactions
            if threading.get_ident() != importer or not conn.get_execution_options().get("melo_write"):
                return
            write_transactions += 1
            if write_transactions == 3:  # the scheme, the first batch, then: a curator's turn
                curator = threading.Thread(target=curator_decides)
                curator.start()
                curator.join(30)

        with before_each_transaction(store, before_write):
            import_terms(store, "titles", read_terms_csv(terms_csv(tmp_path, "master baker")))
        assert len(saved) == 1, "no decision was made between the import's batches"
        (decision_id, changed_then) = saved[0]
        assert 0 < changed_then < TERMS  # in the middle of the import
        assert [d.id for d in store.current(term_id)] == [decision_id]
        assert labels(store, "titles") == [f"master baker {i}" for i in range(TERMS)]


def test_an_import_failing_part_way_says_what_stays_and_running_it_again_completes_it(
    store_url: str, tmp_path: Path
) -> None:
    path = terms_csv(tmp_path, "baker")
    with Store(store_url) as store, store.write() as s:
        # The disk fills up at the 2,501st term: in the second batch.
        if s.get_bind().dialect.name == "postgresql":
            s.execute(text(
                "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.code = 'T02500' THEN RAISE EXCEPTION 'could not extend file: No space left on device' "
                "USING ERRCODE = 'disk_full'; END IF; RETURN NEW; END $$"
            ))  # fmt: skip
            s.execute(
                text("CREATE TRIGGER disk_full BEFORE INSERT ON source_terms FOR EACH ROW EXECUTE FUNCTION disk_full()")
            )
        else:
            s.execute(text(
                "CREATE TRIGGER disk_full BEFORE INSERT ON source_terms WHEN NEW.code = 'T02500' "
                "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
            ))  # fmt: skip
    code, out, err = run_cli("import-terms", "--scheme", "titles", "--csv", str(path), "--db", store_url)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert f"{WRITE_BATCH} of {TERMS} rows written so far stay" in lines[0]
    assert "run the same import again to complete it" in lines[0]
    assert "database or disk is full" in lines[0] or "No space left on device" in lines[0]
    with Store(store_url) as store:
        assert len(labels(store, "titles")) == WRITE_BATCH  # the first batch, whole
        with store.write() as s:
            s.execute(text("DROP TRIGGER disk_full" + (" ON source_terms" if "postgresql" in store_url else "")))
    code, out, err = run_cli("import-terms", "--scheme", "titles", "--csv", str(path), "--db", store_url)
    assert code == 0, err
    assert f"{TERMS - WRITE_BATCH} terms added, 0 updated, {WRITE_BATCH} unchanged" in out
    with Store(store_url) as store:
        assert labels(store, "titles") == [f"baker {i}" for i in range(TERMS)]


# -- decisions on a busy store ----------------------------------------------------------------


def test_a_decision_waits_for_a_lock_held_longer_than_its_first_try_then_is_saved(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BUSY_SECONDS_ENV, "5")  # a try waits 0.5 s for the lock
    with Store(store_url) as store:
        term_id = one_term(store, tmp_path)
        with write_lock_held(store_url) as release:
            released: list[float] = []

            def let_go() -> None:
                time.sleep(1.2)
                released.append(time.monotonic())
                release.set()

            threading.Thread(target=let_go).start()
            decision = store.decide(term_id, URI, "exactMatch", "alice")
            assert released, "decided while the lock was held"
        assert [d.id for d in store.current(term_id)] == [decision.id]


@pytest.mark.parametrize("action", ["decide", "undo", "review"])
def test_a_write_that_never_gets_the_lock_raises_store_busy_and_writes_nothing(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    with Store(store_url) as store:
        term_id = one_term(store, tmp_path)
        earlier = store.decide(term_id, URI, "narrowMatch", "bob")
        attempts: dict[str, Callable[[], object]] = {
            "decide": lambda: store.decide(term_id, URI, "exactMatch", "alice"),
            "undo": lambda: store.undo(term_id, URI, "bob"),
            "review": lambda: store.review([earlier.id], "alice", "confirmed"),
        }
        monkeypatch.setenv(BUSY_SECONDS_ENV, "0.5")
        with write_lock_held(store_url):
            with pytest.raises(StoreBusy, match=r"^the store is busy .*nothing was saved.*try again$"):
                attempts[action]()
        assert store.history(term_id) == [earlier]
        assert store.reviews(earlier.id) == []


# -- the Link page --------------------------------------------------------------------------


@pytest.fixture
def link_store(nor_data: Path, esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The Link page's environment: a SQLite store holding the ESCO union of the small data
    folder and the nor_no terms."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    monkeypatch.setenv("MELO_DATA", str(nor_data))
    monkeypatch.setenv("MELO_ESCO", str(esco_csv))
    monkeypatch.setenv("MELO_DB_URL", url)
    monkeypatch.chdir(ROOT)
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
    return url


def test_the_link_page_says_in_one_line_that_a_busy_store_did_not_save_the_decision(
    link_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = AppTest.from_file(str(ROOT / "pages/2_Link.py"), default_timeout=60)
    app.session_state["curator"] = "alice"
    app.session_state["link_pipeline"] = "lexical"
    app.run()
    assert not app.exception
    term = app.subheader[0].value
    monkeypatch.setenv(BUSY_SECONDS_ENV, "0.3")
    with write_lock_held(link_store):
        next(b for b in app.button if b.label == "Exact").click().run()
    assert not app.exception
    message = "The store is busy (an import is running); your decision was not saved: try again."
    assert message in [c.value for c in app.caption]
    assert app.subheader[0].value == term  # still on the same term
    with Store(link_store) as store:
        assert store.crosswalk("nor_no", curator="alice") == []
    next(b for b in app.button if b.label == "Exact").click().run()  # the lock is gone: saved
    assert not app.exception
    assert any(c.value.startswith("Saved: ") for c in app.caption)
