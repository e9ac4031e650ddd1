"""Bootstrap intervals of MRR (melo_core.evaluation.significance) and how `eval` reports them."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from melo_core.evaluation.significance import mean_interval, paired_test

ROOT = Path(__file__).resolve().parents[1]
# Reciprocal ranks as a ranker gives them: rank 1 half the time, then a long tail and misses.
VALUES = np.array([1.0, 0.5, 1 / 3, 0.25, 0.1, 0.0])
WEIGHTS = np.array([0.45, 0.15, 0.08, 0.07, 0.1, 0.15])


def test_the_interval_covers_the_true_mrr_about_as_often_as_it_says() -> None:
    truth = float(VALUES @ WEIGHTS)
    rng = np.random.default_rng(7)
    trials = 200
    covered = widths = 0.0
    for _ in range(trials):
        sample = rng.choice(VALUES, size=120, p=WEIGHTS)
        interval = mean_interval([sample], resamples=1000)
        covered += interval.low <= truth <= interval.high
        widths += interval.high - interval.low
    assert 0.9 <= covered / trials <= 0.99  # 95% asked
    # about 2 × 1.96 standard errors of a mean of 120
    standard_error = np.sqrt(VALUES**2 @ WEIGHTS - truth**2) / np.sqrt(120)
    assert widths / trials == pytest.approx(2 * 1.96 * standard_error, rel=0.1)


def test_a_mean_over_datasets_weighs_each_dataset_once() -> None:
    rng = np.random.default_rng(0)
    small, large = rng.choice(VALUES, 40, p=WEIGHTS), np.zeros(4000)
    mean = mean_interval([small, large])
    assert mean.value == pytest.approx(small.mean() / 2)  # not the mean of the 4,040 queries
    alone = mean_interval([small])
    # the large dataset is certain (all zeros): the mean's interval is the small one's, halved
    assert mean.low == pytest.approx(alone.low / 2, abs=0.01) and mean.high == pytest.approx(alone.high / 2, abs=0.01)


def test_a_dataset_of_one_query_is_a_constant_in_the_mean() -> None:
    rng = np.random.default_rng(5)
    varied = rng.choice(VALUES, 200, p=WEIGHTS)
    mean = mean_interval([varied, np.array([0.5]), np.zeros(30)])  # scipy refuses a sample of one value
    alone = mean_interval([varied])
    assert mean.value == pytest.approx((varied.mean() + 0.5) / 3)
    assert mean.low == pytest.approx((alone.low + 0.5) / 3, abs=1e-4)
    assert mean.high == pytest.approx((alone.high + 0.5) / 3, abs=1e-4)


def test_a_paired_difference_sees_what_two_unpaired_intervals_miss() -> None:
    rng = np.random.default_rng(3)
    a = rng.choice(VALUES, 300, p=WEIGHTS)
    b = a.copy()
    lifted = rng.choice(300, 30, replace=False)
    b[lifted] = np.minimum(1.0, b[lifted] + 0.25)  # b is a with a tenth of the queries ranked better
    test = paired_test(a, b)
    assert test.worse == 0 and test.better > 0 and test.p_value < 0.001
    assert test.difference.value == pytest.approx(b.mean() - a.mean()) and test.difference.excludes(0.0)
    first, second = mean_interval([a]), mean_interval([b])
    assert second.low < first.high  # on their own the two intervals overlap
    same = paired_test(a, a)
    assert (same.difference.low, same.difference.high, same.p_value) == (0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="same queries"):
        paired_test(a, b[:-1])


def test_resampling_concepts_covers_what_a_new_sample_of_concepts_gives() -> None:
    """Titles of one concept rank alike: resampled one by one they look more certain than they are."""
    rng = np.random.default_rng(11)
    truth = 0.5  # the mean of the concepts' Beta(2, 2) success rates
    trials, concepts, per_concept = 150, 30, 8
    covered = {"queries": 0, "concepts": 0}
    for _ in range(trials):
        rates = rng.beta(2.0, 2.0, concepts)
        labels = np.repeat(np.arange(concepts), per_concept)
        found = (rng.random(labels.size) < rates[labels]).astype(float)  # reciprocal rank 1 or 0
        by_query = mean_interval([found], resamples=1000)
        by_concept = mean_interval([found], resamples=1000, clusters=[labels.tolist()])
        assert by_concept.value == by_query.value == found.mean()
        covered["queries"] += by_query.low <= truth <= by_query.high
        covered["concepts"] += by_concept.low <= truth <= by_concept.high
    assert 0.88 <= covered["concepts"] / trials <= 0.99  # 95% asked
    assert covered["queries"] / trials < 0.87  # about 79% with this much sharing (design effect 2.4)


def test_clusters_of_one_query_each_resample_as_queries() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.choice(VALUES, 300, p=WEIGHTS), rng.choice(VALUES, 200, p=WEIGHTS)
    plain = mean_interval([a, b])
    singles = mean_interval([a, b], clusters=[[f"a{i}" for i in range(300)], [f"b{i}" for i in range(200)]])
    assert singles.value == plain.value
    assert singles.low == pytest.approx(plain.low, abs=0.005) and singles.high == pytest.approx(plain.high, abs=0.005)
    one_concept = mean_interval([a, b], clusters=[["x"] * 300, list(range(200))])  # a resamples to itself
    assert one_concept.value == plain.value and one_concept.high - one_concept.low < plain.high - plain.low
    tens = [i // 10 for i in range(200)]
    paired = paired_test(a[:200], b, clusters=tens)
    assert paired.difference.value == pytest.approx(b.mean() - a[:200].mean())
    assert paired.better + paired.worse + paired.same == 200  # counted per query, tested per cluster
    means = [np.reshape(x, (20, 10)).mean(axis=1) for x in (a[:200], b)]
    assert paired.p_value == pytest.approx(paired_test(*means).p_value) != paired_test(a[:200], b).p_value
    with pytest.raises(ValueError, match="one label per value"):
        mean_interval([a], clusters=[["x"] * 299])


def eval_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "melo_core", "eval", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)  # fmt: skip


def test_eval_reports_intervals_and_differences_to_the_first_scorer(melo_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.csv"
    datasets = "nor_q_no_c_no,aut_q_de_c_de"
    run = eval_cli("--data", str(melo_data), "--datasets", datasets, "--scorers", "char-tfidf,edit-distance",
                   "--limit-queries", "80", "--out", str(out), "--quiet")  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = {(r["dataset"], r["scorer"]): r for r in csv.DictReader(out.open(encoding="utf-8"))}
    for name in datasets.split(","):
        first, second = rows[(name, "char-tfidf")], rows[(name, "edit-distance")]
        for row in (first, second):
            assert float(row["mrr_low"]) < float(row["mrr"]) < float(row["mrr_high"])
            assert (
                f"MRR {float(row['mrr']):.4f} [{float(row['mrr_low']):.4f}, {float(row['mrr_high']):.4f}]" in run.stdout
            )
        assert first["vs"] == "" and second["vs"] == "char-tfidf"
        assert float(second["delta_mrr"]) == pytest.approx(float(second["mrr"]) - float(first["mrr"]), abs=2e-6)
        assert float(second["delta_mrr_low"]) < float(second["delta_mrr"]) < float(second["delta_mrr_high"])
        assert 0.0 < float(second["wilcoxon_p"]) <= 1.0
    means = run.stdout[run.stdout.index("mean of 2 datasets") :]
    expected = (float(rows[(n, "char-tfidf")]["mrr"]) for n in datasets.split(","))
    assert f"char-tfidf         MRR {sum(expected) / 2:.4f} [" in means and "vs char-tfidf: " in means

    plain = eval_cli("--data", str(melo_data), "--datasets", "nor_q_no_c_no", "--scorers", "char-tfidf",
                     "--limit-queries", "20", "--confidence", "0", "--out", "-", "--quiet")  # fmt: skip
    assert plain.returncode == 0 and "mrr_low" not in plain.stdout.splitlines()[0]
    bad = eval_cli("--datasets", "nor_q_no_c_no", "--confidence", "95")
    assert (
        bad.returncode == 2 and bad.stderr.strip() == "error: --confidence must be in [0, 1) (0: no intervals), got 95"
    )


JOBBERT = ROOT.parent / "shared" / "jobbert" / "titles.csv"


@pytest.mark.skipif(not JOBBERT.is_file(), reason="job-ad titles not found beside the project")
def test_eval_resamples_concepts_of_real_job_ads(melo_data: Path, tmp_path: Path) -> None:
    """Six titles each of 40 concepts: the interval over concepts is the wider, around the same MRR."""
    by_concept: dict[str, list[str]] = {}
    with JOBBERT.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            by_concept.setdefault(row["conceptUri"], []).append(row["vacancyTitle"])
    sample = [(t, uri) for uri, titles in by_concept.items() if len(titles) >= 6 for t in titles[:6]][: 40 * 6]
    ads = tmp_path / "ads.csv"
    with ads.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([("vacancyTitle", "conceptUri"), *sample])
    rows = {}
    for unit in ("queries", "concepts"):
        out = tmp_path / f"{unit}.csv"
        run = eval_cli("--data", str(melo_data), "--titles", str(ads), "--scorers", "char-tfidf,edit-distance",
                       "--resample", unit, "--out", str(out), "--quiet")  # fmt: skip
        assert run.returncode == 0, run.stderr
        rows[unit] = {r["scorer"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    for scorer in ("char-tfidf", "edit-distance"):
        queries, concepts = rows["queries"][scorer], rows["concepts"][scorer]
        assert (queries["resampled"], concepts["resampled"], concepts["queries"]) == ("queries", "concepts", "240")
        assert queries["mrr"] == concepts["mrr"]
        assert float(concepts["mrr_low"]) < float(concepts["mrr"]) < float(concepts["mrr_high"])
        width = {unit: float(rows[unit][scorer]["mrr_high"]) - float(rows[unit][scorer]["mrr_low"]) for unit in rows}
        assert width["concepts"] > 1.1 * width["queries"]
    difference = {unit: rows[unit]["edit-distance"] for unit in rows}
    assert difference["queries"]["delta_mrr"] == difference["concepts"]["delta_mrr"]
    assert float(difference["concepts"]["delta_mrr_low"]) < float(difference["concepts"]["delta_mrr"])
