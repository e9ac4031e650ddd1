"""Dashboard computations (melo_core.evaluation.analysis) checked against direct computations on real MELO data."""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein
from scipy import stats

from melo_core.esco.datasets import load_dataset
from melo_core.evaluation import analysis
from melo_core.evaluation.protocol import EvaluationResult, Protocol, evaluate
from melo_core.evaluation.published import load_all_published
from melo_core.runtime.disk_cache import save_pickle
from melo_core.scorers import ScorerContext, create_scorer
from tests.paper_reference import paper_min_distances, read_pairs

PAPER_MODELS = ["edit_distance", "char_tf_idf", "muse_cnn", "openai"]
SMALL = "nor_q_no_c_no"  # 96 queries: quick to evaluate


def published_value(melo_data: Path, model: str, dataset: str, name: str = "recip_rank") -> float:
    return float(read_pairs(melo_data / "results" / model / dataset / "summary.tsv")[name])


@pytest.fixture(scope="module")
def overlap(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return analysis.overlap_table(melo_data, cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def published(melo_data: Path) -> pd.DataFrame:
    return analysis.metrics_frame(load_all_published(melo_data))


@pytest.fixture(scope="module")
def small_runs(datasets_dir: Path) -> tuple[object, EvaluationResult, EvaluationResult]:
    dataset = load_dataset(datasets_dir / SMALL)
    context = ScorerContext(dataset.query_language, dataset.corpus_languages)
    edit = evaluate(dataset, create_scorer("edit-distance", context), Protocol("trec", 100))
    tfidf = evaluate(dataset, create_scorer("char-tfidf", context), Protocol("trec", 100))
    return dataset, edit, tfidf


# --------------------------------------------------------------------------- datasets


def test_dataset_kind_on_official_names(datasets_dir: Path) -> None:
    names = set(os.listdir(datasets_dir))
    assert {"deu_q_de_c_de", "deu_q_de_c_en", "bel_q_fr_c_en"} <= names
    assert analysis.dataset_kind("deu_q_de_c_de") == "monolingual"
    assert analysis.dataset_kind("deu_q_de_c_en") == "cross-lingual"
    assert analysis.dataset_kind("bel_q_fr_c_en") == "cross-lingual"
    # The 48th official dataset (its corpus is not in the shared data): eight corpus languages.
    assert analysis.dataset_kind("usa_q_en_c_de_en_es_fr_it_nl_pl_pt") == "multilingual"
    assert analysis.dataset_kind("deu_q_de_c_de_en") == "multilingual"
    with pytest.raises(ValueError):
        analysis.dataset_kind("not a dataset")


def test_dataset_table_and_filters(melo_data: Path, datasets_dir: Path) -> None:
    table = analysis.dataset_table(melo_data)
    names = sorted(n for n in os.listdir(datasets_dir) if (datasets_dir / n / "queries.tsv").is_file())
    assert table["dataset"].tolist() == names
    assert list(table.columns[:6]) == ["dataset", "country", "query_language", "corpus_languages", "kind", "n_queries"]
    row = table.set_index("dataset").loc[SMALL]
    assert (row["country"], row["query_language"], row["corpus_languages"], row["kind"]) == (
        "nor",
        "no",
        "no",
        "monolingual",
    )
    assert row["n_queries"] == len(read_pairs(datasets_dir / SMALL / "queries.tsv"))

    parts = {n: n.split("_") for n in names}  # country, q, lang, c, langs...
    expected_mono = [n for n, p in parts.items() if p[4:] == [p[2]]]
    assert analysis.filter_datasets(table, kinds=["monolingual"]) == expected_mono
    assert analysis.filter_datasets(table, query_languages=["fr"]) == [n for n, p in parts.items() if p[2] == "fr"]
    assert analysis.filter_datasets(table, corpus_languages=["en"], kinds=["monolingual"]) == ["usa_q_en_c_en"]
    cross_en = analysis.filter_datasets(table, corpus_languages=["en"], kinds=["cross-lingual"])
    assert cross_en == [n for n, p in parts.items() if p[4:] == ["en"] and p[2] != "en"]
    assert analysis.filter_datasets(table) == names


# --------------------------------------------------------------------------- lexical overlap


def test_histogram_and_median_match_the_papers_loop(datasets_dir: Path) -> None:
    folder = datasets_dir / "deu_q_de_c_de"  # umlauts and ß: ASCII folding matters
    expected = np.array(paper_min_distances(folder, fold=True))
    distances = analysis.min_edit_distances(load_dataset(folder))
    assert np.allclose(np.sort(distances), np.sort(expected))

    histogram = analysis.overlap_histogram(distances, bins=20)
    counts, edges = np.histogram(expected, bins=20, range=(0, 1))
    assert histogram.counts.tolist() == counts.tolist()
    assert np.allclose(histogram.edges, edges)
    assert histogram.median == pytest.approx(float(np.median(expected)))
    assert histogram.n == len(expected) == int(counts.sum())
    frame = histogram.to_frame()
    assert frame["probability"].sum() == pytest.approx(1.0)
    assert frame["count"].tolist() == counts.tolist()


def test_levenshtein_variant_matches_a_direct_loop(datasets_dir: Path) -> None:
    dataset = load_dataset(datasets_dir / "usa_q_en_c_en")
    text = dict(zip(dataset.corpus_ids, dataset.corpus, strict=True))
    expected = [
        min(Levenshtein.normalized_distance(q.lower(), text[c].lower()) for c in dataset.relevant[qid])
        for qid, q in zip(dataset.query_ids, dataset.queries, strict=True)
        if dataset.relevant.get(qid)
    ]
    got = analysis.min_edit_distances(dataset, distance="levenshtein", fold=False)
    assert np.allclose(got, expected)


def test_bulgarian_is_not_ascii_folded(datasets_dir: Path) -> None:
    folder = datasets_dir / "bgr_q_bg_c_bg"
    distances = analysis.min_edit_distances(load_dataset(folder))
    assert np.allclose(np.sort(distances), np.sort(paper_min_distances(folder, fold=False)))
    # Folding would delete the Cyrillic letters and make unrelated strings look close.
    assert np.median(distances) > np.median(paper_min_distances(folder, fold=True))


def test_overlap_table_is_cached_and_invalidated(tiny_dataset: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    data_dir = tiny_dataset.parent
    first = analysis.overlap_table(data_dir, cache_dir=cache)
    assert first["dataset"].tolist() == ["tst_q_en_c_en"]
    assert first.loc[0, "n_queries"] == 3 and first.loc[0, "median"] == 0.0  # every query has an exact match
    stored = list((cache / "analysis").glob("*.pkl"))
    assert len(stored) == 1

    # A second call reads the stored distances instead of recomputing them.
    save_pickle(stored[0], np.array([0.25, 0.75]))
    assert analysis.overlap_table(data_dir, cache_dir=cache).loc[0, "median"] == 0.5

    # Rewriting a dataset file changes the key: the distances are recomputed.
    (tiny_dataset / "queries.tsv").write_text("Q1\tdata scientists\nQ2\tbaker\nQ3\tnurse\n", encoding="utf-8")
    again = analysis.overlap_table(data_dir, cache_dir=cache)
    expected = np.median([1 - fuzz.ratio("data scientists", "data scientist") / 100, 0.0, 0.0])
    assert again.loc[0, "median"] == pytest.approx(expected)
    assert again.loc[0, "mean"] == pytest.approx((1 - fuzz.ratio("data scientists", "data scientist") / 100) / 3)


def test_overlap_table_covers_the_monolingual_datasets(overlap: pd.DataFrame, datasets_dir: Path) -> None:
    names = sorted(n for n in os.listdir(datasets_dir) if analysis.dataset_kind(n) == "monolingual")
    assert overlap["dataset"].tolist() == names
    assert (overlap["language"] == overlap["dataset"].str.split("_").str[2]).all()
    row = overlap.set_index("dataset").loc[SMALL]
    assert row["median"] == pytest.approx(float(np.median(paper_min_distances(datasets_dir / SMALL, fold=True))))


# --------------------------------------------------------------------------- correlations


def direct_rho(x: list[float], y: list[float]) -> float:
    return float(np.corrcoef(stats.rankdata(x), stats.rankdata(y))[0, 1])


def test_spearman_of_published_mrr_against_overlap(
    overlap: pd.DataFrame, published: pd.DataFrame, melo_data: Path
) -> None:
    points = analysis.mrr_vs_overlap(published[published["model"].isin(PAPER_MODELS)], overlap)
    assert list(points.columns) == ["model", "dataset", "median", "mrr"]
    rhos = analysis.rho_by_model(points).set_index("model")
    medians = overlap.set_index("dataset")["median"]
    for model in PAPER_MODELS:
        mrr = [published_value(melo_data, model, d) for d in medians.index]
        assert rhos.loc[model, "n"] == len(medians) == 24
        assert rhos.loc[model, "rho"] == pytest.approx(direct_rho(medians.tolist(), mrr), abs=1e-12)
    # The paper's finding: the further the gold from the query's spelling, the lower the MRR.
    assert rhos.loc["edit_distance", "rho"] < -0.5


def test_gain_over_a_lexical_baseline(overlap: pd.DataFrame, published: pd.DataFrame, melo_data: Path) -> None:
    gains = analysis.gain_vs_overlap(published, ["muse_cnn", "openai"], "char_tf_idf", overlap)
    assert set(gains["model"]) == {"muse_cnn", "openai"} and (gains["baseline"] == "char_tf_idf").all()
    openai = gains[gains["model"] == "openai"].set_index("dataset")
    expected = {
        d: published_value(melo_data, "openai", d) - published_value(melo_data, "char_tf_idf", d)
        for d in overlap["dataset"]
    }
    assert openai["gain"].to_dict() == pytest.approx(expected)
    rho = analysis.rho_by_model(gains, y="gain").set_index("model").loc["openai", "rho"]
    assert rho == pytest.approx(direct_rho(openai["median"].tolist(), openai["gain"].tolist()))


def test_spearman_edge_cases_return_nan_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(math.isnan(v) for v in analysis.spearman([1, 2, 3, 4], [5, 5, 5, 5]))
        assert all(math.isnan(v) for v in analysis.spearman([1, 2], [2, 1]))
        assert all(math.isnan(v) for v in analysis.spearman([1, 2, np.nan], [3, 1, 2]))  # 2 finite pairs
    rho, p = analysis.spearman([1, 2, np.nan, 4, 5], [1, 3, 9, 2, 5])
    reference = stats.spearmanr([1, 2, 4, 5], [1, 3, 2, 5])
    assert (rho, p) == pytest.approx((reference.statistic, reference.pvalue))


# --------------------------------------------------------------------------- benchmark views


def test_topk_curve_against_a_brute_count() -> None:
    rng = np.random.default_rng(7)
    ranks = rng.integers(1, 150, size=400).astype(float)
    ranks[rng.random(400) < 0.1] = np.inf
    ranks[rng.random(400) < 0.05] = np.nan
    curve = analysis.topk_curve(ranks, max_k=100)
    brute = [sum(1 for r in ranks if r <= k) / len(ranks) for k in range(1, 101)]
    assert curve.shape == (100,)
    assert np.allclose(curve, brute)
    assert np.all(np.diff(curve) >= 0)
    assert analysis.topk_curve([], max_k=3).tolist() == [0.0, 0.0, 0.0]

    frame = analysis.topk_curves_frame({("m", "d"): ranks, ("m2", "d"): ranks[:10]}, max_k=100)
    assert list(frame.columns) == ["model", "dataset", "k", "accuracy"] and len(frame) == 200
    assert np.allclose(frame.loc[frame["model"] == "m", "accuracy"], brute)


def test_topk_curve_agrees_with_the_evaluation_metrics(small_runs) -> None:
    _, edit, _ = small_runs
    curve = analysis.topk_curve(edit.first_ranks())
    for k in (1, 5, 10, 20, 100):
        assert curve[k - 1] == pytest.approx(edit.metrics[f"acc@{k}"])


def test_published_topk_and_mrr_matrix(published: pd.DataFrame, melo_data: Path) -> None:
    datasets = ["deu_q_de_c_de", "deu_q_de_c_en", "no_such_dataset"]
    models = ["openai", "edit_distance"]
    matrix = analysis.mrr_matrix(published, models, datasets)
    assert matrix.index.tolist() == models and matrix.columns.tolist() == datasets
    for model in models:
        for dataset in datasets[:2]:
            assert matrix.loc[model, dataset] == published_value(melo_data, model, dataset)
    assert matrix["no_such_dataset"].isna().all()

    topk = analysis.published_topk_frame(published, ["openai"], ["deu_q_de_c_de"])
    assert topk["k"].tolist() == [1, 5, 10]
    expected = [published_value(melo_data, "openai", "deu_q_de_c_de", f"success_{k}") for k in (1, 5, 10)]
    assert topk["accuracy"].tolist() == expected


def test_diff_to_published(published: pd.DataFrame, small_runs, melo_data: Path) -> None:
    _, edit, tfidf = small_runs
    ours = pd.DataFrame(
        [
            {"model": "edit-distance", "dataset": SMALL, "mrr": edit.metrics["mrr"]},
            {"model": "char-tfidf", "dataset": SMALL, "mrr": tfidf.metrics["mrr"]},
            {"model": "my-new-scorer", "dataset": SMALL, "mrr": 0.5},
        ]
    )
    table = analysis.diff_to_published(ours, published).set_index("model")
    assert list(table.columns) == ["published_model", "dataset", "ours", "published", "diff"]
    assert table.loc["edit-distance", "published_model"] == "edit_distance"
    reference = published_value(melo_data, "edit_distance", SMALL)
    assert table.loc["edit-distance", "published"] == reference
    assert table.loc["edit-distance", "diff"] == pytest.approx(edit.metrics["mrr"] - reference)
    assert table.loc["char-tfidf", "published"] == published_value(melo_data, "char_tf_idf", SMALL)
    assert math.isnan(table.loc["my-new-scorer", "published"]) and math.isnan(table.loc["my-new-scorer", "diff"])
    # An explicit mapping wins over the scorer-name lookup.
    mapped = analysis.diff_to_published(ours.iloc[2:], published, {"my-new-scorer": "openai"})
    assert mapped.loc[0, "published"] == published_value(melo_data, "openai", SMALL)


# --------------------------------------------------------------------------- drill-down


def test_query_results_and_failures(small_runs) -> None:
    dataset, edit, _ = small_runs
    rows = analysis.query_results(dataset, edit, top_n=5)
    assert rows["query_id"].tolist() == edit.query_ids
    for row in rows.itertuples():
        gold = dataset.relevant[row.query_id]
        assert set(row.gold_concepts) == {dataset.concept_of[c] for c in gold}
        assert len(row.top_forms) == len(row.top_hits) == 5
        if row.first_rank <= 5:  # the first relevant prediction sits at the first relevant rank
            assert row.top_hits.index(True) == row.first_rank - 1
        else:
            assert not any(row.top_hits)
    assert rows["reciprocal_rank"].mean() == pytest.approx(edit.metrics["mrr"])

    top1_misses = analysis.failures(rows, k=1)
    assert len(top1_misses) == len(rows) - round(edit.metrics["acc@1"] * len(rows))
    assert not (top1_misses["first_rank"] == 1).any()
    with_nan = pd.DataFrame({"query_id": ["a", "b", "c", "d"], "first_rank": [1.0, 5.0, np.inf, np.nan]})
    assert analysis.failures(with_nan, k=4)["query_id"].tolist() == ["b", "c", "d"]
    assert analysis.failures(with_nan, k=5)["query_id"].tolist() == ["c", "d"]


def test_compare_queries_against_scipy(small_runs) -> None:
    dataset, edit, tfidf = small_runs
    a = analysis.query_results(dataset, edit)
    b = analysis.query_results(dataset, tfidf)
    # Row order and missing queries must not matter: the join is on query_id.
    b_part = b.sample(frac=1.0, random_state=3).iloc[: len(b) - 6]
    comparison = analysis.compare_queries(a, b_part)

    rr_a = {q: (1 / r if np.isfinite(r) else 0.0) for q, r in zip(edit.query_ids, edit.first_ranks(), strict=True)}
    rr_b = {q: (1 / r if np.isfinite(r) else 0.0) for q, r in zip(tfidf.query_ids, tfidf.first_ranks(), strict=True)}
    shared = [q for q in edit.query_ids if q in set(b_part["query_id"])]
    x = [rr_a[q] for q in shared]
    y = [rr_b[q] for q in shared]
    assert comparison.n_pairs == len(shared) == len(b) - 6
    assert comparison.n_better == sum(yi > xi for xi, yi in zip(x, y, strict=True))
    assert comparison.n_worse == sum(yi < xi for xi, yi in zip(x, y, strict=True))
    assert comparison.n_same == sum(yi == xi for xi, yi in zip(x, y, strict=True))
    assert comparison.n_better + comparison.n_worse > 0
    assert comparison.mean_rr_a == pytest.approx(np.mean(x)) and comparison.mean_rr_b == pytest.approx(np.mean(y))
    reference = stats.wilcoxon(x, y)
    assert comparison.p_value == pytest.approx(reference.pvalue)
    assert comparison.statistic == pytest.approx(reference.statistic)
    # The interval of the MRR difference, against a plain percentile bootstrap of the paired queries.
    difference = comparison.difference
    assert difference is not None and difference.value == pytest.approx(np.mean(y) - np.mean(x))
    assert difference.low < difference.value < difference.high
    delta = np.array(y) - np.array(x)
    draws = np.random.default_rng(1).integers(0, len(delta), (4000, len(delta)))
    low, high = np.percentile(delta[draws].mean(axis=1), [2.5, 97.5])
    assert difference.low == pytest.approx(low, abs=0.01) and difference.high == pytest.approx(high, abs=0.01)

    table = comparison.table.set_index("query_id")
    some = shared[0]
    assert table.loc[some, "rr_a"] == rr_a[some] and table.loc[some, "rr_b"] == rr_b[some]
    assert table.loc[some, "query"] == a.set_index("query_id").loc[some, "query"]
    status = {"better": comparison.n_better, "worse": comparison.n_worse, "same": comparison.n_same}
    assert table["status"].value_counts().to_dict() == {k: v for k, v in status.items() if v}


def test_compare_queries_over_clusters_pairs_their_means(small_runs) -> None:
    """Queries sharing a cluster count as one pair in the test and are drawn together in the
    interval; clusters of one query each are the comparison over queries."""
    dataset, edit, tfidf = small_runs
    a = analysis.query_results(dataset, edit)
    b = analysis.query_results(dataset, tfidf)
    singletons = analysis.compare_queries(a, b, {q: q for q in a["query_id"]})
    plain = analysis.compare_queries(a, b)
    assert (singletons.p_value, singletons.statistic) == pytest.approx((plain.p_value, plain.statistic))
    assert singletons.difference is not None and plain.difference is not None
    bounds = (plain.difference.value, plain.difference.low, plain.difference.high)
    assert (singletons.difference.value, singletons.difference.low, singletons.difference.high) == pytest.approx(
        bounds, abs=1e-4
    )

    cluster_of = {q: f"c{i // 4}" for i, q in enumerate(a["query_id"])}  # blocks of four queries
    clustered = analysis.compare_queries(a, b, cluster_of)
    table = plain.table.assign(cluster=[cluster_of[q] for q in plain.table["query_id"]])
    means = table.groupby("cluster")[["rr_a", "rr_b"]].mean()
    reference = stats.wilcoxon(means["rr_a"], means["rr_b"])
    assert clustered.p_value == pytest.approx(reference.pvalue) and clustered.p_value != pytest.approx(plain.p_value)
    assert (clustered.n_better, clustered.n_worse, clustered.n_pairs) == (plain.n_better, plain.n_worse, plain.n_pairs)
    assert clustered.difference is not None
    assert clustered.difference.value == pytest.approx(plain.difference.value)
    assert clustered.difference.low != pytest.approx(plain.difference.low)
    with pytest.raises(KeyError):  # a query without a cluster is an error, not a silent drop
        analysis.compare_queries(a, b, {})


def test_compare_identical_runs_is_p_one_without_warnings(small_runs) -> None:
    dataset, edit, _ = small_runs
    rows = analysis.query_results(dataset, edit)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = analysis.compare_queries(rows, rows)
    assert same.n_same == same.n_pairs == len(rows) and same.n_better == same.n_worse == 0
    assert same.p_value == 1.0 and math.isnan(same.statistic)
    assert same.difference is not None and (same.difference.low, same.difference.high) == (0.0, 0.0)
    assert same.mean_rr_a == same.mean_rr_b == pytest.approx(edit.metrics["mrr"])
