"""Accounts, sign-in and review in the store (db.store.accounts, db.store.reviews) and their CLI
(`users`, `export --confirmed-only`). Every test runs on SQLite, and on PostgreSQL too when
MELO_TEST_PG_URL is set."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from db.exports import skos_csv_text, sssom_text
from db.imports import import_terms, read_terms_csv
from db.models import utcnow
from db.store import Actor, NotAllowed, SignInFailed, SignInRequired, Store
from db.testing import run_cli, run_cli_ok, snapshot
from melo_core.errors import MeloInputError

BAKER = "http://data.europa.eu/esco/occupation/baker"
PASTRY = "http://data.europa.eu/esco/occupation/pastry-baker"
NURSE = "http://data.europa.eu/esco/occupation/nurse"


def add_terms(store: Store, tmp_path: Path) -> dict[str, int]:
    path = tmp_path / "tst.csv"
    path.write_text("code,label\nB1,Baker\nB2,Konditor\nN1,Sykepleier\n", encoding="utf-8")
    import_terms(store, "tst", read_terms_csv(path), language="no")
    return {t.code: t.id for t in store.terms("tst")}


@pytest.fixture
def shared(store_url: str, tmp_path: Path) -> Iterator[tuple[Store, dict[str, int]]]:
    """A shared app's store (sign-in required): curators alice and bob, reviewer rita, terms."""
    with Store(store_url) as setup:
        terms = add_terms(setup, tmp_path)
        setup.add_account("alice", "curator", "alice-secret")
        setup.add_account("bob", "curator", "bob-secret-1")
        setup.add_account("rita", "reviewer", "rita-secret")
    opened = Store(store_url, sign_in=True)
    yield opened, terms
    opened.close()


# -- accounts and sign-in ---------------------------------------------------------------------


def test_passwords_are_stored_as_salted_scrypt_hashes(store: Store, store_url: str) -> None:
    store.add_account("alice", "curator", "same-password")
    store.add_account("bob", "reviewer", "same-password")
    engine = create_engine(store_url)
    with engine.connect() as connection:
        hashes: dict[str, str] = dict(connection.execute(text("SELECT username, password_hash FROM accounts")).all())
    engine.dispose()
    assert all(h.startswith("scrypt$") and "same-password" not in h for h in hashes.values())
    assert hashes["alice"] != hashes["bob"]  # a salt of its own
    assert store.sign_in("alice", "same-password").role == "curator"
    assert [(a.username, a.role, a.local) for a in store.accounts()] == [("alice", "curator", True),
                                                                       ("bob", "reviewer", True)]  # fmt: skip


def test_a_wrong_password_or_a_disabled_account_cannot_sign_in(store: Store) -> None:
    store.add_account("alice", "curator", "alice-secret")
    with pytest.raises(SignInFailed, match="wrong user name or password"):
        store.sign_in("alice", "wrong-one")
    with pytest.raises(SignInFailed, match="wrong user name or password"):  # the same for nobody
        store.sign_in("nobody", "alice-secret")
    store.set_disabled("alice")
    with pytest.raises(SignInFailed, match="disabled"):
        store.sign_in("alice", "alice-secret")
    store.set_disabled("alice", False)
    assert store.sign_in("alice", "alice-secret").username == "alice"
    with pytest.raises(ValueError, match="at least 8"):
        store.add_account("carol", "curator", "short")
    with pytest.raises(ValueError, match="exists already"):
        store.add_account("alice", "reviewer", "another-secret")


def test_an_oidc_identity_gets_an_account_without_password(store: Store) -> None:
    actor = store.oidc_actor("carol@example.org")
    assert (actor.username, actor.role, actor.via) == ("carol@example.org", "curator", "oidc")
    with pytest.raises(SignInFailed, match="identity provider"):
        store.sign_in("carol@example.org", "anything-at-all")
    store.add_account("rita@example.org", "reviewer")  # an administrator made her a reviewer first
    assert store.oidc_actor("rita@example.org").role == "reviewer"
    store.set_disabled("carol@example.org")
    with pytest.raises(SignInFailed, match="disabled"):
        store.oidc_actor("carol@example.org")


def test_a_request_without_a_session_cannot_decide(shared: tuple[Store, dict[str, int]]) -> None:
    store, terms = shared
    before = store.history(terms["B1"])
    with pytest.raises(SignInRequired, match="sign in first"):
        store.decide(terms["B1"], BAKER, "exactMatch", "alice")  # a typed name is not a session
    alice = store.sign_in("alice", "alice-secret")
    expired = replace(alice, expires_at=utcnow() - timedelta(seconds=1))
    with pytest.raises(SignInRequired, match="expired"):
        store.decide(terms["B1"], BAKER, "exactMatch", expired)
    forged = Actor("mallory", "reviewer", alice.expires_at)
    with pytest.raises(SignInRequired, match="no account"):
        store.decide(terms["B1"], BAKER, "exactMatch", forged)
    assert store.history(terms["B1"]) == before
    decision = store.decide(terms["B1"], BAKER, "exactMatch", alice)
    assert decision.curator == "alice"  # the signed-in identity is what the decision records
    store.set_disabled("alice")  # disabled during her session: her next write is refused
    with pytest.raises(SignInRequired, match="disabled"):
        store.decide(terms["B2"], PASTRY, "exactMatch", alice)


def test_a_curator_cannot_undo_another_curators_decision(shared: tuple[Store, dict[str, int]]) -> None:
    store, terms = shared
    alice = store.sign_in("alice", "alice-secret")
    bob = store.sign_in("bob", "bob-secret-1")
    store.decide(terms["B1"], BAKER, "exactMatch", alice)
    with pytest.raises(NotAllowed, match="alice's"):
        store.undo(terms["B1"], BAKER, bob)
    assert store.undo_last(bob) is None  # bob has nothing of his own to undo
    assert [d.outcome for d in store.current(terms["B1"])] == ["exactMatch"]
    undone = store.undo(terms["B1"], BAKER, alice)
    assert undone is not None and undone.outcome == "undecided" and undone.curator == "alice"


def test_open_store_keeps_the_typed_name_but_not_undoing_others(store: Store, tmp_path: Path) -> None:
    terms = add_terms(store, tmp_path)
    assert store.decide(terms["B1"], BAKER, "exactMatch", "Alice").curator == "Alice"
    with pytest.raises(NotAllowed):
        store.undo(terms["B1"], BAKER, "Bob")


# -- review -----------------------------------------------------------------------------------


def test_review_confirms_and_a_new_decision_makes_it_proposed_again(shared: tuple[Store, dict[str, int]]) -> None:
    store, terms = shared
    alice = store.sign_in("alice", "alice-secret")
    bob = store.sign_in("bob", "bob-secret-1")
    rita = store.sign_in("rita", "rita-secret")
    first = store.decide(terms["B1"], BAKER, "exactMatch", alice)
    second = store.decide(terms["B2"], PASTRY, "narrowMatch", alice)
    assert [i.status for i in store.review_queue("tst")] == ["proposed", "proposed"]

    with pytest.raises(NotAllowed, match="only a reviewer"):
        store.review([first.id], bob, "confirmed")
    with pytest.raises(SignInRequired):
        store.review([first.id], "rita", "confirmed")  # no session
    reviews = store.review([first.id, second.id], rita, "confirmed", comment="checked")  # bulk
    assert [(r.reviewer, r.verdict, r.comment) for r in reviews] == [("rita", "confirmed", "checked")] * 2
    assert [i.status for i in store.review_queue("tst", "confirmed")] == ["confirmed", "confirmed"]
    assert store.review_queue("tst", "proposed") == []

    changed = store.decide(terms["B2"], PASTRY, "broadMatch", bob)  # a new decision on the pair
    queue = {i.decision.term_id: i for i in store.review_queue("tst")}
    assert queue[terms["B2"]].status == "proposed" and queue[terms["B2"]].decision.id == changed.id
    assert queue[terms["B1"]].status == "confirmed"
    with pytest.raises(ValueError, match="no longer the current"):
        store.review([second.id], rita, "confirmed")
    store.review([changed.id], rita, "rejected", comment="broader than that")
    assert store.review_queue("tst", "rejected")[0].decision.id == changed.id
    assert [r.verdict for r in store.reviews(changed.id)] == ["rejected"]


def test_a_reviewer_cannot_review_their_own_decision_and_bulk_is_all_or_none(
    shared: tuple[Store, dict[str, int]], store_url: str
) -> None:
    store, terms = shared
    alice = store.sign_in("alice", "alice-secret")
    rita = store.sign_in("rita", "rita-secret")
    hers = store.decide(terms["B1"], BAKER, "exactMatch", rita)  # reviewers curate too
    alices = store.decide(terms["B2"], PASTRY, "exactMatch", alice)
    before = snapshot(store_url)
    with pytest.raises(NotAllowed, match="your own"):
        store.review([alices.id, hers.id], rita, "confirmed")
    assert snapshot(store_url) == before  # nothing of the bulk was written


def test_reviews_and_comments_are_append_only(shared: tuple[Store, dict[str, int]]) -> None:
    store, terms = shared
    alice = store.sign_in("alice", "alice-secret")
    rita = store.sign_in("rita", "rita-secret")
    decision = store.decide(terms["B1"], BAKER, "exactMatch", alice)
    store.review([decision.id], rita, "confirmed")
    comment = store.add_comment(decision.id, alice, "the Norwegian title is broader")
    assert (comment.author, comment.text) == ("alice", "the Norwegian title is broader")
    assert [c.text for c in store.comments([decision.id])] == ["the Norwegian title is broader"]
    assert store.review_queue("tst")[0].comments == 1
    with pytest.raises(SignInRequired):
        store.add_comment(decision.id, "alice", "typed")
    for statement in ("UPDATE reviews SET verdict = 'rejected'", "DELETE FROM reviews",
                      "UPDATE comments SET text = 'x'", "DELETE FROM comments"):  # fmt: skip
        with pytest.raises(MeloInputError, match=r"refused the write, nothing was written: .*append-only"):
            with store.write() as s:  # the database's refusal, as one line
                s.execute(text(statement))


def test_conflicts_between_curators(store: Store, tmp_path: Path) -> None:
    terms = add_terms(store, tmp_path)
    store.decide(terms["B1"], BAKER, "exactMatch", "alice")
    store.decide(terms["B1"], BAKER, "narrowMatch", "bob")  # same concept, another relation
    store.decide(terms["B2"], PASTRY, "exactMatch", "alice")
    store.decide(terms["B2"], BAKER, "exactMatch", "bob")  # same term, another concept
    store.decide(terms["N1"], NURSE, "exactMatch", "alice")
    store.decide(terms["N1"], NURSE, "exactMatch", "bob")  # agreement: no conflict
    pairs, by_term = store.conflicts("tst")
    assert pairs == {(terms["B1"], BAKER): "alice: exactMatch · bob: narrowMatch"}
    assert by_term == {terms["B2"]: "exact to different concepts: alice → pastry-baker; bob → baker"}
    conflicting = store.review_queue("tst", "conflicting")
    assert sorted((i.decision.term_id, i.decision.concept_uri) for i in conflicting) == sorted(
        [(terms["B1"], BAKER), (terms["B2"], PASTRY), (terms["B2"], BAKER)]
    )
    assert store.agreement("alice", "bob", "tst").items == 2  # kappa stays


# -- exports and the command line ---------------------------------------------------------------


def test_export_confirmed_only(shared: tuple[Store, dict[str, int]], store_url: str, tmp_path: Path) -> None:
    store, terms = shared
    alice = store.sign_in("alice", "alice-secret")
    rita = store.sign_in("rita", "rita-secret")
    confirmed = store.decide(terms["B1"], BAKER, "exactMatch", alice)
    store.decide(terms["B2"], PASTRY, "exactMatch", alice)
    store.review([confirmed.id], rita, "confirmed")
    rows = [r for r in skos_csv_text(store, "tst", confirmed_only=True).splitlines()[1:] if "skos:" in r]
    assert len(rows) == 1 and BAKER in rows[0]
    assert len([r for r in skos_csv_text(store, "tst").splitlines() if "skos:" in r]) == 2
    assert "pastry-baker" not in sssom_text(store, "tst", confirmed_only=True)
    out = tmp_path / "tst.sssom.tsv"
    run_cli_ok("export", "--scheme", "tst", "--format", "sssom", "--out", str(out), "--confirmed-only",
               "--db", store_url)  # fmt: skip
    body = [line for line in out.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    assert len(body) == 2 and "esco:baker" in body[1]


def test_cli_export_confirmed_only_of_an_unknown_scheme(store_url: str, tmp_path: Path) -> None:
    Store(store_url).close()
    before = snapshot(store_url)
    out = tmp_path / "x.csv"
    code, _out, stderr = run_cli("export", "--scheme", "nope", "--format", "skos-csv", "--out", str(out),
                                   "--confirmed-only", "--db", store_url)  # fmt: skip
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "no source scheme 'nope'" in stderr
    assert not out.exists() and snapshot(store_url) == before


def test_cli_users_add_disable_and_bad_input(
    store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, stderr = run_cli("users", "list", "--db", store_url)
    assert (code, out) == (0, "") and "no accounts yet" in stderr  # stdout stays one account per line
    monkeypatch.setattr("sys.stdin", io.StringIO("a-good-secret\n"))
    out = run_cli_ok("users", "add", "rita", "--role", "reviewer", "--password-stdin", "--db", store_url)
    assert "added reviewer rita" in out and "a-good-secret" not in out
    with Store(store_url) as store:
        assert store.sign_in("rita", "a-good-secret").role == "reviewer"
    before = snapshot(store_url)
    for stdin, args, message in (
        ("another-secret\n", ("add", "rita", "--password-stdin"), "exists already"),
        ("short\n", ("add", "carol", "--password-stdin"), "at least 8"),
        ("", ("add", "carol", "--password-stdin"), "no password"),
        ("", ("add", " carol", "--oidc"), "user name"),
        ("", ("disable", "nobody"), "no account 'nobody'"),
    ):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code, _out, stderr = run_cli("users", *args, "--db", store_url)
        assert code == 2, (args, stderr)
        assert len(stderr.strip().splitlines()) == 1 and message in stderr, stderr
        assert "short" not in stderr and "secret" not in stderr
        assert snapshot(store_url) == before  # nothing changed
    assert "rita is disabled" in run_cli_ok("users", "disable", "rita", "--db", store_url)
    assert run_cli_ok("users", "list", "--db", store_url).split() == ["rita", "reviewer", "disabled", "password"]
    with Store(store_url) as store, pytest.raises(SignInFailed, match="disabled"):
        store.sign_in("rita", "a-good-secret")
