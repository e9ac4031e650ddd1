"""``experiment run``: an experiment file evaluated through the product's engine, its rows
appended to a tidy results table with provenance; bad files fail before any work."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from melo_core.esco.taxonomy import cached_taxonomy_from_melo
from melo_core.evaluation.experiments import RESULT_COLUMNS, load_experiment, read_results
from tests.test_cli import cli
from tests.test_titles import english_labels, write_titles

SLICE = ("nor_q_no_c_no", "nor_q_no_c_en")


def write_experiment(path: Path, body: str) -> Path:
    path.write_text(body, encoding="utf-8")
    return path


def test_an_evaluate_experiment_matches_eval_and_records_its_provenance(melo_data: Path, tmp_path: Path) -> None:
    experiment = write_experiment(tmp_path / "lexical.toml", f"""
description = "two lexical scorers on two Norwegian datasets"
[evaluate]
scorers = ["char-tfidf", "bm25"]
datasets = {list(SLICE)!r}
limit_queries = 40
""")  # fmt: skip
    results = tmp_path / "results.csv"
    run = cli("experiment", "run", str(experiment), "--data", str(melo_data), "--results", str(results), "--quiet")
    assert run.returncode == 0, run.stderr
    rows = read_results(results)
    assert list(rows[0]) == RESULT_COLUMNS
    assert {r["experiment"] for r in rows} == {"lexical"}
    mrr = {(r["dataset"], r["pipeline"]): float(r["value"]) for r in rows if r["metric"] == "mrr"}
    # the same numbers as eval gives
    out = tmp_path / "eval.csv"
    evaluated = cli("eval", "--data", str(melo_data), "--datasets", ",".join(SLICE), "--scorers", "char-tfidf,bm25",
                    "--limit-queries", "40", "--out", str(out), "--quiet")  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    value = {(r["dataset"], r["pipeline"], r["metric"]): float(r["value"]) for r in rows}
    for row in csv.DictReader(out.open(encoding="utf-8")):
        assert mrr[(row["dataset"], row["scorer"])] == pytest.approx(float(row["mrr"]), abs=1e-6)
        for bound in ("mrr_low", "mrr_high"):  # the same interval as eval's
            assert value[(row["dataset"], row["scorer"], bound)] == pytest.approx(float(row[bound]), abs=1e-6)
    # means over all datasets and per kind (one monolingual, one cross-lingual here)
    for scorer in ("char-tfidf", "bm25"):
        both = [mrr[(d, scorer)] for d in SLICE]
        assert mrr[("mean:all", scorer)] == pytest.approx(sum(both) / 2, abs=1e-6)
        assert mrr[("mean:monolingual", scorer)] == pytest.approx(both[0], abs=1e-6)
        assert mrr[("mean:cross-lingual", scorer)] == pytest.approx(both[1], abs=1e-6)
        low, high = value[("mean:all", scorer, "mrr_low")], value[("mean:all", scorer, "mrr_high")]
        assert low < mrr[("mean:all", scorer)] < high
    # Resampled per dataset, the mean's interval is narrower than the mean of the datasets' intervals
    # (char TF-IDF: both datasets vary; bm25 finds nothing in the first 40 of nor_q_no_c_en).
    widths = [value[(d, "char-tfidf", "mrr_high")] - value[(d, "char-tfidf", "mrr_low")] for d in SLICE]
    assert min(widths) > 0
    mean_width = value[("mean:all", "char-tfidf", "mrr_high")] - value[("mean:all", "char-tfidf", "mrr_low")]
    assert mean_width < sum(widths) / 2
    first = rows[0]
    assert first["commit"] and first["data_stamp"] and "cores" in first["machine"]
    assert "experiment run" in first["command"] and first["queries"] == "40"
    # a second run appends, it does not overwrite
    again = cli("experiment", "run", str(experiment), "--data", str(melo_data), "--results", str(results), "--quiet",
                "--datasets", SLICE[0])  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert len(read_results(results)) > len(rows)


def test_a_titles_experiment_ranks_concepts(melo_data: Path, tmp_path: Path) -> None:
    """Labels as titles rank their concept first; three copies each of two neighbours' labels coded
    to two more concepts do not, and together make the interval over concepts the wider."""
    labels = english_labels(cached_taxonomy_from_melo(melo_data), 10)
    misleading = [(labels[i - 1][0], labels[i][1]) for i in (8, 9) for _ in range(3)]
    titles = write_titles(tmp_path / "ads.csv", [*labels[:8], *misleading])
    experiment = write_experiment(tmp_path / "ads.toml", f"""
description = "labels as titles"
[evaluate]
scorers = ["char-tfidf"]
titles = "{titles}"
""")  # fmt: skip
    results = tmp_path / "results.csv"
    run = cli("experiment", "run", str(experiment), "--data", str(melo_data), "--results", str(results), "--quiet")
    assert run.returncode == 0, run.stderr
    rows = {r["metric"]: r for r in read_results(results)}
    value = {metric: float(row["value"]) for metric, row in rows.items()}
    assert rows["mrr"]["dataset"] == "titles_ads_en" and rows["mrr"]["queries"] == "14"
    assert value["mrr"] == pytest.approx(value["acc@1"]) == pytest.approx(8 / 14)  # the six misleading ones miss
    assert value["mrr_low_concepts"] < value["mrr_low"] < value["mrr"] < value["mrr_high"] < value["mrr_high_concepts"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('description = "x"\n[evaluate]\nscorers = ["bm25"]\ndatasets = "all"\nsurprise = 1\n',
         "unknown key evaluate.surprise"),
        ('description = "x"\n', "exactly one of [evaluate], [leave_one_out], [graded]"),
        ('description = "x"\n[evaluate]\nscorers = ["bm25"]\n', "give datasets, titles or both"),
        ('description = "x"\n[evaluate]\nscorers = ["no-such"]\ndatasets = ["nor_q_no_c_no"]\n', "unknown scorer"),
        ('description = "x"\n[leave_one_out]\ngrid = "no-such"\n', "unknown grid"),
        ("description = [", "not a valid TOML file"),
        ('description = "x"\nsettled = "yes"\n[evaluate]\nscorers = ["bm25"]\ndatasets = "all"\n', "'settled' is true or false"),
    ],
)  # fmt: skip
def test_bad_experiment_files_fail_with_one_line(melo_data: Path, tmp_path: Path, body: str, message: str) -> None:
    experiment = write_experiment(tmp_path / "bad.toml", body)
    results = tmp_path / "results.csv"
    run = cli("experiment", "run", str(experiment), "--data", str(melo_data), "--results", str(results), "--quiet")
    assert run.returncode == 2, run.stderr
    assert message in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not results.exists()


def test_the_shipped_experiments_load() -> None:
    for name in ("melo-best", "melo-pipelines", "job-titles"):
        assert load_experiment(name).description
    unknown = cli("experiment", "run", "no-such-experiment")
    assert unknown.returncode == 2 and "unknown experiment" in unknown.stderr


def test_two_processes_started_in_the_same_second_get_their_own_run_ids() -> None:
    """A run id is the second it started, then its process: two experiments side by side no longer
    share one (the Benchmark page picks a run's rows by its id)."""
    import os
    import re
    import subprocess
    import sys

    from melo_core.evaluation.experiments.results import provenance

    code = ("import os; from melo_core.evaluation.experiments.results import provenance; "
            "print(provenance([], [], 'x').run, os.getpid())")  # fmt: skip
    here = provenance([], [], "x").run
    there, pid = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                cwd=Path(__file__).resolve().parent.parent).stdout.split()  # fmt: skip
    stamp = r"\d{8}T\d{6}Z"
    assert re.fullmatch(rf"{stamp}-{os.getpid()}", here) and re.fullmatch(rf"{stamp}-{pid}", there)
    assert int(pid) != os.getpid()  # so the same second cannot give the two one id


def test_a_run_that_follows_another_is_not_dirty_for_the_rows_the_first_wrote(tmp_path: Path) -> None:
    """The runner appends to experiments/results.csv: that result must not mark the next run of a
    sequence "-dirty", while any other change to a tracked file still does."""
    import subprocess

    from melo_core.version import code_version

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org",
                               *args], capture_output=True, text=True, check=True)  # fmt: skip
        return done.stdout.strip()

    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "results.csv").write_text("experiment,value\n")
    (tmp_path / "engine.py").write_text("WEIGHT = 0.5\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    commit = git("rev-parse", "--short", "HEAD")
    assert code_version(tmp_path) == commit
    with (tmp_path / "experiments" / "results.csv").open("a") as results:
        results.write("melo-best,0.55\n")
    (tmp_path / "notes.txt").write_text("untracked, as git describe --dirty ignores it\n")
    assert code_version(tmp_path) == commit
    (tmp_path / "engine.py").write_text("WEIGHT = 0.7\n")
    assert code_version(tmp_path) == f"{commit}-dirty"
    git("add", "engine.py")  # staged counts too
    assert code_version(tmp_path) == f"{commit}-dirty"
