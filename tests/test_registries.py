"""Registries where things are added (issue 88, item 5): a new export format is one writer plus
one entry of ``db.exports.EXPORT_FORMATS``, and the CLI's ``export --format`` and the Crosswalk
page's downloads offer it with nothing else changed; one SKOS relation list
(``melo_core.esco.crosswalk.SKOS_RELATIONS``) serves the core, the store, imports and the Link page's
buttons. Real data: the Norwegian crosswalk."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from db.exports import EXPORT_FORMATS, ExportFormat, ExportOptions, mappings, register_export_format
from db.imports import read_crosswalk
from db.models import MATCH_OUTCOMES, REJECTED, UNSURE
from db.quickstart import start_curation
from db.store import Store
from db.testing import run_cli, run_cli_ok
from melo_core.errors import MeloInputError
from melo_core.esco.crosswalk import RELATIONS, SKOS_RELATIONS
from tests.conftest import ROOT
from tests.test_pages_curation import LINK, cache, env, page, started  # noqa: F401 (fixtures)
from ui import navigation
from ui.navigation import AppPage

WRITTEN: list[tuple[str, ExportOptions, str]] = []  # what the toy format wrote: (scheme, options, text)


def _json_lines(store: Store, scheme: str, options: ExportOptions) -> tuple[str, int]:
    """The toy format: one JSON object per current mapping."""
    rows = mappings(store, scheme, negatives=options.negatives, confirmed_only=options.confirmed_only)
    text = "".join(json.dumps({"code": m.subject_code, "relation": m.predicate, "concept": m.object_uri}) + "\n"
                   for m in rows)  # fmt: skip
    WRITTEN.append((scheme, options, text))
    return text, len(rows)


@pytest.fixture
def toy_format() -> Iterator[ExportFormat]:
    WRITTEN.clear()
    entry = register_export_format(
        ExportFormat(
            name="jsonl", label="JSON lines", write=_json_lines, extension="jsonl", media_type="application/jsonl"
        )
    )
    yield entry
    del EXPORT_FORMATS[entry.name]


@pytest.fixture
def decided(nor_data: Path, tmp_path: Path) -> tuple[str, str]:
    """A store with the nor_no terms, one of them decided: (store URL, the decided concept)."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
        term = store.terms("nor_no")[0]
        concept = store.find_concepts("lege")[0].uri
        store.decide(term.id, concept, "exactMatch", "alice")
    return url, concept


def test_a_registered_format_is_an_export_choice_of_the_cli(toy_format: ExportFormat, decided: tuple[str, str],
                                                            tmp_path: Path) -> None:  # fmt: skip
    url, concept = decided
    code, _, err = run_cli("export", "--scheme", "nor_no", "--format", "yaml", "--out", "-", "--db", url)
    assert code == 2 and "'jsonl'" in err and "'skos-csv'" in err  # the refusal lists the registry
    assert "jsonl" in run_cli_ok("export", "--help")
    out = tmp_path / "nor_no.jsonl"
    run_cli_ok("export", "--scheme", "nor_no", "--format", "jsonl", "--out", str(out), "--db", url)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(row["relation"], row["concept"]) for row in rows] == [("exactMatch", concept)]
    # Options the toy does not take are refused by the registry, naming the formats that do.
    code, _, err = run_cli("export", "--scheme", "nor_no", "--format", "jsonl", "--out", "-", "--db", url,
                           "--undecided")  # fmt: skip
    assert code == 2 and "--undecided goes with --format skos-csv, not jsonl" in err


def test_a_registered_format_is_a_download_of_the_crosswalk_page(
    toy_format: ExportFormat, decided: tuple[str, str], nor_data: Path, esco_csv: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    url, concept = decided
    for name, value in (("MELO_DATA", nor_data), ("MELO_ESCO", esco_csv), ("MELO_CACHE", tmp_path / "cache"),
                        ("MELO_DB_URL", url)):  # fmt: skip
        monkeypatch.setenv(name, str(value))
    monkeypatch.chdir(ROOT)
    app = AppTest.from_file(str(ROOT / "pages" / "3_Crosswalk.py"), default_timeout=60)
    app.session_state["curator"] = "alice"
    app.run()
    assert not app.exception
    assert [d.label for d in app.download_button] == ["SKOS CSV", "SSSOM TSV", "JSON lines"]
    assert [(scheme, options.negatives) for scheme, options, _ in WRITTEN] == [("nor_no", False)]
    assert concept in WRITTEN[0][2]
    assert app.button(key="cw_write_turtle").label == "Write SKOS Turtle"  # still written on request
    app.checkbox(key="cw_negatives").check().run()  # the page's options reach the writer
    assert not app.exception and [options.negatives for _, options, _ in WRITTEN] == [False, True]


@pytest.mark.usefixtures("started")
def test_one_skos_relation_list_serves_core_store_imports_and_the_link_page() -> None:
    assert MATCH_OUTCOMES is SKOS_RELATIONS and RELATIONS == SKOS_RELATIONS[:-1]  # the JSON has no relatedMatch
    app = page(LINK).run()
    assert not app.exception
    keys = [re.fullmatch(r"link_([a-zA-Z]+)_\d+", b.key or "") for b in app.button]  # decide_key(term, outcome)
    assert [key[1] for key in keys if key] == [*SKOS_RELATIONS, REJECTED, UNSURE]
    decide = [b for b, key in zip(app.button, keys, strict=True) if key]
    assert [b.label for b in decide][:5] == ["Exact", "Narrow", "Broad", "Close", "Related"]


def test_a_crosswalk_import_names_the_relations_of_the_one_list(tmp_path: Path) -> None:
    path = tmp_path / "xx_yy.json"
    path.write_text(json.dumps({"1": {"title": "Baker", "matches": {"http://example.org/c": "relatedMatch"}}}))
    with pytest.raises(MeloInputError, match=f"expected one of {', '.join(RELATIONS)}"):
        read_crosswalk(path)
    path.write_text(json.dumps({"1": {"title": "Baker", "matches": {"http://example.org/c": "exactISCO"}}}))
    [decision] = read_crosswalk(path, with_decisions=True).decisions
    assert decision.outcome == "exactMatch"  # RELATION_ALIASES


@pytest.mark.usefixtures("started")
def test_a_page_added_to_the_one_list_is_in_the_navigation_and_linked_from_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert sorted(page.script for page in navigation.PAGES) == sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "pages").glob("*.py")
    )
    toy = tmp_path / "8_Toy.py"
    toy.write_text('import streamlit as st\n\nst.write("a toy page")\n')
    monkeypatch.setattr(navigation, "PAGES", (*navigation.PAGES, AppPage(str(toy), "Play with the toy", "🧸")))
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not app.exception
    links = [(link.proto.label, link.proto.page) for link in app.get("page_link")][-len(navigation.PAGES) :]
    assert links[:2] == [("Browse the datasets", "Datasets"), ("Link terms to ESCO (curation)", "Link")]
    assert links[-1] == ("Play with the toy", "Toy")  # the URL: the file name without the number
    app.switch_page(str(toy)).run()
    assert not app.exception and [m.value for m in app.markdown] == ["a toy page"]
