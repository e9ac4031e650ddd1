"""Issue 87, provenance: an import signs its decisions as whoever ran it (the signed-in curator, or
``import:<file name>`` on the command line) at the time of import, keeping the file's curator and
date only as ``original_author`` / ``original_date``; a reviewer reviews neither her own decisions
nor those she imported; names of people are NFC and hold no invisible or bidi characters. Every
store test runs on SQLite, and on PostgreSQL too when MELO_TEST_PG_URL is set."""

from __future__ import annotations

import csv
import io
import unicodedata
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import insert
from streamlit.testing.v1 import AppTest

from db.exports import skos_csv_text, sssom_text, turtle_text
from db.imports import import_terms, read_term_file, read_terms_csv
from db.models import DecisionRow, utcnow
from db.store import NotAllowed, SignInRequired, Store
from db.testing import run_cli_ok, snapshot
from db.testing import run_cli_refused as rejected
from ui import auth

ZERO_WIDTH_SPACE = "\u200b"
RIGHT_TO_LEFT_OVERRIDE = "\u202e"


@pytest.fixture
def terms(store: Store, tmp_path: Path) -> Iterator[dict[str, int]]:
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


# -- provenance that cannot be forged -------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
BAKER = "http://data.europa.eu/esco/occupation/baker"
PASTRY = "http://data.europa.eu/esco/occupation/pastry-baker"
OLD_HEADER = "source_uri,source_code,source_label,relation,target_uri,target_label,curator,decided_at\n"
# What the curator uploaded: decisions "by alice", dated 1999-01-01.
FORGED = (
    OLD_HEADER
    + f"urn:x:B1,B1,Baker,skos:exactMatch,{BAKER},baker,alice,1999-01-01T00:00:00Z\n"
    + f"urn:x:B2,B2,Konditor,skos:closeMatch,{PASTRY},,alice,1999-01-01T00:00:00Z\n"
)
Y1999 = datetime(1999, 1, 1, tzinfo=UTC)


def accounts(url: str) -> None:
    with Store(url) as setup:
        setup.add_account("alice", "curator", "alice-secret")
        setup.add_account("rita", "reviewer", "rita-secret")
        setup.add_account("ruth", "reviewer", "ruth-secret")


def confirmed_rows(url: str) -> list[dict[str, str]]:
    out = run_cli_ok("export", "--scheme", "tst", "--format", "skos-csv", "--confirmed-only", "--out", "-",
                     "--db", url)  # fmt: skip
    return [r for r in csv.DictReader(io.StringIO(out, newline="")) if r["relation"]]


def test_an_import_signs_as_the_signed_in_user_and_keeps_the_files_claims_apart(store_url: str, tmp_path: Path) -> None:
    accounts(store_url)
    path = tmp_path / "claims.csv"
    path.write_text(FORGED, encoding="utf-8")
    started = utcnow()
    with Store(store_url, sign_in=True) as shared:
        rita = shared.sign_in("rita", "rita-secret")
        report = import_terms(shared, "tst", read_term_file(path, "skos-csv"), signer=rita)
        assert report.decisions_added == 2
        decisions = shared.crosswalk("tst")
        assert {(d.curator, d.imported_by, d.original_author, d.original_date) for d in decisions} == {
            ("rita", "rita", "alice", Y1999)
        }
        assert all(d.decided_at >= started.replace(microsecond=0) for d in decisions)  # the time of import
        assert auth.signed(decisions[0]) == "rita, imported; the file says alice, 1999-01-01"
        assert auth.claimed(decisions[0]) == "alice, 1999-01-01"

        # Her own import: not hers to confirm (nor to reject), whatever curator the file named.
        before = snapshot(store_url)
        for verdict in ("confirmed", "rejected"):
            with pytest.raises(NotAllowed, match="your own"):
                shared.review([d.id for d in decisions], rita, verdict)
        assert snapshot(store_url) == before
        assert confirmed_rows(store_url) == []
        # Another reviewer may: then it is published, signed by who imported it.
        shared.review([d.id for d in decisions], shared.sign_in("ruth", "ruth-secret"), "confirmed")
        [row, _] = confirmed_rows(store_url)
        assert (row["curator"], row["original_author"], row["original_date"]) == (
            "rita",
            "alice",
            "1999-01-01T00:00:00Z",
        )
        sssom = sssom_text(shared, "tst")
        assert "\trita\t" in sssom and "original_author=alice|original_date=1999-01-01T00:00:00Z" in sssom
        assert "original_author=alice|original_date=1999-01-01T00:00:00Z" in turtle_text(shared, "tst")

        # The same file again: already there (what it claims is what was kept).
        again = import_terms(shared, "tst", read_term_file(path, "skos-csv"), signer=rita)
        assert (again.decisions_added, again.decisions_skipped) == (0, 2)

        # A session that expired, or nobody signed in: nothing written.
        other = tmp_path / "other.csv"
        other.write_text(OLD_HEADER + f"urn:x:B3,B3,Cook,skos:exactMatch,{BAKER},,bob,2020-01-01T00:00:00Z\n",
                         encoding="utf-8")  # fmt: skip
        before = snapshot(store_url)
        expired = replace(rita, expires_at=utcnow() - timedelta(minutes=1))
        with pytest.raises(SignInRequired, match="expired"):
            import_terms(shared, "tst", read_term_file(other, "skos-csv"), signer=expired)
        with pytest.raises(SignInRequired, match="sign in first"):
            import_terms(shared, "tst", read_term_file(other, "skos-csv"))
        assert snapshot(store_url) == before


def test_a_reviewer_cannot_review_a_decision_she_imported_under_another_name(
    store_url: str, terms: dict[str, int]
) -> None:
    accounts(store_url)
    with Store(store_url, sign_in=True) as shared:
        with shared.write() as s:  # as an import that named the decision's curator apart from its importer
            s.execute(insert(DecisionRow).values(term_id=terms["B1"], concept_uri=BAKER, outcome="exactMatch",
                                                 curator="alice", decided_at=utcnow(), comment="",
                                                 imported_by="rita"))  # fmt: skip
        [decision] = shared.crosswalk("tst")
        with pytest.raises(NotAllowed, match="one you imported"):
            shared.review([decision.id], shared.sign_in("rita", "rita-secret"), "confirmed")
        assert shared.review([decision.id], shared.sign_in("ruth", "ruth-secret"), "confirmed")


def test_the_command_line_signs_as_import_file_name(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "claims.csv"
    path.write_text(FORGED, encoding="utf-8")
    started = utcnow()
    run_cli_ok("import-terms", "--scheme", "tst", "--skos-csv", str(path), "--db", store_url)
    with Store(store_url) as store:
        decisions = store.crosswalk("tst")
        assert {(d.curator, d.imported_by, d.original_author, d.original_date) for d in decisions} == {
            ("import:claims.csv", "import:claims.csv", "alice", Y1999)
        }
        assert all(d.decided_at >= started.replace(microsecond=0) for d in decisions)
        assert store.curators("tst") == []  # an importer, not a curator
        exported = skos_csv_text(store, "tst")
    rows = list(csv.DictReader(io.StringIO(exported, newline="")))
    assert {(r["curator"], r["original_author"], r["original_date"]) for r in rows} == {
        ("import:claims.csv", "alice", "1999-01-01T00:00:00Z")
    }
    # A crosswalk JSON names nobody: its decisions carry no claimed author or date.
    crosswalk = tmp_path / "cw.json"
    crosswalk.write_text(f'{{"B9": {{"title": "Cook", "matches": {{"{BAKER}": "exactMatch"}}}}}}', encoding="utf-8")
    with Store(store_url) as store:
        import_terms(store, "cw", read_term_file(crosswalk, "crosswalk", with_decisions=True))
        [decision] = store.crosswalk("cw")
    assert (decision.curator, decision.imported_by, decision.original_author, decision.original_date) == (
        "import:cw.json",
        "import:cw.json",
        None,
        None,
    )


@pytest.mark.parametrize(
    ("column", "value", "words"),
    [
        ("curator", RIGHT_TO_LEFT_OVERRIDE + "ecilA", "invisible or direction-changing character U+202E"),
        ("original_author", "alice" + ZERO_WIDTH_SPACE, "invisible or direction-changing character U+200B"),
        ("original_date", "1999-01-01", "no time zone"),
    ],
)
def test_a_skos_csv_claiming_a_bad_name_or_date_is_refused(
    store_url: str, tmp_path: Path, column: str, value: str, words: str
) -> None:
    cells = {"curator": "alice", "original_author": "", "original_date": "", column: value}
    path = tmp_path / "bad.csv"
    path.write_text(
        OLD_HEADER.replace("\n", ",original_author,original_date\n")
        + f"urn:x:B1,B1,Baker,skos:exactMatch,{BAKER},,{cells['curator']},2020-01-01T00:00:00Z,"
        + f"{cells['original_author']},{cells['original_date']}\n",
        encoding="utf-8",
    )
    before = snapshot(store_url)
    message = rejected("import-terms", "--scheme", "tst", "--skos-csv", str(path), "--db", store_url)
    assert message.startswith(f"error: {path}:2: column {column!r}: ") and words in message, message
    assert snapshot(store_url) == before


def app_env(monkeypatch: pytest.MonkeyPatch, url: str, data: Path, cache: Path, sign_in: bool) -> None:
    for name, value in (("MELO_DATA", str(data)), ("MELO_CACHE", str(cache)), ("MELO_DB_URL", url)):
        monkeypatch.setenv(name, value)
    if sign_in:
        monkeypatch.setenv("MELO_AUTH", "on")
    else:
        monkeypatch.delenv("MELO_AUTH", raising=False)
    monkeypatch.chdir(ROOT)


@pytest.fixture
def shared_app(store_url: str, nor_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A shared app (MELO_AUTH=on) over a store with alice, rita and ruth."""
    accounts(store_url)
    app_env(monkeypatch, store_url, nor_data, tmp_path / "cache", sign_in=True)
    return store_url


def test_the_import_page_signs_an_upload_as_the_signed_in_curator(shared_app: str) -> None:
    """The issue's case: rita uploads decisions "by alice, 1999-01-01" and cannot confirm them."""
    app = AppTest.from_file(str(ROOT / "pages/4_Import.py"), default_timeout=120).run()
    app.text_input(key="sign_in_user").input("rita")
    app.text_input(key="sign_in_password").input("rita-secret")
    next(b for b in app.button if b.label == "Sign in").click().run()
    assert not app.exception and not app.error
    assert "(signed by you, now)" in app.checkbox(key="import_with_decisions").label
    started = utcnow().replace(microsecond=0)
    app.text_input(key="import_scheme").input("tst")
    app.radio(key="import_format").set_value("skos-csv")
    app.file_uploader(key="import_terms_file").set_value(("claims.csv", FORGED.encode(), "text/csv")).run()
    app.button(key="import_terms_go").click().run()
    assert not app.exception and not app.error
    assert [s.value for s in app.success] == ["scheme tst: 2 terms added, 0 updated, 0 unchanged; 2 decisions added, "
                                              "0 already there"]  # fmt: skip
    with Store(shared_app, sign_in=True) as shared:
        decisions = shared.crosswalk("tst")
        assert {(d.curator, d.imported_by, d.original_author, d.original_date) for d in decisions} == {
            ("rita", "rita", "alice", Y1999)
        }
        assert all(d.decided_at >= started for d in decisions)
        with pytest.raises(NotAllowed, match="your own"):
            shared.review([d.id for d in decisions], shared.sign_in("rita", "rita-secret"), "confirmed")
    assert confirmed_rows(shared_app) == []


def test_the_crosswalk_page_shows_what_a_file_claimed_and_refuses_an_invisible_curator(
    store_url: str, nor_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "claims.csv"
    path.write_text(FORGED, encoding="utf-8")
    run_cli_ok("import-terms", "--scheme", "tst", "--skos-csv", str(path), "--db", store_url)
    app_env(monkeypatch, store_url, nor_data, tmp_path / "cache", sign_in=False)
    app = AppTest.from_file(str(ROOT / "pages/3_Crosswalk.py"), default_timeout=60)
    app.query_params["curator"] = "bob" + ZERO_WIDTH_SPACE  # a link that names an invisible curator
    app.run()
    assert not app.exception
    assert [s.value for s in app.subheader] == ["Who is curating?"]
    assert "invisible or direction-changing character U+200B" in app.error[0].value
    assert "curator" not in app.query_params and "curator" not in app.session_state
    app.text_input(key="curator_input").input(RIGHT_TO_LEFT_OVERRIDE + "boB")
    next(b for b in app.button if b.label == "Start").click().run()
    assert "curator" not in app.session_state and "U+202E" in app.error[0].value
    app.text_input(key="curator_input").input("bob")
    next(b for b in app.button if b.label == "Start").click().run()
    assert not app.exception and app.session_state["curator"] == "bob"
    crosswalk = app.dataframe[0].value
    assert list(crosswalk["curator"]) == ["import:claims.csv"] * 2
    assert list(crosswalk["file says"]) == ["alice, 1999-01-01"] * 2


def test_an_import_is_not_its_importers_judgement(store_url: str, tmp_path: Path) -> None:
    """Kappa, the curators list and decisions per hour count what curators decided, not what a
    signed-in user imported."""
    accounts(store_url)
    path = tmp_path / "claims.csv"
    path.write_text(FORGED, encoding="utf-8")
    with Store(store_url, sign_in=True) as shared:
        rita, alice = shared.sign_in("rita", "rita-secret"), shared.sign_in("alice", "alice-secret")
        import_terms(shared, "tst", read_term_file(path, "skos-csv"), signer=rita)
        b1 = shared.term("tst", "B1")
        assert b1 is not None
        shared.decide(b1.id, BAKER, "narrowMatch", alice)
        assert shared.curators("tst") == ["alice"]
        assert shared.curators("tst", include_imports=True) == ["alice", "rita"]
        assert {c.curator for c in shared.decisions_per_hour("tst")} == {"alice"}
        assert shared.agreement("alice", "rita", "tst").items == 0
        shared.decide(b1.id, BAKER, "exactMatch", rita)  # her own judgement counts
        assert shared.agreement("alice", "rita", "tst").items == 1


def test_an_undo_back_to_an_imported_state_keeps_it_imported(store_url: str, tmp_path: Path) -> None:
    accounts(store_url)
    path = tmp_path / "claims.csv"
    path.write_text(FORGED, encoding="utf-8")
    with Store(store_url, sign_in=True) as shared:
        rita, alice = shared.sign_in("rita", "rita-secret"), shared.sign_in("alice", "alice-secret")
        import_terms(shared, "tst", read_term_file(path, "skos-csv"), signer=rita)
        b1 = shared.term("tst", "B1")
        assert b1 is not None
        shared.decide(b1.id, BAKER, "narrowMatch", alice)
        restored = shared.undo(b1.id, BAKER, alice)
        assert restored is not None
        assert (restored.outcome, restored.curator, restored.imported_by, restored.original_author) == (
            "exactMatch",
            "alice",
            "rita",
            "alice",
        )
        with pytest.raises(NotAllowed, match="one you imported"):
            shared.review([restored.id], rita, "confirmed")


def test_an_undo_back_to_her_own_decision_is_still_hers_to_review_by_another(store_url: str, tmp_path: Path) -> None:
    """Rita decides, Alice decides anew, Alice undoes: the state is Rita's judgement again (the
    undo row is signed by Alice), so Rita may not confirm it; Ruth may."""
    accounts(store_url)
    path = tmp_path / "terms.csv"
    path.write_text("code,label\nB1,Baker\n", encoding="utf-8")
    with Store(store_url, sign_in=True) as shared:
        rita, alice = shared.sign_in("rita", "rita-secret"), shared.sign_in("alice", "alice-secret")
        import_terms(shared, "tst", read_term_file(path, "csv"))
        b1 = shared.term("tst", "B1")
        assert b1 is not None
        shared.decide(b1.id, BAKER, "exactMatch", rita)
        shared.decide(b1.id, BAKER, "narrowMatch", alice)
        restored = shared.undo(b1.id, BAKER, alice)
        assert restored is not None and (restored.outcome, restored.curator) == ("exactMatch", "alice")
        with pytest.raises(NotAllowed, match="your own"):
            shared.review([restored.id], rita, "confirmed")
        assert shared.review([restored.id], shared.sign_in("ruth", "ruth-secret"), "confirmed")
