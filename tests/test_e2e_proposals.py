"""Machine proposals in a real browser (headless Chromium through Playwright): the proposals for a
scheme appear on the Crosswalk page, a curator confirms them all with one key (Y) and rejects a later
one with another (N); the SKOS CSV and SSSOM downloads hold the confirmed ones as her mappings, with
the tool that proposed them and its probability."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from db.quickstart import start_curation
from db.store import NewProposal, Store
from tests.test_e2e_browser import curation_env, serve
from tests.test_e2e_browser import page as page  # the Chromium fixture, reused (it skips without Chromium)


@pytest.fixture
def proposed_app(nor_data: Path, esco_csv: Path, tmp_path: Path) -> Iterator[tuple[str, str, list[str]]]:
    """The app over the nor_no start with three open proposals (the first three terms, each to a
    doctor concept, as `propose` would record them); yields (app URL, store URL, their term labels)."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
        terms = store.queue("nor_no", limit=4)[:3]  # the fourth is proposed later in the test
        doctors = store.find_concepts("lege", limit=3)
        found = [NewProposal(t.id, c.uri, c.name or c.label, "closeMatch", 0.8, 0.97 - i / 100)
                 for i, (t, c) in enumerate(zip(terms, doctors, strict=True))]  # fmt: skip
        assert store.add_proposals("nor_no", found, tool_version="e2e-1", pipeline="best", target_precision=0.95,
                                   threshold=0.9) == 3  # fmt: skip
    with serve(curation_env(nor_data, esco_csv, tmp_path, url), tmp_path / "streamlit.log") as app:
        yield app, url, [t.label for t in terms]


def test_proposals_are_confirmed_with_the_keyboard_and_export_as_mappings(
    page: Any, proposed_app: tuple[str, str, list[str]]
) -> None:
    app_url, store_url, labels = proposed_app
    page.goto(f"{app_url}/Crosswalk?scheme=nor_no&curator=Carla")
    block = page.locator(".st-key-cw_proposals")
    block.get_by_text("Machine proposals").wait_for()
    page.get_by_role("button", name="Confirm all 3").wait_for()
    block.scroll_into_view_if_needed()
    page.evaluate("document.activeElement && document.activeElement.blur()")
    # One key confirms every proposal shown: each becomes Carla's decision.
    page.keyboard.press("y")
    page.get_by_text("Confirmed 3 proposal(s).").wait_for()
    page.get_by_role("button", name="Confirm all 0").wait_for()
    with Store(store_url) as store:
        decided = store.crosswalk("nor_no")
        assert sorted(d.term_label for d in decided) == sorted(labels)
        provenance = {(d.curator, d.outcome, d.proposed_by) for d in decided}
        assert provenance == {("Carla", "closeMatch", "MELO Studio e2e-1 (best)")}
        assert store.proposals("nor_no") == []
        # A later proposal, rejected with the other key: no decision, and it does not come back.
        fourth = store.queue("nor_no", limit=1)[0]
        late = NewProposal(fourth.id, decided[0].concept_uri, None, "closeMatch", 0.7, 0.91)
        store.add_proposals("nor_no", [late], tool_version="e2e-1", pipeline="best", target_precision=0.95,
                            threshold=0.9)  # fmt: skip
    page.reload()
    page.get_by_role("button", name="Reject all 1").wait_for()
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("n")
    page.get_by_text("Rejected 1 proposal(s).").wait_for()
    with Store(store_url) as store:
        assert [p.status for p in store.proposals("nor_no", status=None) if p.term_id == fourth.id] == ["rejected"]
        assert len(store.crosswalk("nor_no", outcomes=None)) == 3

    # The downloads hold them as Carla's mappings, with the tool that proposed them.
    page.get_by_text("The downloads hold 3 decisions.").wait_for()
    with page.expect_download() as download_info:
        page.get_by_role("button", name="SKOS CSV").click()
    rows = list(csv.DictReader(io.StringIO(Path(download_info.value.path()).read_text(encoding="utf-8"))))
    assert sorted(r["source_label"] for r in rows) == sorted(labels)
    assert {(r["relation"], r["curator"]) for r in rows} == {("skos:closeMatch", "Carla")}
    assert all("proposed by MELO Studio e2e-1 (best)" in r["comments"] for r in rows)
    with page.expect_download() as download_info:
        page.get_by_role("button", name="SSSOM TSV").click()
    text = Path(download_info.value.path()).read_text(encoding="utf-8")
    table = list(csv.DictReader([line for line in text.splitlines() if not line.startswith("#")], delimiter="\t"))
    assert {(r["author_label"], r["mapping_tool"]) for r in table} == {("Carla", "MELO Studio e2e-1 (best)")}
    assert sorted(r["confidence"] for r in table) == ["0.95", "0.96", "0.97"]
