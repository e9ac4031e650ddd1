"""``experiment report``: docs/benchmarks.md is generated from experiments/results.csv, each
experiment's latest run only, the same bytes every time; the committed page is what it writes."""

from __future__ import annotations

import random
from pathlib import Path

from melo_core.evaluation.experiments.config import load_experiment
from melo_core.evaluation.experiments.report import REPORT_FILE, experiment_files, render, write_report
from melo_core.evaluation.experiments.results import (
    RESULT_COLUMNS,
    RESULTS_FILE,
    Provenance,
    append_results,
    read_results,
)
from tests.test_cli import cli

ROOT = Path(__file__).resolve().parent.parent


def origin(run: str, commit: str) -> Provenance:
    return Provenance(run=run, commit=commit, models="", data_stamp="x", command=f"python -m melo_core experiment run toy # {run}",
                      machine="x86_64, 2 cores", date=f"{run[:4]}-{run[4:6]}-{run[6:8]}T00:00:00+00:00")  # fmt: skip


def toy_results(path: Path) -> Path:
    """Two runs of one MELO experiment (the second better) and one run of a timing kind."""
    for run, commit, mrr in (("20261101T000000Z", "old0001", 0.25), ("20261102T000000Z", "new0002", 0.5)):
        rows: list[dict[str, object]] = [{"dataset": dataset, "pipeline": "lexical", "metric": "mrr", "value": mrr, "queries": 10, "seconds": 1}
                for dataset in ("nor_q_no_c_no", "nor_q_no_c_en", "mean:all", "mean:monolingual",
                                "mean:cross-lingual")]  # fmt: skip
        append_results(path, "melo-toy", rows, origin(run, commit))
    append_results(path, "store-toy", [{"dataset": "synthetic-10", "pipeline": "sqlite", "metric": "import_seconds",
                                        "value": 3.25, "queries": "", "seconds": 3.25}],
                   origin("20261103T000000Z", "abc1234"))  # fmt: skip
    return path


def test_the_latest_run_is_the_figure_and_older_runs_stay_out(tmp_path: Path) -> None:
    text = render(read_results(toy_results(tmp_path / "results.csv")))
    assert "0.5000" in text and "new0002" in text
    assert "0.2500" not in text and "old0001" not in text  # no rerun history in the page
    assert "`store-toy`" in text and "import_seconds" in text and "3.2500" in text
    assert "python -m melo_core experiment run toy # 20261102T000000Z" in text


def test_a_metric_the_latest_run_did_not_record_leaves_its_cell_empty(tmp_path: Path) -> None:
    """A rerun that proposed nothing records no precision: the earlier run's precision must not
    stand beside the rerun's coverage as if measured with it."""
    path = tmp_path / "results.csv"
    for run, metrics in (("20261101T000000Z", {"proposal_coverage": 0.125, "proposal_precision": 0.875}),
                         ("20261102T000000Z", {"proposal_coverage": 0.0})):  # fmt: skip
        append_results(path, "shift-toy", [{"dataset": "nor_no", "pipeline": "best", "metric": metric, "value": value,
                                            "queries": 8, "seconds": 1} for metric, value in metrics.items()],
                       origin(run, run[:7]))  # fmt: skip
    append_results(path, "shift-toy", [{"dataset": "usa_en", "pipeline": "best", "metric": "proposal_precision",
                                        "value": 0.75, "queries": 8, "seconds": 1}],
                   origin("20261101T000000Z", "2026110"))  # fmt: skip
    text = render(read_results(path))
    assert "0.8750" not in text and "0.1250" not in text  # the first run's figures of nor_no are gone
    assert "0.7500" in text  # usa_en's only run stays current


def test_the_report_does_not_depend_on_row_order(tmp_path: Path) -> None:
    rows = read_results(toy_results(tmp_path / "results.csv"))
    shuffled = list(rows)
    random.Random(7).shuffle(shuffled)
    assert render(rows, "# Head\n") == render(shuffled, "# Head\n")
    assert render(rows, "# Head\n").startswith("# Head\n")


def test_the_command_writes_the_page_twice_byte_identically(tmp_path: Path) -> None:
    results = toy_results(tmp_path / "results.csv")
    pages = []
    for name in ("first.md", "second.md"):
        run = cli("experiment", "report", "--results", str(results), "--out", str(tmp_path / name))
        assert run.returncode == 0, run.stderr
        pages.append((tmp_path / name).read_bytes())
    assert pages[0] == pages[1]
    assert "melo-toy" in pages[0].decode("utf-8")
    missing = cli("experiment", "report", "--results", str(tmp_path / "none.csv"), "--out", "-")
    assert missing.returncode == 2 and "no results table" in missing.stderr


def test_the_committed_benchmarks_page_is_the_report_of_the_results_table() -> None:
    """Regenerate with `python -m melo_core experiment report` after adding rows."""
    assert list(read_results(RESULTS_FILE)[0]) == RESULT_COLUMNS
    expected = write_report(RESULTS_FILE, out=None)
    assert REPORT_FILE.read_text(encoding="utf-8") == expected, "run `python -m melo_core experiment report`"
    assert len(expected.splitlines()) <= 300


def test_a_settled_experiment_is_named_and_its_rows_leave_the_tables(tmp_path: Path) -> None:
    rows = read_results(toy_results(tmp_path / "results.csv"))
    tabled = render(rows)
    assert "| `melo-toy` |" in tabled and "## Settled experiments" not in tabled
    settled = render(rows, settled={"melo-toy": "docs/experiments/toy-page.md: the toy's weight"})
    assert "| `melo-toy` |" not in settled and "0.5000" not in settled  # its figures left the tables
    assert "`melo-toy` ([toy-page](experiments/toy-page.md))" in settled  # named, with its page
    assert "python -m melo_core experiment run toy # 20261102T000000Z" in settled  # its command stays
    assert "| `store-toy` |" in settled


def test_the_committed_settled_flags_are_read_from_the_experiment_files() -> None:
    settled = {e.name: e.claim for e in experiment_files() if e.settled}
    assert "titles-e5-weights" in settled and "melo-best-mono" not in settled
    assert all(load_experiment(name).settled for name in settled)


def test_the_readme_fits_a_newcomer() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


def test_a_long_table_of_another_kind_shows_its_means(tmp_path: Path) -> None:
    """Per-crosswalk rows stay in results.csv; the page shows the experiment's own means, or else
    the mean per pipeline, so that a new kind of experiment does not flood the page."""
    results = tmp_path / "results.csv"
    codes = [f"c{index:02d}" for index in range(20)]
    rows: list[dict[str, object]] = [
        {"dataset": code, "pipeline": "best", "metric": "spearman_grade", "value": index / 100, "queries": 5,
         "seconds": 1} for index, code in enumerate(codes)
    ]  # fmt: skip
    append_results(results, "graded-toy", rows, origin("20261104T000000Z", "abc1234"))
    text = render(read_results(results))
    assert "`c07`" not in text and "| mean of 20 | `best` | 0.0950 |" in text
    append_results(results, "graded-toy", [{"dataset": "mean:crosswalks", "pipeline": "best", "metric": "spearman_grade",
                                            "value": 0.5, "queries": 20, "seconds": ""}],
                   origin("20261104T000000Z", "abc1234"))  # fmt: skip
    text = render(read_results(results))
    assert "`c07`" not in text and "| `mean:crosswalks` | `best` | 0.5000 |" in text


def test_runs_over_some_crosswalks_each_are_averaged_together(tmp_path: Path) -> None:
    """Two runs (``--datasets``) of one crosswalk each: each run's own mean covers its crosswalk
    only, so the page shows the mean of both crosswalks' current rows."""
    results = tmp_path / "results.csv"
    for run, code, value in (("20261104T000000Z", "c01", 900.0), ("20261104T010000Z", "c02", 1000.0)):
        rows: list[dict[str, object]] = [
            {"dataset": dataset, "pipeline": "best", "metric": "effort_per_100", "value": value, "queries": 5,
             "seconds": 1} for dataset in (code, "mean:crosswalks")
        ]  # fmt: skip
        append_results(results, "effort-toy", rows, origin(run, "abc1234"))
    text = render(read_results(results))
    assert "| `effort-toy` | mean of 2 | `best` | 950 |" in text and "`mean:crosswalks`" not in text


def test_a_title_set_measured_beside_crosswalks_is_not_averaged_with_them(tmp_path: Path) -> None:
    """Runs over crosswalks and over a job-ad title sample: the crosswalks' mean, the titles apart."""
    results = tmp_path / "results.csv"
    for run, datasets, value in (("20261104T000000Z", ("c01", "c02", "mean:crosswalks"), 0.4),
                                 ("20261104T010000Z", ("titles-5000",), 0.9)):  # fmt: skip
        rows: list[dict[str, object]] = [
            {"dataset": dataset, "pipeline": "best", "metric": "acc_at_1", "value": value, "queries": 5,
             "seconds": 1} for dataset in datasets
        ]  # fmt: skip
        append_results(results, "order-toy", rows, origin(run, "abc1234"))
    text = render(read_results(results))
    assert (
        "| `order-toy` | mean of 2 | `best` | 0.4000 |" in text
        and "| `order-toy` | `titles-5000` | `best` | 0.9000 |" in text
    )


def test_experiments_with_the_same_measures_share_one_table(tmp_path: Path) -> None:
    """calibration and calibration-lexical measure the same: one header, a row each; another
    measure gets its own table."""
    results = tmp_path / "results.csv"
    for experiment, pipeline in (("calibration-toy", "best"), ("calibration-toy-lexical", "lexical")):
        append_results(results, experiment, [{"dataset": "mean:crosswalks", "pipeline": pipeline, "metric": "ece",
                                              "value": 0.05, "queries": 24, "seconds": ""}],
                       origin("20261104T000000Z", "abc1234"))  # fmt: skip
    append_results(results, "graded-toy", [{"dataset": "mean:crosswalks", "pipeline": "best", "metric": "spearman_grade",
                                            "value": 0.5, "queries": 24, "seconds": ""}],
                   origin("20261104T000000Z", "abc1234"))  # fmt: skip
    text = render(read_results(results))
    assert text.count("| experiment | dataset | pipeline | ece | date | commit |") == 1
    assert "| `calibration-toy` |" in text and "| `calibration-toy-lexical` |" in text
    assert text.count("| experiment | dataset | pipeline | spearman_grade | date | commit |") == 1


def test_an_experiment_measuring_part_of_anothers_measures_joins_its_table(tmp_path: Path) -> None:
    """proposals-lexical proposed nothing, so it has no precision: its row joins the table of the
    experiments that have one, with that cell empty, instead of a table of its own."""
    results = tmp_path / "results.csv"
    measures = {
        "proposals-toy": ("proposal_coverage", "proposal_precision"),
        "proposals-toy-none": ("proposal_coverage",),
    }
    for experiment, metrics in measures.items():
        append_results(results, experiment, [{"dataset": "mean:crosswalks", "pipeline": "lexical", "metric": metric,
                                              "value": 0.5, "queries": 24, "seconds": ""} for metric in metrics],
                       origin("20261104T000000Z", "abc1234"))  # fmt: skip
    text = render(read_results(results))
    assert text.count("| experiment | dataset | pipeline |") == 1
    assert "| experiment | dataset | pipeline | proposal_coverage | proposal_precision | date | commit |" in text
    assert "| `proposals-toy-none` | `mean:crosswalks` | `lexical` | 0.5000 |  | 2026-11-04 | `abc1234` |" in text
