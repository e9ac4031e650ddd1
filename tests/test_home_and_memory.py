"""A curator's first hour (issue 90, items 7 and 9) with Streamlit's AppTest: the Home page leads
with the curation status of each scheme and a link onwards; the pages keep the scheme, term and
filters in the URL and in the session; labels, not URIs, where a person reads; one colour per
model in every chart; no "Infinity" and marked ISCO groups in the drill-down."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from db.quickstart import start_curation
from db.runs import list_runs, run_queries
from db.store import Store
from melo_core.datasets import load_dataset, resolve_dataset
from melo_core.taxonomy import isco_code_of

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK = "pages/5_Benchmark.py"
DRILL = "pages/7_Drill_down.py"


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


def plotly_traces(app: AppTest, index: int) -> list[dict]:
    return json.loads(app.get("plotly_chart")[index].proto.spec)["data"]


def trace_colours(traces: list[dict]) -> dict[str, str]:
    return {t["name"]: (t.get("marker") or {}).get("color") or (t.get("line") or {}).get("color") for t in traces}


# -- analysis pages ---------------------------------------------------------------------------------
def test_a_model_has_one_colour_in_every_chart_whatever_the_selection(runs_url: str) -> None:
    app = open_page(BENCHMARK)
    app.multiselect(key="bench_models").set_value(["char-tfidf", "edit-distance", "openai (published)"]).run()
    assert not app.exception
    bars, curves = trace_colours(plotly_traces(app, 1)), trace_colours(plotly_traces(app, 2))
    assert set(bars) == {"char-tfidf", "edit-distance", "openai (published)"}
    assert len(set(bars.values())) == 3 and all(bars.values())
    assert curves == bars  # bars and top-k curves agree
    # Another selection: the remaining models keep their colours (the palette's order gave them new ones).
    app.multiselect(key="bench_models").set_value(["edit-distance", "openai (published)"]).run()
    assert trace_colours(plotly_traces(app, 1)) == {m: bars[m] for m in ("edit-distance", "openai (published)")}


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
