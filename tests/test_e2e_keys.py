"""Fast keys on the Link page, in a real browser (issue 90): a number key picks a candidate and a
letter decides it, 50 ms apart, on term after term; every stored decision must be the candidate of
that number with that relation. Before, "2" then "B" saved candidate 1 as broadMatch: the number
key's pick was made on the server, and the letter's submit carried the radio value the browser still
held.

Skips like tests/test_e2e_browser.py when Playwright or Chromium is missing."""

from __future__ import annotations

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
        page.wait_for_timeout(500)
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
