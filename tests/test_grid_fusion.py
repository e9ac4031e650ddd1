"""The fusion grid (``grid = "fusion"``, formerly benchmarks/fusion_loo.py) through the runner:
fusions times known-mention weights scored on pools, chosen leave-one-dataset-out, the choice
evaluated as ``eval --scorers SPEC --depth 0 --mentions W``; options per dataset kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from melo_core.esco.crosswalk import RELATIONS
from melo_core.esco.datasets import load_dataset
from melo_core.evaluation.benchmarking import evaluate_one
from melo_core.evaluation.experiments import load_experiment, run_experiment
from melo_core.evaluation.experiments.grids import create_grid
from melo_core.evaluation.experiments.grids.fusion import grid_mrr, split_config_key
from melo_core.evaluation.protocol import Protocol
from tests.conftest import linked_slice

DATASETS = ("nor_q_no_c_no", "prt_q_pt_c_pt", "bel_q_fr_c_fr")
SLICE = (*(f"processed/melo/{d}" for d in DATASETS), "processed/melo/nor_q_no_c_en",
         "raw/crosswalks_standard/fra_fr", "raw/crosswalks_standard/aut_de")  # fmt: skip
OPTIONS = {"lexical": ["char-tfidf"], "dense": ["word-tfidf"], "centroid": [0], "forms": ["asis"],
           "mentions": [0, 0.5], "mention_relations": "all"}  # fmt: skip
LIMIT = 60


@pytest.fixture(scope="module")
def data(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return linked_slice(tmp_path_factory.mktemp("data"), melo_data, SLICE)


def test_a_fusion_experiment_chooses_on_pools_and_reports_eval_with_mentions(data: Path, tmp_path: Path) -> None:
    options = "\n".join(f"{k} = {v!r}".replace("'", '"') for k, v in OPTIONS.items())
    path = tmp_path / "tiny-fusion.toml"
    path.write_text(f'description = "tiny"\n[leave_one_out]\ngrid = "fusion"\ndatasets = {list(DATASETS)!r}\n'
                    f"[leave_one_out.options]\n{options}\n", encoding="utf-8")  # fmt: skip
    rows = run_experiment(load_experiment(path), data, results=tmp_path / "results.csv", limit_queries=LIMIT,
                          show_progress=False, say=lambda line: None)  # fmt: skip
    reported = {r["dataset"]: r for r in rows if r["metric"] == "mrr" and r["dataset"] in DATASETS}

    grid = create_grid("fusion", OPTIONS, data)
    datasets = {d: load_dataset(data / "processed/melo" / d).subset(LIMIT) for d in DATASETS}
    scores = {d: grid.score(dataset) for d, dataset in datasets.items()}
    # 9 weight pairs in tenths, each without and with mentions
    assert len(scores[DATASETS[0]]) == 9 * 2
    for name in DATASETS:
        others = [o for o in DATASETS if o != name]
        best = max(scores[name], key=lambda key: sum(scores[o][key] for o in others))
        assert reported[name]["pipeline"] == best
        spec, weight = split_config_key(best)
        full = evaluate_one(data, datasets[name], spec, Protocol("trec", 0), mention_weight=weight,
                            mention_relations=RELATIONS).metrics["mrr"]  # fmt: skip
        assert reported[name]["value"] == round(full, 6)
        assert scores[name][best] == pytest.approx(full, abs=2e-3)  # pool MRR: what the choice compares
    assert any("mentions=0.5" in str(r["pipeline"]) for r in reported.values())


def test_several_lexical_scorers_are_alternatives_of_one_grid(data: Path) -> None:
    # Each configuration fuses one lexical scorer: the grid over two is the union of the grid of
    # each, so the leave-one-out choice also picks the lexical scorer.
    dataset = load_dataset(data / "processed/melo" / DATASETS[0]).subset(LIMIT)
    grids = {lexical: grid_mrr(dataset, lexical, ["word-tfidf"], [0.0], ["asis"])
             for lexical in ("char-tfidf", "bm25")}  # fmt: skip
    both = grid_mrr(dataset, ["char-tfidf", "bm25"], ["word-tfidf"], [0.0], ["asis"])
    assert len(both) == 2 * 9
    assert both == grids["char-tfidf"] | grids["bm25"]
    assert set(grids["char-tfidf"].values()) != set(grids["bm25"].values())


def test_options_may_differ_by_dataset_kind(data: Path) -> None:
    # The lexical scorer stays off cross-lingual datasets, and a kind's own table overrides the
    # common options there (as the best pipeline's two grids differ).
    grid = create_grid("fusion", {**OPTIONS, "mentions": [0], "lexical_same_language_only": True,
                                  "cross-lingual": {"mentions": [0, 0.5]}}, data)  # fmt: skip
    cross = load_dataset(data / "processed/melo/nor_q_no_c_en").subset(20)
    mono = load_dataset(data / "processed/melo/nor_q_no_c_no").subset(20)
    assert list(grid.score(cross)) == ["word-tfidf", "word-tfidf | mentions=0.5"]
    assert len(grid.score(mono)) == 9 and all("mentions" not in key for key in grid.score(mono))
    result = grid.evaluate(cross, "word-tfidf | mentions=0.5")
    assert result.scorer == "word-tfidf" and result.protocol == Protocol("trec", 0)


def test_drop_evaluates_the_choice_without_one_part(data: Path) -> None:
    # Ablation: the same choice, evaluated (and named) without mentions or without one scorer.
    dataset = load_dataset(data / "processed/melo" / DATASETS[0]).subset(20)
    chosen = "wsum:0.3*char-tfidf+0.7*word-tfidf | mentions=0.5"
    without_mentions = create_grid("fusion", {**OPTIONS, "drop": "mentions"}, data)
    assert without_mentions.label(chosen) == "wsum:0.3*char-tfidf+0.7*word-tfidf"  # type: ignore[attr-defined]
    bare = evaluate_one(data, dataset, "wsum:0.3*char-tfidf+0.7*word-tfidf", Protocol("trec", 0))
    assert without_mentions.evaluate(dataset, chosen).metrics == bare.metrics
    without_lexical = create_grid("fusion", {**OPTIONS, "drop": "char-tfidf"}, data)
    assert without_lexical.label(chosen) == "word-tfidf | mentions=0.5"  # type: ignore[attr-defined]
    lifted = evaluate_one(data, dataset, "word-tfidf", Protocol("trec", 0), mention_weight=0.5,
                          mention_relations=RELATIONS)  # fmt: skip
    assert without_lexical.evaluate(dataset, chosen).metrics == lifted.metrics
    assert lifted.metrics["mrr"] != bare.metrics["mrr"]
