"""Concept search (``Store.find_concepts``) on the real ESCO CSV export: word-based, accent- and
case-insensitive, one result per concept with its preferred name, ISCO code and the label that
matched (issue 90: "nurse care" found nothing, "nurse" ranked nursemaid first, two "market
research manager" hits could not be told apart). SQLite, and PostgreSQL when configured."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from db.formats import search_fold
from db.imports import import_taxonomy
from db.quickstart import start_curation
from db.search import label_search_text, search_words
from db.store import LabelMatch, Store, _alembic_config
from db.testing import empty_store_url, run_cli_ok
from melo_core.esco.taxonomy import Concept, LanguageLabels, Taxonomy
from tests.conftest import BACKENDS_UNDER_TEST
from tests.test_pages_curation import LINK, ROOT, page
from ui.safe import md_text

OCCUPATION = "http://data.europa.eu/esco/occupation/"
BAKER_NAME = "baker"


@pytest.fixture(scope="module", params=BACKENDS_UNDER_TEST)
def esco_store(
    request: pytest.FixtureRequest, esco_csv: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """The whole ESCO CSV export (3,561 concepts, 33,629 English labels), imported once per backend
    with the command line, and German labels for the baker in a second taxonomy (the same URI)."""
    with empty_store_url(request.param, tmp_path_factory.mktemp("search")) as url:
        run_cli_ok("import-taxonomy", "--esco-csv", str(esco_csv), "--db", url, "--quiet")
        with Store(url) as store:
            [baker] = [m for m in store.find_concepts("baker", language="en") if m.name == BAKER_NAME]
            german = Concept(baker.uri, 1, "occupation", {"de": LanguageLabels("Bäcker/Bäckerin", ("Brotbäcker",))},
                             isco_code="7512")  # fmt: skip
            import_taxonomy(store, Taxonomy([german]), "esco-de", "slice")
            yield store


def by_name(found: list[LabelMatch]) -> dict[str, LabelMatch]:
    return {m.name: m for m in found}


def test_nurse_care_finds_the_nursing_concepts(esco_store: Store) -> None:
    found = esco_store.find_concepts("nurse care")
    assert found[0].name == "nurse responsible for general care" and found[0].isco_code == "2221"
    assert found[0].label == "nurse responsible for general care" and found[0].label_kind == "preferred"
    # Every word in one label, in any order: "intensive care neonatal nurse" (a midwife's).
    assert by_name(found)["midwife"].label == "intensive care neonatal nurse"
    for match in found:  # both words in the one label that matched ("healthcare nurse": inside a word)
        assert "nurse" in search_fold(match.label) and "care" in search_fold(match.label), match


def test_typing_the_start_of_words_finds_them(esco_store: Store) -> None:
    assert esco_store.find_concepts("nurs car")[0].name == "nurse responsible for general care"
    assert esco_store.find_concepts("car nurs")[0].name == "nurse responsible for general care"  # any order


def test_nurse_ranks_nurse_concepts_above_nursemaid_and_nursery_cook(esco_store: Store) -> None:
    found = esco_store.find_concepts("nurse", limit=50)
    names = [m.name for m in found]
    # The concepts named "... nurse ..." first, then those with another label holding the word.
    named = [n for n in names if "nurse" in search_words(n)]
    assert names[: len(named)] == named and {"nurse assistant", "specialist nurse"} <= set(named)
    assert "nurse responsible for general care" in named
    # A word's start ranks after the word: the diet cook ("nursery cook") after every "nurse".
    with_word = [m.name for m in found if "nurse" in search_words(m.label)]
    assert names[: len(with_word)] == with_word
    assert "diet cook" in names and names.index("diet cook") >= len(with_word)
    assert by_name(found)["diet cook"].label != "nurse"
    # The nanny is found by its label with the word ("dry nurse"), not by "nursemaid".
    assert by_name(found)["nanny"].label == "dry nurse"


def test_one_result_per_concept_told_apart_by_name_and_isco_code(esco_store: Store) -> None:
    found = esco_store.find_concepts("market research manager")
    assert [m.label for m in found[:2]] == ["market research manager", "market research manager"]
    assert {(m.name, m.isco_code, m.concept_kind) for m in found[:2]} == {
        ("market research analyst", "2431", "occupation"),
        ("research and development manager", "1223", "occupation"),
    }
    for query in ("nurse", "manager", "baker"):
        uris = [m.uri for m in esco_store.find_concepts(query, limit=100)]
        assert uris and len(uris) == len(set(uris))  # the baker is in two taxonomies: once


def test_isco_groups_are_found_with_their_code(esco_store: Store) -> None:
    found = esco_store.find_concepts("nursing professionals")
    groups = {m.isco_code: m.name for m in found if m.concept_kind == "isco_group"}
    assert groups["2221"] == "Nursing professionals"


def test_accents_and_case_do_not_matter(esco_store: Store) -> None:
    for query in ("Bäcker", "backer", "BACKER", "bäckerin"):
        [first] = esco_store.find_concepts(query, limit=1)
        assert (first.name, first.label, first.language) == (BAKER_NAME, "Bäcker/Bäckerin", "de"), query
    # The name is the curator's language's when the concept has one.
    assert esco_store.find_concepts("backer", limit=1, language="de")[0].name == "Bäcker/Bäckerin"
    assert esco_store.find_concepts("BROTBACKER", limit=1)[0].label == "Brotbäcker"
    assert {m.name for m in esco_store.find_concepts("REPETITEUR")} == {"répétiteur", "dance répétiteur"}
    assert esco_store.find_concepts("maitre d hotel", limit=1)[0].label == "maître d'hôtel"


def test_inside_a_word_ranks_after_whole_words_and_starts(esco_store: Store) -> None:
    found = esco_store.find_concepts("smith", limit=100)
    assert {"goldsmith", "locksmith", "gunsmith"} <= {m.name for m in found}  # compounds are found
    starts = [any(w.startswith("smith") for w in search_words(m.label)) for m in found]
    assert True in starts and starts == sorted(starts, reverse=True)  # after every label with the word
    # Not from two letters on (they would match most labels): "sm" only starts words.
    short = esco_store.find_concepts("sm", limit=100)
    assert short and all(any(w.startswith("sm") for w in search_words(m.label)) for m in short)


def test_no_words_no_results(esco_store: Store) -> None:
    assert esco_store.find_concepts("  ") == [] and esco_store.find_concepts("%") == []
    assert esco_store.find_concepts("_") == [] and esco_store.find_concepts("%%%", limit=5) == []
    assert esco_store.find_concepts("nurse xyzzy") == []  # every word must match


def test_migration_0007_refills_the_search_text_of_existing_labels(store_url: str) -> None:
    from alembic import command

    with Store(store_url) as store:
        concept = Concept(OCCUPATION + "x", 1, "occupation", {"en": LanguageLabels("Children's nurse")})
        import_taxonomy(store, Taxonomy([concept]), "esco", "v1")
        with store.engine.begin() as connection:  # back to before 0007: labels folded whole
            command.downgrade(_alembic_config(connection), "0006")
            assert connection.execute(text("SELECT search_text FROM labels")).scalar() == "children's nurse"
    with Store(store_url) as store:  # opening upgrades to head
        with store.read() as session:
            assert session.execute(text("SELECT search_text FROM labels")).scalar() == " children s nurse "
        assert label_search_text("Children's nurse") == " children s nurse "
        assert [m.name for m in store.find_concepts("nurse children")] == ["Children's nurse"]


@pytest.fixture
def nor_store(nor_data: Path, esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The Link page's store (as tests/test_pages_curation.py's): the union of one dataset's
    folder, Norwegian labels only, and the nor_no terms."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    for name, value in {"MELO_DATA": nor_data, "MELO_ESCO": esco_csv, "MELO_DB_URL": url}.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.chdir(ROOT)
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
    return url


def test_the_link_page_names_each_found_concept_with_its_isco_code(nor_store: str) -> None:
    with Store(nor_store) as store:  # Norwegian labels only; "sveiser" (welder) is a label of six concepts
        term = store.queue("nor_no", limit=1)[0]
        found = store.find_concepts("SVEISER", limit=10, language="no")
    same_label = [m for m in found if m.label == "sveiser"]
    assert len(same_label) >= 2 and len({m.name for m in same_label}) == len(same_label)
    app = page(LINK).run()
    app.text_input(key="link_concept_search").input("SVEISER").run()
    assert not app.exception
    searched = [o for o in app.radio(key=f"link_choice_{term.id}").options if o.startswith("🔎")]
    # One option per concept, told apart by its name (the scheme's language) and ISCO code.
    expected = {  # the label that matched when it is not the name
        md_text(
            f"🔎 {m.name} · ISCO {m.isco_code}"
            + (f" · matched “{m.label}” ({m.language})" if m.name != m.label else "")
        )
        for m in same_label
        if m.concept_kind == "occupation"
    }
    assert len(expected) >= 2 and any("matched" in option for option in expected)
    assert expected <= set(searched) and len(searched) == len(set(searched))
