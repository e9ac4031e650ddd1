"""Issue 87, provenance: an import signs its decisions as whoever ran it (the signed-in curator, or
``import:<file name>`` on the command line) at the time of import, keeping the file's curator and
date only as ``original_author`` / ``original_date``; a reviewer reviews neither her own decisions
nor those she imported; names of people are NFC and hold no invisible or bidi characters. Every
store test runs on SQLite, and on PostgreSQL too when MELO_TEST_PG_URL is set."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from db.store import Store
from db.testing import run_cli, snapshot

ZERO_WIDTH_SPACE = "\u200b"
RIGHT_TO_LEFT_OVERRIDE = "\u202e"


def rejected(*args: str) -> str:
    """Run a command that must fail on bad input: exit code 2, one line on stderr."""
    code, out, err = run_cli(*args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def terms(store: Store, tmp_path: Path) -> Iterator[dict[str, int]]:
    from db.imports import import_terms, read_terms_csv

    path = tmp_path / "tst.csv"
    path.write_text("code,label\nB1,Baker\nB2,Konditor\n", encoding="utf-8")
    import_terms(store, "tst", read_terms_csv(path), language="no")
    yield {t.code: t.id for t in store.terms("tst")}


# -- names that cannot impersonate ----------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["alice" + ZERO_WIDTH_SPACE, RIGHT_TO_LEFT_OVERRIDE + "cilA", "al\u2066ice", "bob\u00ad"]
)
def test_users_add_refuses_invisible_and_bidi_characters(store_url: str, name: str) -> None:
    with Store(store_url) as store:
        store.add_account("alice", "curator", "alice-secret")
    before = snapshot(store_url)
    message = rejected("users", "add", name, "--oidc", "--db", store_url)
    assert "invisible or direction-changing character" in message
    assert snapshot(store_url) == before
    with Store(store_url) as store, pytest.raises(ValueError, match="invisible"):
        store.add_account(name, "reviewer", "a-password")


def test_names_are_nfc_so_a_decomposed_alice_is_the_same_account(store: Store) -> None:
    composed, decomposed = "Zoë", unicodedata.normalize("NFD", "Zoë")
    assert composed != decomposed
    store.add_account(decomposed, "curator", "zoe-secret-1")
    [account] = store.accounts()
    assert account.username == composed
    with pytest.raises(ValueError, match="exists already"):
        store.add_account(composed, "reviewer", "another-password")
    assert store.sign_in(decomposed, "zoe-secret-1").username == composed
    assert store.sign_in(composed, "zoe-secret-1").username == composed
    assert store.account(decomposed) is not None
    assert store.set_disabled(decomposed).disabled


def test_typed_curator_and_comment_author_names_are_checked(store: Store, terms: dict[str, int]) -> None:
    uri = "http://data.europa.eu/esco/occupation/baker"
    with pytest.raises(ValueError, match="invisible"):
        store.decide(terms["B1"], uri, "exactMatch", "alice" + ZERO_WIDTH_SPACE)
    decision = store.decide(terms["B1"], uri, "exactMatch", unicodedata.normalize("NFD", "Zoë"))
    assert decision.curator == "Zoë"  # NFC: the same curator as one who typed it composed
    with pytest.raises(ValueError, match="invisible"):
        store.add_comment(decision.id, RIGHT_TO_LEFT_OVERRIDE + "boB", "looks right")
    assert store.comments([decision.id]) == []
    assert store.undo(terms["B1"], uri, "Zoë") is not None  # the NFC name owns the decision


def test_migrate_refuses_a_curator_with_a_bidi_override(store_url: str) -> None:
    Store(store_url).close()
    before = snapshot(store_url)
    message = rejected("migrate", "--scheme", "tst", "--to", "v2", "--curator", RIGHT_TO_LEFT_OVERRIDE + "cilA",
                       "--db", store_url)  # fmt: skip
    assert "invisible or direction-changing character U+202E" in message
    assert snapshot(store_url) == before
