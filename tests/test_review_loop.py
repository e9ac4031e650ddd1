"""Review that closes the loop (issue 90): a rejection and its comment send the term back to the
curators' queue (status "returned", shown on the Link page); "select all" leaves conflicting
mappings out unless asked; a review action clears the selection and the comment; refusals name
the mapping, not an id, beside the buttons; reviewing needs sign-in. Store tests run on SQLite,
and on PostgreSQL too when MELO_TEST_PG_URL is set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from db.imports import import_terms, read_terms_csv
from db.quickstart import start_curation
from db.store import NotAllowed, Store, select_all
from tests.test_e2e_browser import curation_env, serve
from tests.test_e2e_browser import page as page  # the Chromium fixture (the test skips without it)
from tests.test_e2e_browser import sign_in as sign_in_browser
from tests.test_pages_curation import CROSSWALK, LINK, shared_page, sign_in
from tests.test_pages_curation import cache as cache  # the page fixtures, reused
from tests.test_pages_curation import env as env
from tests.test_pages_curation import page as app_page
from tests.test_pages_curation import started as started

BAKER = "http://data.europa.eu/esco/occupation/baker"
PASTRY = "http://data.europa.eu/esco/occupation/pastry-baker"
NURSE = "http://data.europa.eu/esco/occupation/nurse"


@pytest.fixture
def team(store_url: str, tmp_path: Path) -> Iterator[tuple[Store, dict[str, int]]]:
    """A shared store (sign-in required) with terms B1 Baker, B2 Konditor, N1 Sykepleier; curators
    alice and bob, reviewer rita."""
    path = tmp_path / "tst.csv"
    path.write_text("code,label\nB1,Baker\nB2,Konditor\nN1,Sykepleier\n", encoding="utf-8")
    with Store(store_url) as setup:
        import_terms(setup, "tst", read_terms_csv(path), language="no")
        for name, role in (("alice", "curator"), ("bob", "curator"), ("rita", "reviewer")):
            setup.add_account(name, role, f"{name}-secret-1")
        terms = {t.code: t.id for t in setup.terms("tst")}
    with Store(store_url, sign_in=True) as opened:
        yield opened, terms


# -- the store ----------------------------------------------------------------------------------


def test_a_rejection_returns_the_term_to_the_queue_with_its_comment(team: tuple[Store, dict[str, int]]) -> None:
    store, terms = team
    alice, rita = store.sign_in("alice", "alice-secret-1"), store.sign_in("rita", "rita-secret-1")
    baker = store.decide(terms["B1"], BAKER, "exactMatch", alice, concept_label="baker")
    pastry = store.decide(terms["B2"], PASTRY, "narrowMatch", alice, concept_label="pastry baker")
    store.review([pastry.id], rita, "confirmed")
    store.review([baker.id], rita, "rejected", comment="a Baker here bakes bread only: narrower")

    assert [(t.code, t.status) for t in store.queue("tst", status="returned")] == [("B1", "returned")]
    assert store.queue_counts("tst") == {"todo": 1, "done": 1, "unsure": 0, "returned": 1}
    assert store.term_by_id(terms["B1"]).status == "returned"
    [verdict] = store.latest_reviews([baker.id]).values()
    assert (verdict.reviewer, verdict.comment) == ("rita", "a Baker here bakes bread only: narrower")

    # The curator answers with a new decision on the pair: done again, and proposed for review.
    store.decide(terms["B1"], BAKER, "narrowMatch", alice, concept_label="baker")
    assert store.queue("tst", status="returned") == []
    assert store.term_by_id(terms["B1"]).status == "done"
    # Rejecting the mapping herself also settles it: the term has no match left to do.
    store.review([store.current(terms["B1"])[0].id], rita, "rejected")
    store.decide(terms["B1"], BAKER, "rejected", alice)
    assert store.queue_counts("tst")["returned"] == 0 and store.term_by_id(terms["B1"]).status == "todo"


def test_select_all_leaves_conflicts_out_unless_asked(team: tuple[Store, dict[str, int]]) -> None:
    store, terms = team
    alice, bob = store.sign_in("alice", "alice-secret-1"), store.sign_in("bob", "bob-secret-1")
    rita = store.sign_in("rita", "rita-secret-1")
    store.decide(terms["B1"], BAKER, "exactMatch", alice)
    store.decide(terms["B1"], BAKER, "narrowMatch", bob)  # the two disagree on Baker
    nurse = store.decide(terms["N1"], NURSE, "exactMatch", alice)
    items = store.review_queue("tst", "proposed")
    assert len(items) == 2

    assert [i.decision.id for i in select_all(items)] == [nurse.id]
    assert len(select_all(items, include_conflicting=True)) == 2
    store.review([i.decision.id for i in select_all(items)], rita, "confirmed")
    [left] = store.review_queue("tst", "proposed")
    assert (left.decision.term_code, left.conflict) == ("B1", "alice: exactMatch · bob: narrowMatch")


def test_refusals_name_the_mapping_not_an_id(team: tuple[Store, dict[str, int]]) -> None:
    store, terms = team
    alice, rita = store.sign_in("alice", "alice-secret-1"), store.sign_in("rita", "rita-secret-1")
    hers = store.decide(terms["B1"], BAKER, "exactMatch", rita, concept_label="baker")
    with pytest.raises(NotAllowed) as refused:
        store.review([hers.id], rita, "confirmed")
    assert str(refused.value) == "“Baker” → baker is your own decision: another reviewer reviews it"
    old = store.decide(terms["B2"], PASTRY, "exactMatch", alice)  # no label: the URI's last segment
    store.decide(terms["B2"], PASTRY, "closeMatch", alice)
    with pytest.raises(ValueError) as stale:
        store.review([old.id], rita, "confirmed")
    assert str(stale.value) == "“Konditor” → pastry-baker is no longer the current decision of its pair: reload"


# -- the pages ----------------------------------------------------------------------------------


@pytest.fixture
def shared_app(started: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """MELO_AUTH=on over the started nor_no store: curators alice and bob, reviewer rita."""
    monkeypatch.setenv("MELO_AUTH", "on")
    with Store(started) as store:
        for name, role in (("alice", "curator"), ("bob", "curator"), ("rita", "reviewer")):
            store.add_account(name, role, f"{name}-secret-1")
    return started


def said_beside_the_buttons(app: AppTest) -> list[str]:
    """What the column beside Confirm and Reject (one row of three columns) says."""
    columns = list(app.columns)
    confirm = next(i for i, c in enumerate(columns) if any(b.key == "cw_confirm" for b in c.button))
    assert any(b.key == "cw_reject" for b in columns[confirm + 1].button)
    said = columns[confirm + 2]
    return [e.value for e in [*said.success, *said.error]]


def test_select_all_skips_conflicts_and_an_action_clears_the_selection(shared_app: str) -> None:
    with Store(shared_app) as store:
        alice, bob = store.sign_in("alice", "alice-secret-1"), store.sign_in("bob", "bob-secret-1")
        terms = store.queue("nor_no", limit=3)
        uri = store.find_concepts("lege", limit=1)[0].uri
        store.decide(terms[0].id, uri, "exactMatch", alice)
        store.decide(terms[0].id, uri, "narrowMatch", bob)  # a conflict
        for t in terms[1:]:
            store.decide(t.id, uri, "exactMatch", alice)
    app = sign_in(shared_page(CROSSWALK).run(), "rita", "rita-secret-1")
    assert not app.exception
    app.checkbox(key="cw_review_all").check().run()
    assert app.checkbox(key="cw_review_all").label == "Select all 2 shown without a conflict"
    assert app.button(key="cw_confirm").label == "Confirm selected (2)"
    app.checkbox(key="cw_review_conflicting").check().run()
    assert app.button(key="cw_confirm").label == "Confirm selected (3)"
    app.checkbox(key="cw_review_conflicting").uncheck().run()

    app.text_input(key="cw_review_comment").input("checked against ISCO")
    app.button(key="cw_confirm").click().run()
    assert not app.exception
    assert said_beside_the_buttons(app) == ["Confirmed 2 mapping(s)."]
    assert app.checkbox(key="cw_review_all").value is False
    assert app.text_input(key="cw_review_comment").value == ""
    assert app.button(key="cw_confirm").label == "Confirm selected (0)"
    with Store(shared_app) as store:
        [left] = store.review_queue("nor_no", "proposed")
        assert left.decision.term_id == terms[0].id and left.conflict
        assert {r.comment for i in store.review_queue("nor_no", "confirmed") for r in store.reviews(i.decision.id)} == {
            "checked against ISCO"
        }

    # A row chosen by hand, rejected: the rows move on, so the selection is cleared too.
    app.session_state["cw_review_table"] = {"selection": {"rows": [0]}}
    app.run()
    assert app.button(key="cw_reject").label == "Reject selected (1)"
    app.text_input(key="cw_review_comment").input("which doctor?")
    app.button(key="cw_reject").click().run()
    assert not app.exception
    assert said_beside_the_buttons(app)[0].startswith("Rejected 1 mapping(s).")
    assert list(app.session_state["cw_review_table"]["selection"]["rows"]) == []
    assert app.button(key="cw_reject").label == "Reject selected (0)"
    assert app.text_input(key="cw_review_comment").value == ""


def test_a_refusal_shows_beside_the_buttons_without_ids(shared_app: str) -> None:
    with Store(shared_app) as store:
        rita = store.sign_in("rita", "rita-secret-1")
        term = store.queue("nor_no", limit=1)[0]
        concept = store.find_concepts("lege", limit=1)[0]
        decision = store.decide(term.id, concept.uri, "exactMatch", rita, concept_label=concept.label)
    app = sign_in(shared_page(CROSSWALK).run(), "rita", "rita-secret-1")
    app.session_state["cw_review_table"] = {"selection": {"rows": [0]}}
    app.run()
    app.button(key="cw_confirm").click().run()
    assert not app.exception
    expected = f"Nothing reviewed: “{term.label}” → {concept.label} is your own decision: another reviewer reviews it"
    [said] = said_beside_the_buttons(app)
    assert said.replace("\\", "") == expected  # md_text escapes markdown characters
    assert f"decision {decision.id}" not in said and len(app.error) == 1  # there only, not atop the page
    assert app.button(key="cw_confirm").label == "Confirm selected (1)"  # refused: the choice stays, to be put right


def test_without_sign_in_the_review_buttons_are_disabled_with_the_reason(started: str) -> None:
    with Store(started) as store:
        term = store.queue("nor_no", limit=1)[0]
        store.decide(term.id, store.find_concepts("lege", limit=1)[0].uri, "exactMatch", "bob")
    app = app_page(CROSSWALK, curator="rita").run()  # anyone may type "rita"
    app.checkbox(key="cw_review_all").check().run()
    assert not app.exception
    assert app.button(key="cw_confirm").label == "Confirm selected (1)"
    assert app.button(key="cw_confirm").disabled and app.button(key="cw_reject").disabled
    assert any(c.value.startswith("Reviewing needs sign-in") for c in app.caption)


def test_the_link_page_shows_a_returned_term_with_the_verdict_and_comment(started: str) -> None:
    with Store(started) as store:
        term = store.queue("nor_no", limit=2)[1]
        concept = store.find_concepts("lege", limit=1)[0]
        decision = store.decide(term.id, concept.uri, "exactMatch", "alice", concept_label=concept.label)
        store.review([decision.id], "rita", "rejected", comment="too broad for this title")
    app = app_page(LINK).run()
    assert not app.exception
    assert app.radio(key="link_status").options == ["todo", "returned", "unsure", "done", "all"]
    assert [w.value for w in app.warning] == ["1 term returned by a reviewer, with the verdict and comment."]
    app.button(key="link_show_returned").click().run()
    assert not app.exception
    assert app.radio(key="link_status").value == "returned"
    assert app.subheader[0].value == term.label
    [notice] = [w.value.replace("\\", "") for w in app.warning]
    assert notice == (
        f"Returned: rita rejected exactMatch {concept.label} — “too broad for this title”. "
        "Decide it again (the same or another relation), or reject it."
    )


def test_in_the_browser_a_rejection_clears_the_selection_and_reaches_the_curator(
    page: Any, nor_data: Path, esco_csv: Path, tmp_path: Path
) -> None:
    """The real front end holds the table's selection: after an action it is cleared, so the row
    that moves up into the reviewed row's place is not selected in its turn (AppTest has no table)."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
        store.add_account("alice", "curator", "alice-secret-1")
        store.add_account("rita", "reviewer", "rita-secret-1")
        alice = store.sign_in("alice", "alice-secret-1")
        doctor = store.find_concepts("lege", limit=1)[0]
        for term in store.queue("nor_no", limit=2):
            store.decide(term.id, doctor.uri, "exactMatch", alice, concept_label=doctor.label)
    with serve(curation_env(nor_data, esco_csv, tmp_path, url, shared=True), tmp_path / "streamlit.log") as app_url:
        page.goto(f"{app_url}/Crosswalk")
        sign_in_browser(page, "rita", "rita-secret-1")
        queue = page.locator(".st-key-cw_review")
        page.get_by_role("button", name="Reject selected (0)").wait_for()
        grid = queue.locator("[data-testid='stDataFrame']")
        grid.scroll_into_view_if_needed()  # the mouse clicks where the viewport shows it
        page.wait_for_timeout(1000)  # the table drawn
        box = grid.bounding_box()
        page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the first row's checkbox
        comment = page.get_by_label("Review comment (optional)")
        comment.fill("too broad for this title")
        page.get_by_role("button", name="Reject selected (1)").click()
        page.get_by_text("Rejected 1 mapping(s).").wait_for()
        page.get_by_role("button", name="Reject selected (0)").wait_for()  # the second term is first now
        assert comment.input_value() == ""

        page.goto(f"{app_url}/Link")  # a new session: the curator signs in
        sign_in_browser(page, "alice", "alice-secret-1")
        page.get_by_text("1 term returned by a reviewer").wait_for()
        page.get_by_role("button", name="Show returned").click()
        page.get_by_text("Returned: rita rejected exactMatch").wait_for()
        assert page.get_by_text("too broad for this title").count() == 1
