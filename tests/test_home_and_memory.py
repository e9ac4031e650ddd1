"""A curator's first hour (issue 90, items 7 and 9) with Streamlit's AppTest: the Home page leads
with the curation status of each scheme and a link onwards; the pages keep the scheme, term and
filters in the URL and in the session; labels, not URIs, where a person reads; one colour per
model in every chart; no "Infinity" and marked ISCO groups in the drill-down."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from db.imports import import_terms, read_terms_csv
from db.quickstart import start_curation
from db.runs import list_runs, run_queries
from db.store import Store
from melo_core.esco.datasets import load_dataset, resolve_dataset
from melo_core.esco.taxonomy import isco_code_of
from tests.test_e2e_browser import curation_env, serve
from tests.test_e2e_browser import page as page  # the fixture: headless Chromium

ROOT = Path(__file__).resolve().parent.parent
HOME = "app.py"
LINK = "pages/2_Link.py"
CROSSWALK = "pages/3_Crosswalk.py"
BENCHMARK = "pages/5_Benchmark.py"
DRILL = "pages/7_Drill_down.py"
FIRST = "aaa_titles"  # sorts before nor_no: what the pages showed whatever was asked


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: the taxonomy and the lexical pipeline are built once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def curation_url(nor_data: Path, cache: Path, esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A store with the ESCO union, the nor_no terms and a small scheme that sorts first."""
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    for name, value in (("MELO_DATA", nor_data), ("MELO_ESCO", esco_csv), ("MELO_CACHE", cache), ("MELO_DB_URL", url)):
        monkeypatch.setenv(name, str(value))
    monkeypatch.chdir(ROOT)
    titles = tmp_path / "titles.csv"
    titles.write_text("code,label\nt1,Sykepleier\nt2,Lege\n", encoding="utf-8")
    with Store(url, create=True) as store:
        start_curation(store, nor_data, "nor_no")
        import_terms(store, FIRST, read_terms_csv(titles), kind="job-titles", language="no")
    return url


def curation_page(script: str, **query: str) -> AppTest:
    app = AppTest.from_file(str(ROOT / script), default_timeout=120)
    app.session_state["curator"] = "alice"
    app.session_state["link_pipeline"] = "lexical"  # ready at once
    for name, value in query.items():
        app.query_params[name] = value
    return app


@pytest.fixture
def runs_url(run_set_db: Path, melo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A copy of the stored run set (tests/conftest.py) as the app's store."""
    copy = tmp_path / "melo.db"
    shutil.copy(run_set_db, copy)
    url = f"sqlite:///{copy}"
    monkeypatch.setenv("MELO_DATA", str(melo_data))
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MELO_DB_URL", url)
    monkeypatch.chdir(ROOT)
    return url


def open_page(script: str, **query: str | list[str]) -> AppTest:
    app = AppTest.from_file(str(ROOT / script), default_timeout=120)
    for name, value in query.items():
        app.query_params[name] = value
    app.run()
    assert not app.exception
    return app


def plotly_traces(app: AppTest, name: str) -> list[dict]:
    """The traces of the chart whose PNG is saved as ``name`` (``ui.analysis.show_chart``): the page
    may show other charts (calibration) first."""
    [chart] = [c for c in app.get("plotly_chart")
               if json.loads(c.proto.config)["toImageButtonOptions"]["filename"] == name]  # fmt: skip
    return json.loads(chart.proto.spec)["data"]


def trace_colours(traces: list[dict]) -> dict[str, str | None]:
    return {t["name"]: (t.get("marker") or {}).get("color") or (t.get("line") or {}).get("color") for t in traces}


# -- analysis pages ---------------------------------------------------------------------------------
def test_a_model_has_one_colour_in_every_chart_whatever_the_selection(runs_url: str) -> None:
    app = open_page(BENCHMARK)
    app.multiselect(key="bench_models").set_value(["char-tfidf", "edit-distance", "openai (published)"]).run()
    assert not app.exception
    bars, curves = trace_colours(plotly_traces(app, "bars_mrr")), trace_colours(plotly_traces(app, "topk_curves"))
    assert set(bars) == {"char-tfidf", "edit-distance", "openai (published)"}
    assert len(set(bars.values())) == 3 and all(bars.values())
    assert curves == bars  # bars and top-k curves agree
    # Another selection: the remaining models keep their colours (the palette's order gave them new ones).
    app.multiselect(key="bench_models").set_value(["edit-distance", "openai (published)"]).run()
    assert trace_colours(plotly_traces(app, "bars_mrr")) == {
        m: bars[m] for m in ("edit-distance", "openai (published)")
    }


def test_drill_down_comparison_has_no_infinity_and_marks_isco_groups(runs_url: str, melo_data: Path) -> None:
    app = open_page(DRILL)
    app.selectbox(key="drill_dataset").select("nor_q_no_c_no")
    app.selectbox(key="drill_model").select("char-tfidf").run()
    app.selectbox(key="drill_other").select("edit-distance").run()
    assert not app.exception
    with Store(runs_url) as store:
        runs = {r.scorer: r.id for r in list_runs(store, "ours") if r.dataset == "nor_q_no_c_no"}
        a = run_queries(store, runs["char-tfidf"]).set_index("query_id")
        b = run_queries(store, runs["edit-distance"]).set_index("query_id")
    compared = app.dataframe[1].value
    assert len(compared) > 0
    for column, run in (("first_rank_a", a), ("first_rank_b", b)):
        ranks = run.loc[compared["query_id"], "first_rank"].to_numpy()
        past_depth = ranks == float("inf")
        assert not (compared[column] == float("inf")).any()  # "Infinity" was shown
        assert compared[column][past_depth].isna().all()
        assert list(compared[column][~past_depth]) == list(ranks[~past_depth])
    assert (b["first_rank"] == float("inf")).any()  # the case is there to see

    # ISCO repeats a label across levels: a group reads "ISCO 011 …", as on the Link page.
    concept_of = load_dataset(resolve_dataset(melo_data, "nor_q_no_c_no")).concept_of
    table = app.dataframe[0].value.set_index("query_id")
    marked = 0
    for query_id, top in a["top"].items():
        cid, form = top[0]
        code = isco_code_of(concept_of[cid])
        shown = table.loc[query_id, "top 1"].removeprefix("✔ ")
        assert shown == (f"ISCO {code} {form}" if code else form)
        marked += bool(code)
    assert marked  # some top predictions of these queries are ISCO groups


def test_drill_down_opens_on_the_dataset_and_models_of_its_address(runs_url: str) -> None:
    query = {"drill_dataset": "nor_q_no_c_en", "drill_model": "edit-distance", "drill_other": "char-tfidf"}
    app = open_page(DRILL, **query)
    chosen = {key: app.selectbox(key=key).value for key in query}
    assert chosen == query
    app.selectbox(key="drill_model").select("char-tfidf").run()
    assert app.query_params["drill_model"] == "char-tfidf"  # a reload keeps the new choice
    assert app.query_params["drill_other"] == "edit-distance"


# -- Home -----------------------------------------------------------------------------------------
def test_home_leads_with_each_schemes_status_and_a_link_to_go_on(curation_url: str) -> None:
    with Store(curation_url) as store:
        terms = store.queue("nor_no", limit=3)
        uris = [m.uri for m in store.find_concepts("sykepleier", limit=2)]
        store.decide(terms[0].id, uris[0], "exactMatch", "alice")
        store.decide(terms[1].id, uris[1], "closeMatch", "alice")
        store.decide(terms[2].id, uris[0], "unsure", "alice")
        total = store.scheme("nor_no").terms  # type: ignore[union-attr]
    app = curation_page(HOME).run()
    assert not app.exception
    assert [h.value for h in app.subheader][:2] == ["Curation", "Benchmark data"]  # the CLI went to the docs
    schemes = [m.value for m in app.markdown if m.value.startswith("**")]
    assert schemes == [f"**{FIRST}** · no · 2 terms", f"**nor_no** · no · {total:,} terms"]
    metrics = [(m.label, m.value) for m in app.metric][:8]
    assert metrics == [
        ("Done", "0"), ("Left", "2"), ("Unsure", "0"), ("Under review", "0"),
        ("Done", "2"), ("Left", f"{total - 3:,}"), ("Unsure", "1"), ("Under review", "2"),
    ]  # fmt: skip
    links = [(p.proto.label, p.proto.page, p.proto.query_string) for p in app.get("page_link")][:2]
    assert links == [
        ("Continue: Link the next term (2 left)", "Link", f"scheme={FIRST}&queue=todo"),
        (f"Continue: Link the next term ({total - 3:,} left)", "Link", "scheme=nor_no&queue=todo"),
    ]


def test_home_on_a_shared_app_shows_schemes_to_signed_in_users_only(
    curation_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MELO_AUTH", "on")
    app = AppTest.from_file(str(ROOT / HOME), default_timeout=120).run()
    assert not app.exception
    assert not any(FIRST in m.value or "nor_no" in m.value for m in app.markdown)
    assert not any(m.label == "Left" for m in app.metric)
    assert any(p.proto.label.startswith("Sign in") and p.proto.page == "Link" for p in app.get("page_link"))


# -- the pages remember ---------------------------------------------------------------------------
def test_link_page_keeps_the_scheme_and_term_of_a_link_a_reload_and_the_way_back(curation_url: str) -> None:
    with Store(curation_url) as store:
        second = store.queue("nor_no", limit=2)[1]
    # A link (Home's "Continue", or one a colleague sent) names the scheme and the term.
    app = curation_page(HOME).run()
    app.switch_page(LINK)
    app.query_params["scheme"] = "nor_no"
    app.query_params["term"] = str(second.id)
    app.run()
    assert not app.exception
    assert app.selectbox(key="link_scheme").value == "nor_no"
    assert app.subheader[0].value == second.label
    # Away and back through the navigation, which drops the query string and the page's widgets.
    app.switch_page(CROSSWALK)
    app.query_params.clear()
    app.run()
    assert not app.exception
    assert app.selectbox(key="cw_scheme").value == "nor_no"  # the scheme follows to the Crosswalk page
    assert app.query_params["scheme"] == "nor_no"
    app.switch_page(LINK)
    app.query_params.clear()
    app.run()
    assert not app.exception
    assert app.selectbox(key="link_scheme").value == "nor_no"
    assert app.subheader[0].value == second.label
    assert (app.query_params["scheme"], app.query_params["term"]) == ("nor_no", str(second.id))
    # Choosing another scheme on the page is not undone by the address the page wrote before.
    app.selectbox(key="link_scheme").select(FIRST).run()
    assert app.selectbox(key="link_scheme").value == FIRST
    assert app.query_params["scheme"] == FIRST


def test_undo_names_the_concept_by_its_label(curation_url: str) -> None:
    app = curation_page(LINK, scheme="nor_no").run()
    assert not app.exception
    next(b for b in app.button if b.label == "Exact").click().run()
    app.button(key="link_undo").click().run()
    assert not app.exception
    with Store(curation_url) as store:
        [undone] = [d for d in store.history(store.queue("nor_no", limit=1)[0].id) if d.undoes_id]
        label = store.concept_labels([undone.concept_uri], "en")[undone.concept_uri]
    [message] = [c.value for c in app.caption if c.value.startswith("Undone:")]
    assert f"→ {label} is now" in message.replace("\\", "")
    assert "http" not in message


def test_benchmark_filters_come_from_the_url_and_new_runs_are_chosen(runs_url: str) -> None:
    query: dict[str, str | list[str]] = {
        "query_lang": ["no"],
        "metric": "acc@1",
        "dataset": ["nor_q_no_c_no"],
        "model": ["edit-distance"],
    }
    app = open_page(BENCHMARK, **query)
    assert app.multiselect(key="bench_q").value == ["no"]
    assert app.selectbox(key="bench_metric").value == "acc@1"
    assert app.multiselect(key="bench_datasets").value == ["nor_q_no_c_no"]
    assert app.multiselect(key="bench_models").value == ["edit-distance"]
    assert any(s.value.startswith("acc@1 by model") for s in app.subheader)  # the charts' metric
    # A run stored from the page joins the chosen ones; the rest of the selection stays.
    app.multiselect(key="bench_run_datasets").set_value(["nor_q_no_c_no"])
    app.text_input(key="bench_run_scorers").input("bm25")
    app.number_input(key="bench_run_limit").set_value(20).run()
    app.button(key="bench_run_go").click().run()
    assert not app.exception
    assert app.multiselect(key="bench_models").value == ["edit-distance", "bm25"]
    assert app.multiselect(key="bench_datasets").value == ["nor_q_no_c_no"]
    assert app.query_params["model"] == ["edit-distance", "bm25"]  # the address says so too


def test_benchmark_filters_survive_the_way_to_another_page_and_back(runs_url: str) -> None:
    app = AppTest.from_file(str(ROOT / HOME), default_timeout=120).run()
    app.switch_page(BENCHMARK).run()
    app.multiselect(key="bench_q").set_value(["no"])
    app.selectbox(key="bench_metric").select("map")
    app.multiselect(key="bench_models").set_value(["char-tfidf"]).run()
    chosen = app.multiselect(key="bench_datasets").value
    app.switch_page(DRILL)
    app.query_params.clear()  # the navigation drops the query string
    app.run()
    app.switch_page(BENCHMARK)
    app.query_params.clear()
    app.run()
    assert not app.exception
    assert app.multiselect(key="bench_q").value == ["no"]
    assert app.selectbox(key="bench_metric").value == "map"
    assert app.multiselect(key="bench_models").value == ["char-tfidf"]
    assert app.multiselect(key="bench_datasets").value == chosen
    assert (app.query_params["metric"], app.query_params["model"]) == ("map", "char-tfidf")


def test_in_a_browser_home_links_on_and_the_navigation_keeps_the_scheme(
    page: Any, curation_url: str, nor_data: Path, esco_csv: Path, tmp_path: Path
) -> None:
    expect = pytest.importorskip("playwright.sync_api").expect  # waits for the value, as wait_for does
    with Store(curation_url) as store:
        first = store.queue("nor_no", limit=1)[0]
    with serve(curation_env(nor_data, esco_csv, tmp_path, curation_url), tmp_path / "streamlit.log") as app_url:
        page.goto(app_url)
        page.get_by_text("Continue: Link the next term").nth(1).click()  # nor_no's, the second scheme
        page.get_by_label("Your name (recorded with every decision)").fill("Alice")
        page.get_by_role("button", name="Start").click()
        page.get_by_role("heading", name=first.label).wait_for()
        scheme = page.get_by_role("combobox", name="Source scheme")
        expect(scheme).to_have_value("nor_no")
        assert "scheme=nor_no" in page.url
        # Away through the navigation and back: the same scheme, on the Crosswalk page too.
        page.get_by_role("link", name="Crosswalk").click()
        page.wait_for_url("**/Crosswalk**")
        expect(scheme).to_have_value("nor_no")
        page.get_by_role("link", name="Link", exact=True).click()
        page.get_by_role("heading", name=first.label).wait_for()
        expect(scheme).to_have_value("nor_no")
        assert "scheme=nor_no" in page.url
