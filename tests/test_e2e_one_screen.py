"""One term fits one screen (issue 90): at 1400×900 the Link page shows the term, its ranked
candidates and every relation button without scrolling. Before, each candidate was shown in a table,
an ℹ️ row and the radio, and the Exact button sat at y = 1805 px.

Skips like tests/test_e2e_browser.py when Playwright or Chromium is missing. Set
MELO_SCREENSHOT_DIR to keep the screenshot (docs/link-page-one-screen.png comes from here)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from tests.test_e2e_browser import app_url as app_url  # the app over the nor_no start, reused
from tests.test_e2e_browser import page as page  # the Chromium fixture, reused (it skips without Chromium)
from tests.test_e2e_keys import settled

WIDTH, HEIGHT = 1400, 900
RELATIONS = ("Exact", "Narrow", "Broad", "Close", "Related", "Reject", "Unsure")
# Scrolled: the window or one of Streamlit's scrolling containers (the sidebar scrolls on its own).
SCROLLED = """() => Math.max(window.scrollY, ...[...document.querySelectorAll('*')]
    .filter(e => !e.closest('[data-testid="stSidebar"]')).map(e => e.scrollTop))"""


def on_screen(page: Any, locator: Any) -> dict[str, float]:
    """The element's box, asserted to lie inside the viewport as first drawn."""
    box = locator.bounding_box()
    assert box is not None, locator
    assert 0 <= box["y"] and box["y"] + box["height"] <= HEIGHT, (locator, box)
    assert 0 <= box["x"] and box["x"] + box["width"] <= WIDTH, (locator, box)
    return box


def test_term_candidates_and_relation_buttons_fit_1400_by_900(page: Any, app_url: str, tmp_path: Path) -> None:
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.goto(f"{app_url}/Link")
    page.get_by_label("Your name (recorded with every decision)").fill("Alice")
    page.get_by_role("button", name="Start").click()
    page.get_by_role("button", name="Exact").wait_for()
    settled(page)
    page.wait_for_timeout(1500)  # fonts and layout settle
    shots = Path(os.environ.get("MELO_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "link-page-one-screen.png"))

    fits_one_screen(page)
    # A decided term shows its current decisions above the candidates, and still fits.
    page.get_by_role("button", name=re.compile(r"^Exact\b")).click()
    page.get_by_text("Saved: Offiserer fra fenrik og høyere grad").first.wait_for()
    page.locator('[data-testid="stSidebar"]').get_by_text("done", exact=True).click()
    page.get_by_text("Current decisions:").wait_for()
    settled(page)
    page.wait_for_timeout(1000)
    fits_one_screen(page)


def fits_one_screen(page: Any) -> None:
    """Every relation button and the first and last candidate lie inside the window, unscrolled."""
    assert page.evaluate(SCROLLED) == 0
    for name in RELATIONS:
        form = page.locator('[data-testid="stForm"]')  # not the toast's Close
        on_screen(page, form.get_by_role("button", name=re.compile(rf"^{name}\b")))  # "Exact Shortcut E"
    # The radio input itself is hidden; its label is what a curator sees and clicks.
    labels = page.locator('[data-testid="stRadio"]').filter(has_text="Concept").locator('[role="radiogroup"] label')
    assert labels.count() == 10 and labels.nth(0).inner_text().startswith("1. ")
    on_screen(page, labels.nth(0))
    on_screen(page, labels.nth(labels.count() - 1))
    # Each candidate is shown once: no candidates table (the scores wait in a closed expander) or ℹ️ row repeats them.
    tables = page.locator('[data-testid="stDataFrame"]')
    assert not any(tables.nth(i).is_visible() for i in range(tables.count()))
    assert page.get_by_text("ℹ️").count() == 0
    assert page.evaluate(SCROLLED) == 0
