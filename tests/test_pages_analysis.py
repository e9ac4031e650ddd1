"""The Benchmark and Drill-down pages (Streamlit AppTest) on a small stored run set
(tests/conftest.py: run_set_db): what they show is checked against the store, the published
summary files and scipy, computed here directly."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from streamlit.testing.v1 import AppTest

from db.runs import list_runs, run_queries
from db.store import Store
from melo_core.esco.taxonomy import cached_taxonomy_from_melo
from melo_core.evaluation.significance import mean_interval
from tests.conftest import RUN_SET_DATASETS, RUN_SET_QUERIES
from tests.test_titles import english_labels, write_titles

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK = "pages/5_Benchmark.py"
DRILL = "pages/7_Drill_down.py"


@pytest.fixture
def url(run_set_db: Path, melo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    copy = tmp_path / "melo.db"
    shutil.copy(run_set_db, copy)
    db_url = f"sqlite:///{copy}"
    monkeypatch.setenv("MELO_DATA", str(melo_data))
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MELO_DB_URL", db_url)
    monkeypatch.chdir(ROOT)
    return db_url


def open_page(script: str) -> AppTest:
    app = AppTest.from_file(str(ROOT / script), default_timeout=120).run()
    assert not app.exception
    return app


def figure(app: AppTest, index: int | str) -> dict:
    """A Plotly chart's figure as the browser gets it (typed arrays decoded): by position, or by the
    name its PNG is saved under (``ui.analysis.show_chart``; the page may show other charts first)."""
    charts = app.get("plotly_chart")
    if isinstance(index, str):
        [chart] = [c for c in charts if json.loads(c.proto.config)["toImageButtonOptions"]["filename"] == index]
    else:
        chart = charts[index]
    spec = json.loads(chart.proto.spec)

    def decode(value: object) -> object:
        if isinstance(value, dict) and "bdata" in value:
            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
            shape = value.get("shape")  # plotly writes "rows, columns"
            return array.reshape([int(n) for n in str(shape).split(",")]) if shape else array
        return value

    for trace in spec["data"]:
        for key in list(trace):
            trace[key] = decode(trace[key])
    return spec


def published_mrr(melo_data: Path, model: str, dataset: str) -> float:
    for line in (melo_data / "results" / model / dataset / "summary.tsv").read_text().splitlines():
        name, value = line.split("\t")[:2]
        if name == "recip_rank":
            return float(value)
    raise AssertionError("no recip_rank")


def test_benchmark_heatmap_and_differences_come_from_the_stored_runs(url: str, melo_data: Path) -> None:
    app = open_page(BENCHMARK)
    app.multiselect(key="bench_datasets").set_value(list(RUN_SET_DATASETS))
    app.multiselect(key="bench_models").set_value(["char-tfidf", "edit-distance", "openai (published)"]).run()
    assert not app.exception
    assert any("only the first queries" in w.value for w in app.warning)  # 60-query runs are flagged
    with Store(url) as store:
        stored = {(r.scorer, r.dataset): r.metrics["mrr"] for r in list_runs(store, "ours")}
    heatmap = figure(app, "heatmap_mrr")["data"][0]
    assert list(heatmap["y"]) == ["char-tfidf", "edit-distance", "openai (published)"]
    assert list(heatmap["x"]) == list(RUN_SET_DATASETS)
    z = np.asarray(heatmap["z"], dtype=float)
    for j, dataset in enumerate(RUN_SET_DATASETS):
        assert z[0, j] == pytest.approx(stored[("char-tfidf", dataset)])
        assert z[1, j] == pytest.approx(stored[("edit-distance", dataset)])
        assert z[2, j] == pytest.approx(published_mrr(melo_data, "openai", dataset))

    [diff] = [d.value for d in app.dataframe if "published_model" in d.value.columns]  # the differences table
    row = diff[(diff["model"] == "char-tfidf") & (diff["dataset"] == "nor_q_no_c_no")].iloc[0]
    expected = published_mrr(melo_data, "char_tf_idf", "nor_q_no_c_no")
    assert (row["published_model"], row["queries"], row["of"]) == ("char_tf_idf", RUN_SET_QUERIES, 96)
    assert row["published"] == pytest.approx(expected)
    assert row["diff"] == pytest.approx(stored[("char-tfidf", "nor_q_no_c_no")] - expected)

    # Top-k curves: ours at every k, the mean over the datasets all chosen models ran on.
    curves = figure(app, "topk_curves")["data"]
    ours = next(t for t in curves if t["name"] == "char-tfidf")
    with Store(url) as store:
        runs = [r for r in list_runs(store, "ours") if r.scorer == "char-tfidf"]
        firsts = [run_queries(store, r.id)["first_rank"].to_numpy() for r in runs]
    at_5 = np.mean([np.mean(f <= 5) for f in firsts])
    assert len(ours["x"]) == 100 and np.asarray(ours["y"])[4] == pytest.approx(at_5)
    published = next(t for t in curves if t["name"] == "openai (published)")
    assert list(published["x"]) == [1, 5, 10]

    # Fewer models than datasets: the datasets run down the page, one row each.
    app.multiselect(key="bench_models").set_value(["char-tfidf", "edit-distance"]).run()
    heatmap = figure(app, "heatmap_mrr")["data"][0]
    assert (list(heatmap["y"]), list(heatmap["x"])) == (list(RUN_SET_DATASETS), ["char-tfidf", "edit-distance"])
    assert np.asarray(heatmap["z"], dtype=float)[0, 1] == pytest.approx(stored[("edit-distance", RUN_SET_DATASETS[0])])


def test_benchmark_evaluates_from_the_page_and_stores_the_run(url: str) -> None:
    app = open_page(BENCHMARK)
    app.multiselect(key="bench_run_datasets").set_value(["nor_q_no_c_no"])
    app.text_input(key="bench_run_scorers").input("bm25")
    app.number_input(key="bench_run_limit").set_value(20).run()
    app.button(key="bench_run_go").click().run()
    assert not app.exception
    assert [s.value for s in app.success] == ["Stored 1 run(s)."]
    with Store(url) as store:
        [run] = [r for r in list_runs(store, "ours") if r.scorer == "bm25"]
        assert (run.dataset, run.n_queries, run.code_version is not None) == ("nor_q_no_c_no", 20, True)
    app.text_input(key="bench_run_scorers").input("no-such-scorer")
    app.button(key="bench_run_go").click().run()
    assert any("unknown scorer" in e.value for e in app.error)


def test_benchmark_evaluates_job_ad_titles_at_concept_level(url: str, melo_data: Path, tmp_path: Path) -> None:
    """Titles that are labels of their concept rank it first, titles coded to a neighbour's concept
    do not; the page lists the run under "Job-ad titles" with recall@100 and the MRR's intervals
    (over titles, and over concepts: wider, as the misleading titles share four concepts), apart
    from the MELO datasets."""
    taxonomy = cached_taxonomy_from_melo(melo_data)
    labels = english_labels(taxonomy, 12)
    misleading = [(labels[i - 1][0], labels[i][1]) for i in range(8, 12) for _ in range(3)]
    path = write_titles(tmp_path / "ads.csv", [*labels[:8], *misleading])
    app = open_page(BENCHMARK)
    app.text_input(key="bench_titles_path").input(str(path))
    app.text_input(key="bench_titles_scorers").input("char-tfidf").run()
    app.button(key="bench_titles_go").click().run()
    assert not app.exception
    assert [s.value for s in app.success] == ["Stored 1 run(s)."]
    with Store(url) as store:
        [run] = [r for r in list_runs(store, "ours") if r.dataset == "titles_ads_en"]
    assert (run.scorer, run.depth, run.n_queries) == ("char-tfidf", 100, 20)
    assert 0.3 < run.metrics["mrr"] < 1.0
    [table] = [d.value for d in app.dataframe if "recall@100" in d.value.columns]
    [row] = table.to_dict("records")
    assert (row["model"], row["mrr"]) == ("char-tfidf", pytest.approx(run.metrics["mrr"]))
    assert row["MRR low"] < row["mrr"] < row["MRR high"] <= 1.0
    assert row["MRR low, other concepts"] < row["MRR low"] and row["MRR high"] <= row["MRR high, other concepts"]
    assert "titles_ads_en" not in app.multiselect(key="bench_datasets").options


def test_pages_without_runs_say_how_to_get_them(
    tmp_path: Path, melo_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MELO_DATA", str(melo_data))
    monkeypatch.setenv("MELO_DB_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    monkeypatch.chdir(ROOT)
    assert "import-results" in open_page(BENCHMARK).info[0].value
    assert "eval --store" in open_page(DRILL).info[0].value


def test_drill_down_failures_and_a_paired_comparison(url: str) -> None:
    app = open_page(DRILL)
    app.selectbox(key="drill_dataset").select("nor_q_no_c_no")
    app.selectbox(key="drill_model").select("char-tfidf").run()
    with Store(url) as store:
        runs = {r.scorer: r.id for r in list_runs(store, "ours") if r.dataset == "nor_q_no_c_no"}
        a = run_queries(store, runs["char-tfidf"])
        b = run_queries(store, runs["edit-distance"])
    table = app.dataframe[0].value
    assert list(table["query_id"]) == list(a["query_id"]) and len(table) == RUN_SET_QUERIES
    order = list(app.dataframe[0].proto.column_order)  # the URIs last: as wide as all the rest
    assert order[:4] == ["query_id", "query", "gold labels", "first_rank"] and order[-1] == "gold concepts"
    assert sorted(order) == sorted(table.columns)
    past_depth = a["first_rank"] == float("inf")  # no relevant element in the stored top 100
    assert past_depth.any() and table["first_rank"][past_depth].isna().all()  # an empty cell, not "Infinity"
    assert list(table["first_rank"][~past_depth]) == list(a["first_rank"][~past_depth])
    config = json.loads(app.dataframe[0].proto.columns)
    assert "top 5" in table.columns and all(
        config[c]["width"] == "medium" for c in ("query", "gold labels", "top 1", "top 5")
    )
    assert "top 100" in config["first_rank"]["help"]
    top1_hits = table["top 1"].str.startswith("✔")
    assert list(top1_hits) == list(a["first_rank"] == 1)  # the gold is marked where it ranks first

    app.number_input(key="drill_k").set_value(3)
    app.toggle(key="drill_failures").set_value(True).run()
    assert len(app.dataframe[0].value) == int((a["first_rank"] > 3).sum())

    app.selectbox(key="drill_other").select("edit-distance").run()
    assert not app.exception
    rr_a, rr_b = a["reciprocal_rank"].to_numpy(), b["reciprocal_rank"].to_numpy()
    expected = stats.wilcoxon(rr_a, rr_b)
    shown = {m.label: m.value for m in app.metric}
    assert shown["Wilcoxon p (two-sided)"] == f"{expected.pvalue:.3g}"
    better, worse = int((rr_b > rr_a).sum()), int((rr_b < rr_a).sum())
    assert shown["B better / worse / same"] == f"{better} / {worse} / {len(a) - better - worse}"
    assert shown["MRR A (char-tfidf)"] == f"{rr_a.mean():.4f}"
    difference = next(c.value for c in app.caption if c.value.startswith("MRR B − A"))
    low, high = (float(v) for v in difference.split("[")[1].split("]")[0].split(", "))
    assert f"MRR B − A: {rr_b.mean() - rr_a.mean():+.4f} [" in difference and low < rr_b.mean() - rr_a.mean() < high
    assert any(f"MRR {rr_a.mean():.4f} [" in c.value and "bootstrap interval" in c.value for c in app.caption)


def test_drill_down_resamples_gold_concepts(url: str, melo_data: Path, tmp_path: Path) -> None:
    """Noisy job-ad titles, three per concept: over the gold concepts, the MRR's interval is that of
    the concepts drawn with all their titles and the Wilcoxon test pairs the concepts' mean
    reciprocal ranks (checked against scipy)."""
    from db.runs import evaluate_and_store
    from melo_core.esco.titles import titles_dataset

    taxonomy = cached_taxonomy_from_melo(melo_data)
    noise = (
        lambda label: f"Trainee {label} (Native Thai) - Fashion retail, immediate start",
        lambda label: f"URGENT: {label.upper()} - LONDON, competitive salary + benefits",
        lambda label: label.split()[-1],
    )
    ads = [(add(label), uri) for label, uri in english_labels(taxonomy, 12) for add in noise]
    titles, _ = titles_dataset(write_titles(tmp_path / "ads.csv", ads), taxonomy, "en")
    with Store(url) as store:
        evaluate_and_store(store, melo_data, [], ["char-tfidf", "edit-distance"], extra_datasets=[titles])
        runs = {r.scorer: r.id for r in list_runs(store, "ours") if r.dataset == titles.name}
        a = run_queries(store, runs["char-tfidf"])
        b = run_queries(store, runs["edit-distance"])
    app = open_page(DRILL)
    app.selectbox(key="drill_dataset").select(titles.name)
    app.selectbox(key="drill_model").select("char-tfidf").run()
    app.selectbox(key="drill_other").select("edit-distance").run()

    def shown() -> tuple[tuple[float, float], str, str]:
        [caption] = [c.value for c in app.caption if c.value.startswith("char-tfidf on")]
        low, high = (float(v) for v in caption.split("[")[1].split("]")[0].split(", "))
        [difference] = [c.value for c in app.caption if c.value.startswith("MRR B − A")]
        return (low, high), difference, {m.label: m.value for m in app.metric}["Wilcoxon p (two-sided)"]

    over_queries, difference, p_queries = shown()
    assert "over the queries" in difference
    app.radio(key="drill_resample").set_value("gold concepts").run()
    assert not app.exception
    over_concepts, difference, p_concepts = shown()
    assert "over the gold concepts" in difference and "concepts' mean reciprocal ranks" in difference
    gold = [" ".join(sorted({cid for cid, _ in g})) for g in a["gold"]]
    rr_a = a["reciprocal_rank"].to_numpy()
    interval = mean_interval([rr_a], clusters=[gold])
    assert over_concepts == pytest.approx((interval.low, interval.high), abs=1e-4) and over_concepts != over_queries
    frame = a.assign(cluster=gold, rr_b=b.set_index("query_id").loc[a["query_id"], "reciprocal_rank"].to_numpy())
    means = frame.groupby("cluster")[["reciprocal_rank", "rr_b"]].mean()
    assert len(means) == 12
    expected = stats.wilcoxon(means["reciprocal_rank"], means["rr_b"])
    assert p_concepts == f"{expected.pvalue:.3g}" != p_queries
    assert p_queries == f"{stats.wilcoxon(rr_a, frame['rr_b']).pvalue:.3g}"
