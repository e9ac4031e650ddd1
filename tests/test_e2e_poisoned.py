"""A poisoned store in a real browser (issue 87): term labels and descriptions, concept labels,
curator names, comments, review comments and the ``?curator=`` address parameter hold image
markdown and raw ``<img>`` tags pointing at a local port that nothing should ever contact. Home,
Link, Crosswalk (its review queue and comments) and Import are opened in headless Chromium; no
request may leave for any host but the app, and the port must see no connection.

Skips like tests/test_e2e_browser.py when Playwright or Chromium is missing."""

from __future__ import annotations

import csv
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from db.imports import import_terms, read_term_file
from db.quickstart import start_curation
from db.store import Store
from tests.test_e2e_browser import curation_env, free_port, serve
from tests.test_e2e_browser import page as page  # the Chromium fixture, reused (it skips without Chromium)


class Trap:
    """A local HTTP server that records every request: the host the poison points at."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(404)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def poison(self, where: str) -> str:
        """Image markdown and a raw image tag, each fetching ``where`` from the trap if rendered."""
        return f"![x](http://{self.host}/{where}.png) <img src=http://{self.host}/{where}-tag.png> {where}"


@pytest.fixture
def trap() -> Iterator[Trap]:
    opened = Trap()
    try:
        yield opened
    finally:
        opened.server.shutdown()
        opened.server.server_close()


@pytest.fixture
def poisoned_app(page: Any, trap: Trap, nor_data: Path, esco_csv: Path, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """The app over the nor_no start plus a scheme ``poison`` whose term carries poisoned text
    everywhere a user can put it; yields (app URL, the poisoned term's id). ``page`` first: the
    test skips before anything is built when Chromium is missing."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    terms = tmp_path / "poison.csv"
    with terms.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["code", "label", "description"])
        writer.writerow(["P1", trap.poison("term-label"), trap.poison("term-description")])
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
        import_terms(store, "poison", read_term_file(terms, "csv"), language="no")
        concept = store.find_concepts("lege", limit=1)[0]
        # The first nor_no term (the Crosswalk page's first row) and the poison scheme's term, a
        # rejection there so that the Link page's queue (to do) still shows it.
        [term] = store.terms("poison")
        for term_id, outcome in ((store.queue("nor_no", limit=1)[0].id, "exactMatch"), (term.id, "rejected")):
            decision = store.decide(term_id, concept.uri, outcome, trap.poison("curator"),
                                    comment=trap.poison("decision-comment"),
                                    concept_label=trap.poison("concept-label"))  # fmt: skip
            store.review([decision.id], trap.poison("reviewer"), "confirmed", trap.poison("review-comment"))
            store.add_comment(decision.id, trap.poison("comment-author"), trap.poison("comment"))
    with serve(curation_env(nor_data, esco_csv, tmp_path, url), tmp_path / "streamlit.log") as app:
        yield app, term.id  # the poison scheme's


def test_nothing_typed_makes_the_browser_fetch_anything(page: Any, poisoned_app: tuple[str, int], trap: Trap) -> None:
    app_url, term_id = poisoned_app
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    curator = quote(trap.poison("url-curator"))

    def nothing_fetched(where: str) -> None:
        page.wait_for_timeout(1500)  # an image starts loading as soon as it is in the page
        # blob: URLs of the app's own origin are in memory: the Link page's key component loads its inline script so.
        assert [r for r in requests if not r.startswith((app_url, f"blob:{app_url}/"))] == [], where
        assert trap.hits == [], where
        assert page.locator(f"img[src*='{trap.host}']").count() == 0, where

    def shown(*names: str) -> None:
        """Each poisoned text is on the page as text (its image's URL readable)."""
        for name in names:
            page.get_by_text(f"{trap.host}/{name}.png", exact=False).filter(visible=True).first.wait_for()

    page.goto(f"{app_url}/?curator={curator}")
    page.get_by_text("Link occupation names to the ESCO taxonomy").wait_for()
    nothing_fetched("Home")

    page.goto(f"{app_url}/Link?curator={curator}&scheme=poison&term={term_id}")
    page.get_by_role("button", name="Exact").wait_for()
    nothing_fetched("Link")
    shown("term-label", "term-description", "concept-label", "curator", "reviewer", "url-curator")

    page.goto(f"{app_url}/Crosswalk?curator={curator}")
    review = page.locator(".st-key-cw_review")
    review.get_by_text("Review queue").wait_for()
    review.get_by_text("all", exact=True).click()  # the poisoned decisions are confirmed
    page.get_by_text("Comments on a decision").click()
    page.get_by_text("Your comment").wait_for()
    nothing_fetched("Crosswalk")
    shown("comment", "comment-author", "review-comment", "reviewer")

    page.goto(f"{app_url}/Import?curator={curator}")
    page.get_by_text("Source terms").first.wait_for()
    nothing_fetched("Import")
