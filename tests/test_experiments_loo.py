"""Leave-one-out experiments: the runner's choice (``choose_left_out``), a leave-one-out experiment
file run end to end on real dataset slices, and bad experiment files refused in one line."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from melo_core.errors import MeloInputError
from melo_core.esco.datasets import load_dataset
from melo_core.evaluation.benchmarking import evaluate_one
from melo_core.evaluation.experiments import load_experiment, run_experiment
from melo_core.evaluation.experiments.grids import create_grid
from melo_core.evaluation.experiments.runner import choose_left_out
from melo_core.evaluation.protocol import Protocol, evaluate
from melo_core.scorers import ScorerContext, create_scorer
from tests.conftest import linked_slice

ROOT = Path(__file__).resolve().parent.parent
MONO = ("nor_q_no_c_no", "prt_q_pt_c_pt", "bel_q_fr_c_fr")
LIMIT = 40


def test_each_dataset_is_chosen_for_by_the_others_of_its_kind() -> None:
    scores = {
        "aaa_q_en_c_en": {"x": 0.9, "y": 0.1},
        "bbb_q_en_c_en": {"x": 0.2, "y": 0.3},
        "ccc_q_en_c_en": {"x": 0.2, "y": 0.3},
        "ddd_q_de_c_en": {"x": 0.0, "y": 1.0},
        "eee_q_de_c_en": {"x": 0.1, "y": 0.5},
    }
    # aaa prefers x, yet bbb and ccc choose x because aaa outweighs them; aaa itself gets y.
    assert choose_left_out(scores, "kind") == {"aaa_q_en_c_en": "y", "bbb_q_en_c_en": "x", "ccc_q_en_c_en": "x",
                                               "ddd_q_de_c_en": "y", "eee_q_de_c_en": "y"}  # fmt: skip
    # Over every other dataset the cross-lingual ones vote too: y wins for bbb and ccc, and the
    # monolingual ones give ddd x.
    assert choose_left_out(scores, "all") == {"aaa_q_en_c_en": "y", "bbb_q_en_c_en": "y", "ccc_q_en_c_en": "y",
                                              "ddd_q_de_c_en": "x", "eee_q_de_c_en": "y"}  # fmt: skip


def test_ties_go_to_the_configuration_listed_first_and_a_lone_kind_is_refused() -> None:
    tied = {"aaa_q_en_c_en": {"y": 0.4, "x": 0.4}, "bbb_q_en_c_en": {"y": 0.5, "x": 0.5}}
    assert choose_left_out(tied, "kind") == {"aaa_q_en_c_en": "y", "bbb_q_en_c_en": "y"}
    swapped = {name: dict(reversed(list(by.items()))) for name, by in tied.items()}
    assert choose_left_out(swapped, "kind") == {"aaa_q_en_c_en": "x", "bbb_q_en_c_en": "x"}
    with pytest.raises(MeloInputError, match="no other dataset of its kind"):
        choose_left_out({**tied, "ccc_q_de_c_en": {"y": 0.1, "x": 0.2}}, "kind")


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_hybrid_experiment_chooses_leave_one_out_and_reports_the_full_evaluation(
    melo_data: Path, tmp_path: Path
) -> None:
    data = linked_slice(tmp_path / "data", melo_data, tuple(f"processed/melo/{d}" for d in MONO))
    path = _write(
        tmp_path / "tiny-hybrid.toml",
        f"""
description = "char TF-IDF + word TF-IDF on three slices"
[leave_one_out]
grid = "hybrid"
datasets = {list(MONO)!r}
[leave_one_out.options]
lexical = "char-tfidf"
dense = ["word-tfidf"]
""",
    )
    results = tmp_path / "results.csv"
    rows: list[dict[str, Any]] = run_experiment(load_experiment(path), data, results=results, limit_queries=LIMIT,
                                                show_progress=False, say=lambda line: None)  # fmt: skip
    written = list(csv.DictReader(results.open(encoding="utf-8")))
    assert [(r["dataset"], r["metric"], float(r["value"])) for r in written] == [
        (r["dataset"], r["metric"], r["value"]) for r in rows
    ]
    assert {r["experiment"] for r in written} == {"tiny-hybrid"} and all(r["commit"] for r in written)

    # The grid: 9 weighted sums and RRF, each scored as a full evaluation of its spec would score it.
    grid = create_grid("hybrid", {"lexical": "char-tfidf", "dense": ["word-tfidf"]}, data)
    datasets = {d: load_dataset(data / "processed/melo" / d).subset(LIMIT) for d in MONO}
    scores = {d: grid.score(dataset) for d, dataset in datasets.items()}
    assert len(scores[MONO[0]]) == 10 and "rrf:char-tfidf+word-tfidf" in scores[MONO[0]]
    for spec in ("wsum:0.3*char-tfidf+0.7*word-tfidf", "rrf:char-tfidf+word-tfidf"):
        scorer = create_scorer(spec, ScorerContext.for_dataset(datasets[MONO[0]], show_progress=False))
        full = evaluate(datasets[MONO[0]], scorer, Protocol("trec", 0)).metrics["mrr"]
        assert scores[MONO[0]][spec] == pytest.approx(full, abs=1e-12)

    # Each dataset's row: the spec best on the mean of the other two, evaluated as eval --depth 0.
    reported = {r["dataset"]: r for r in rows if r["metric"] == "mrr" and not str(r["dataset"]).startswith("mean:")}
    for name in MONO:
        others = [o for o in MONO if o != name]
        best = max(scores[name], key=lambda spec: sum(scores[o][spec] for o in others))
        assert reported[name]["pipeline"] == best
        chosen = evaluate_one(data, datasets[name], best, Protocol("trec", 0))
        assert reported[name]["value"] == round(chosen.metrics["mrr"], 6)
        assert reported[name]["queries"] == len(chosen.query_ids)
    mean = next(r for r in rows if r["dataset"] == "mean:monolingual" and r["metric"] == "mrr")
    assert mean["pipeline"] == "chosen leave-one-out"
    assert mean["value"] == pytest.approx(sum(float(reported[n]["value"]) for n in MONO) / 3, abs=1e-6)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('description = "x"\n[leave_one_out]\ngrid = "hybrid"\nwithin = "kind"\nwhat = 1\n',
         "unknown key leave_one_out.what"),
        ('description = "x"\n[leave_one_out]\ngrid = "no-such-grid"\n', "unknown grid 'no-such-grid'"),
        ('description = "x"\n[leave_one_out]\ngrid = "fusion"\n[leave_one_out.options]\ncentroids = [0.2]\n',
         "grid 'fusion': unknown option 'centroids'"),
        ('description = "x"\n[leave_one_out]\ngrid = "hybrid"\nwithin = "country"\n', "'kind' or 'all'"),
    ],
)  # fmt: skip
def test_a_bad_experiment_file_is_refused_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path / "bad.toml", text)
    done = subprocess.run([sys.executable, "-m", "melo_core", "experiment", "run", str(path), "--data",
                           str(tmp_path / "data"), "--results", str(tmp_path / "results.csv")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert not (tmp_path / "results.csv").exists()


def test_the_shipped_experiment_files_load_and_their_grids_accept_their_options() -> None:
    names = ["hybrid-loo", "domain-hybrid-loo", "fusion-loo", "fusion-loo-centroids", "fusion-loo-mentions",
             "mention-variants"]  # fmt: skip
    for name in names:
        experiment = load_experiment(name)
        assert experiment.leave_one_out is not None and experiment.claim
        create_grid(experiment.leave_one_out.grid, experiment.leave_one_out.options, ROOT)
    fusion = create_grid("fusion", load_experiment("fusion-loo").leave_one_out.options, ROOT)  # type: ignore[union-attr]
    assert fusion.by_kind["monolingual"].forms == ["asis"]  # type: ignore[attr-defined]
    assert fusion.by_kind["cross-lingual"].forms == ["asis", "variants"]  # type: ignore[attr-defined]
    assert fusion.by_kind["cross-lingual"].mentions == [0, 0.3, 0.5, 0.7]  # type: ignore[attr-defined]
