"""Fast keys on the Link page, in a real browser (issue 90): a number key picks a candidate and a
letter decides it, 50 ms apart, on term after term; every stored decision must be the candidate of
that number with that relation. Before, "2" then "B" saved candidate 1 as broadMatch: the number
key's pick was made on the server, and the letter's submit carried the radio value the browser still
held.

Skips like tests/test_e2e_browser.py when Playwright or Chromium is missing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from db.quickstart import start_curation
from db.store import Store
from tests.test_e2e_browser import curation_env, serve
from tests.test_e2e_browser import page as page  # the Chromium fixture, reused (it skips without Chromium)
from tests.test_pages_curation import LINK, button
from tests.test_pages_curation import cache as cache  # the AppTest fixtures, reused
from tests.test_pages_curation import env as env
from tests.test_pages_curation import page as curation_page
from tests.test_pages_curation import started as started

RELATIONS = {"e": "exactMatch", "n": "narrowMatch", "b": "broadMatch", "l": "closeMatch", "t": "relatedMatch"}
# Keys typed 50 ms apart on successive terms: the last number before the letter is the candidate.
SEQUENCES = ("2b", "3l", "1e", "5n", "4t", "7b", "3e", "36n", "92l", "0e")
GAP_MS = 50


@pytest.fixture
def keys_app(nor_data: Path, esco_csv: Path, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The app over the nor_no curation start; yields (app URL, store URL)."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
    with serve(curation_env(nor_data, esco_csv, tmp_path, url), tmp_path / "streamlit.log") as app:
        yield app, url


def settled(page: Any) -> None:
    """Wait until the app has drawn the whole page (the script ran to its end) and the number keys
    listen (their script loads after the page is drawn; code without them goes on after 10 s)."""
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for()
    with contextlib.suppress(Exception):
        page.wait_for_function("() => document.body.dataset.meloNumberKeys === 'on'", timeout=10_000)


def candidate_uri(store: Store, term_id: int, scorer: str | None, rank: int) -> str:
    """The URI the page listed at ``rank`` for the term (its suggestions are stored when first shown)."""
    [suggestion] = [s for s in store.suggestions(term_id, scorer) if s.rank == rank]
    return suggestion.concept_uri


def test_number_then_letter_50_ms_apart_decides_that_candidate(page: Any, keys_app: tuple[str, str]) -> None:
    app, url = keys_app
    with Store(url) as store:
        terms = store.queue("nor_no", limit=len(SEQUENCES))
    page.goto(f"{app}/Link")
    page.get_by_label("Your name (recorded with every decision)").fill("Alice")
    page.get_by_role("button", name="Start").click()
    for term, sequence in zip(terms, SEQUENCES, strict=True):
        # The term on screen, its candidates listed, and nothing left running from the last decision.
        page.locator(f".st-key-link_choice_{term.id}").get_by_text("10. ", exact=False).wait_for()
        page.get_by_role("heading", name=term.label, exact=True).wait_for()
        settled(page)
        page.evaluate("document.activeElement && document.activeElement.blur()")
        for key in sequence:
            page.keyboard.press(key)
            page.wait_for_timeout(GAP_MS)
        page.get_by_text(f"Saved: {term.label} →").first.wait_for(timeout=20_000)
        digit, letter = sequence[-2], sequence[-1]
        rank = "1234567890".index(digit) + 1
        with Store(url) as store:
            [decision] = store.current(term.id)
            expected = candidate_uri(store, term.id, decision.scorer, rank)
        assert (decision.rank, decision.concept_uri, decision.outcome) == (rank, expected, RELATIONS[letter]), (
            f"keys {sequence!r} on {term.label!r}"
        )
    with Store(url) as store:
        assert store.queue_counts("nor_no")["done"] == len(SEQUENCES)


def test_two_submits_merged_into_one_rerun_save_neither(started: str) -> None:
    """A second submit sent while the server is busy merges with the first (Streamlit keeps both
    buttons' triggers, and only the later radio value): which candidate went with which key is lost,
    so nothing is saved and the curator is asked to press again."""
    with Store(started) as store:
        term = store.queue("nor_no", limit=1)[0]
    app = curation_page(LINK).run()
    table = app.dataframe[0].value
    app.radio(key=f"link_choice_{term.id}").set_value(f"3|{table.iloc[2]['uri']}")
    button(app, "Broad").click()
    button(app, "Close").click().run()
    assert not app.exception
    with Store(started) as store:
        assert store.current(term.id) == []
    assert any("neither was saved: press the number and the letter again" in c.value for c in app.caption)
    assert app.subheader[0].value == term.label  # still on the term, the radio still on candidate 3
    assert app.radio(key=f"link_choice_{term.id}").value == f"3|{table.iloc[2]['uri']}"
    button(app, "Close").click().run()  # one submit: saved as shown
    with Store(started) as store:
        [decision] = store.current(term.id)
    assert (decision.concept_uri, decision.outcome, decision.rank) == (table.iloc[2]["uri"], "closeMatch", 3)


def test_keys_in_the_comment_box_are_text_and_a_mouse_pick_is_what_a_letter_decides(
    page: Any, keys_app: tuple[str, str]
) -> None:
    app, url = keys_app
    with Store(url) as store:
        term = store.queue("nor_no", limit=1)[0]
    page.goto(f"{app}/Link")
    page.get_by_label("Your name (recorded with every decision)").fill("Alice")
    page.get_by_role("button", name="Start").click()
    radio = page.locator(f".st-key-link_choice_{term.id}")
    radio.get_by_text("10. ", exact=False).wait_for()
    settled(page)
    checked = f"() => [...document.querySelectorAll('.st-key-link_choice_{term.id} input[type=radio]')]" \
        ".findIndex((input) => input.checked)"  # fmt: skip
    comment = page.get_by_label("Comment (optional)")
    comment.press_sequentially("7 e", delay=GAP_MS)
    assert page.evaluate(checked) == 0 and comment.input_value() == "7 e"  # text, not a pick nor a decision
    radio.get_by_role("radio").nth(3).locator("xpath=ancestor::label[1]").click()  # the mouse checks candidate 4
    assert page.evaluate(checked) == 3
    page.keyboard.press("n")  # the focus on the radio: the letter still decides
    page.get_by_text(f"Saved: {term.label} →").first.wait_for(timeout=20_000)
    with Store(url) as store:
        [decision] = store.current(term.id)
        assert (decision.rank, decision.outcome, decision.comment) == (4, "narrowMatch", "7 e")
        assert decision.concept_uri == candidate_uri(store, term.id, decision.scorer, 4)


def test_a_press_on_the_previous_terms_buttons_while_the_next_is_drawn_saves_nothing(started: str) -> None:
    """The term selector is drawn first: when it already shows the next term, a submit from the
    previous term's form (still on screen a moment) is refused, not saved on a term no longer shown."""
    with Store(started) as store:
        first, second = store.queue("nor_no", limit=2)
    app = curation_page(LINK).run()
    assert app.subheader[0].value == first.label
    app.selectbox(key="link_term").set_value(second.id)  # what the browser shows when the stale form is pressed
    button(app, "Broad").click().run()  # the first term's form
    assert not app.exception
    assert any("Nothing saved: the page was drawing the next term" in c.value for c in app.caption)
    with Store(started) as store:
        assert store.current(first.id) == [] and store.current(second.id) == []
    assert app.subheader[0].value == second.label
    button(app, "Broad").click().run()  # the second term's form, on screen: saved
    with Store(started) as store:
        assert [d.outcome for d in store.current(second.id)] == ["broadMatch"]
