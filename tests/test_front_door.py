"""The front door: ``Pipeline.load`` from Python links and evaluates as `link` and `eval` do, and the
README's own snippet runs (on a slice of the data: one German dataset and its crosswalk)."""

from __future__ import annotations

import contextlib
import csv
import io
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import melo_core
from db.testing import run_cli, run_cli_ok
from melo_core import Candidate, MeloInputError, Pipeline, config
from melo_core.linking.pipeline import PIPELINES_DIR
from tests.conftest import ROOT, linked_slice

DATASET = "aut_q_de_c_de"  # the dataset the README evaluates; 1,120 German queries
QUERY = "Bäckermeister"


@pytest.fixture(scope="module")
def shared(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out as the README assumes (``shared/melo`` beside the working folder), holding
    one dataset and its crosswalk."""
    root = tmp_path_factory.mktemp("front-door")
    linked_slice(root / "shared" / "melo", melo_data, (f"processed/melo/{DATASET}", "raw/crosswalks_standard/aut_de"))
    (root / "work").mkdir()
    return root


@pytest.fixture(autouse=True)
def no_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No model built (best and fast are not ready: lexical serves), and the folders Pipeline.load
    chooses for the process given back afterwards."""
    monkeypatch.setenv("MELO_MODELS", str(tmp_path / "models"))
    with config.chosen_folders():
        yield


def readme_snippet() -> str:
    """The python block of the README's "From Python" paragraph, as written there."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"\*\*From Python\.\*\*.*?```python\n(.*?)```", text, re.DOTALL)
    assert found, "README.md has no python block after **From Python.**"
    return found.group(1)


def test_the_package_exports_the_front_door_and_not_the_labels_only_loader() -> None:
    assert melo_core.Pipeline is Pipeline and "Pipeline" in melo_core.__all__
    assert "taxonomy_from_melo" not in melo_core.__all__ and not hasattr(melo_core, "taxonomy_from_melo")
    from melo_core.esco.taxonomy import taxonomy_from_melo  # still there for what needs the labels only

    assert callable(taxonomy_from_melo)


def test_the_readme_snippet_runs_and_says_which_pipeline_serves(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snippet = readme_snippet()
    code = [line for line in snippet.strip().splitlines() if line.strip()]
    assert len(code) <= 5 and 'Pipeline.load("best"' in snippet  # five lines, as the issue asks
    monkeypatch.chdir(shared / "work")  # its data="../shared/melo" is the slice
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        exec(compile(snippet, "README.md", "exec"), {})  # the README's own text
    assert "pipeline 'best' is not ready" in err.getvalue() and "using 'lexical' meanwhile" in err.getvalue()
    *candidates, last = out.getvalue().strip().splitlines()
    assert [line.split()[0] for line in candidates] == [str(rank) for rank in range(1, 11)]
    assert "Bäcker/Bäckerin" in candidates[0]
    name, mrr = last.split()
    assert name == "lexical" and 0.0 < float(mrr) <= 1.0


def test_link_gives_typed_candidates_as_the_link_command_ranks(shared: Path) -> None:
    data = shared / "shared" / "melo"
    pipeline = Pipeline.load("lexical", data=data, query_language="de", show_progress=False)
    assert pipeline.name == "lexical" and pipeline.languages == ("de",)
    lists = pipeline.link([QUERY, "Konditorin"], top=5)
    assert len(lists) == 2 and all(len(candidates) == 5 for candidates in lists)
    for candidates in lists:
        assert all(isinstance(c, Candidate) and isinstance(c.score, float) for c in candidates)
        assert [c.rank for c in candidates] == [1, 2, 3, 4, 5]
        assert [c.score for c in candidates] == sorted((c.score for c in candidates), reverse=True)
        assert all(c.concept_uri in pipeline.taxonomy for c in candidates)
    assert pipeline.link([QUERY], top_k=5) == lists[:1]  # top is link's --top, top_k the engine's name
    printed = run_cli_ok("link", "--data", str(data), "--pipeline", "lexical", "--query", QUERY,
                         "--query-lang", "de", "--top", "5")  # fmt: skip
    assert [(line.split()[-1], line.split()[1]) for line in printed.strip().splitlines()] == [
        (c.concept_uri, f"{c.score:.4f}") for c in lists[0]
    ]


def test_evaluate_gives_the_metrics_of_the_eval_command(shared: Path, tmp_path: Path) -> None:
    data = shared / "shared" / "melo"
    own = tmp_path / "mine.toml"  # a pipeline file: evaluated by its path, as `eval --scorers PATH.toml`
    shutil.copy(PIPELINES_DIR / "lexical.toml", own)
    for name in ("lexical", str(own)):
        metrics = Pipeline.load(name, data=data, show_progress=False).evaluate(DATASET, limit_queries=40)
        out = tmp_path / "eval.csv"
        code, _, err = run_cli("eval", "--data", str(data), "--datasets", DATASET, "--scorers", name,
                               "--limit-queries", "40", "--out", str(out), "--quiet")  # fmt: skip
        assert code == 0, err
        (row,) = csv.DictReader(out.open(encoding="utf-8"))
        assert row["queries"] == "40"
        for key in ("mrr", "acc@1", "acc@5", "acc@10"):
            assert abs(round(metrics[key], 6) - float(row[key])) < 1e-9, key  # the CSV keeps 6 decimals
        assert metrics["mrr"] > 0.3


def test_a_named_pipeline_or_no_fallback_is_what_serves(shared: Path) -> None:
    data = shared / "shared" / "melo"
    said: list[str] = []
    assert Pipeline.load("best", data=data, fallback=False, on_status=said.append).name == "best"  # built on first use
    assert Pipeline.load("fast", data=data, on_status=said.append).name == "fast"
    assert said == []
    assert Pipeline.load("best", data=data, query_language="de", on_status=said.append).name == "lexical"
    assert len(said) == 1 and "using 'lexical' meanwhile" in said[0]


def test_a_bad_name_or_data_folder_stops_with_one_line(shared: Path, tmp_path: Path) -> None:
    data = shared / "shared" / "melo"
    cases = {
        "unknown pipeline 'bset'": lambda: Pipeline.load("bset", data=data),
        "pipeline definition not found": lambda: Pipeline.load(str(tmp_path / "nope.toml"), data=data),
        "data folder not found": lambda: Pipeline.load("lexical", data=tmp_path / "nowhere"),
        "no MELO datasets found": lambda: Pipeline.load("lexical", data=tmp_path),
        "the taxonomy has no labels in xx": lambda: Pipeline.load("lexical", data=data, languages=["xx"]),
    }
    for expected, load in cases.items():
        with pytest.raises(MeloInputError) as raised:
            load()
        assert expected in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(MeloInputError, match="dataset 'nor_q_no_c_no' not found"):
        Pipeline.load("lexical", data=data, show_progress=False).evaluate("nor_q_no_c_no")
