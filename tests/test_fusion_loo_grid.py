"""benchmarks/fusion_loo.py keeps its grid (--grid-out) and chooses from saved grids (--grid-in)
exactly as from a grid it scored itself, so the grid can be scored in parallel halves."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from melo_core.errors import MeloInputError
from tests.conftest import linked_slice, load_fusion_loo

DATASETS = ("nor_q_no_c_no", "prt_q_pt_c_pt", "bel_q_fr_c_fr")
SLICE = (*(f"processed/melo/{d}" for d in DATASETS), "raw/crosswalks_standard/fra_fr", "raw/crosswalks_standard/aut_de")


def _run(module, monkeypatch: pytest.MonkeyPatch, data: Path, *extra: str) -> None:  # type: ignore[no-untyped-def]
    argv = ["fusion_loo.py", "--data", str(data), "--lexical", "char-tfidf", "--dense", "word-tfidf",
            "--centroid", "0", "--forms", "asis", "--mentions", "0,0.5", "--mention-relations", "all", *extra]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    module.main()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_saved_grids_choose_and_evaluate_as_a_single_run(
    melo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fusion_loo = load_fusion_loo()
    data = linked_slice(tmp_path / "data", melo_data, SLICE)
    whole, half_a, half_b = tmp_path / "whole.csv", tmp_path / "a.csv", tmp_path / "b.csv"
    _run(fusion_loo, monkeypatch, data, "--datasets", ",".join(DATASETS), "--grid-out", str(tmp_path / "grid.csv"),
         "--out", str(whole))  # fmt: skip
    _run(fusion_loo, monkeypatch, data, "--datasets", ",".join(DATASETS[:2]), "--grid-out", str(half_a), "--grid-only")
    _run(fusion_loo, monkeypatch, data, "--datasets", DATASETS[2], "--grid-out", str(half_b), "--grid-only")

    grid = _rows(tmp_path / "grid.csv")
    assert {r["dataset"] for r in grid} == set(DATASETS)
    # 9 weight pairs in tenths, each without and with mentions, for each dataset
    assert len(grid) == 3 * 9 * 2
    assert {r["mention_relations"] for r in grid if "mentions=" in r["config"]} == {"all"}
    assert sorted(map(tuple, map(dict.values, _rows(half_a) + _rows(half_b)))) == sorted(
        map(tuple, map(dict.values, grid))
    )

    # The choice from both halves (mention relations taken from the grid) equals the single run.
    monkeypatch.setattr(sys, "argv", ["fusion_loo.py", "--data", str(data), "--grid-in", f"{half_a},{half_b}",
                                      "--out", str(tmp_path / "from_halves.csv")])  # fmt: skip
    fusion_loo.main()
    assert _rows(tmp_path / "from_halves.csv") == _rows(whole)
    assert any("mentions=0.5" in r["chosen"] for r in _rows(whole))

    # Evaluating one dataset still chooses for it among all the others in the grids.
    monkeypatch.setattr(sys, "argv", ["fusion_loo.py", "--data", str(data), "--grid-in", f"{half_a},{half_b}",
                                      "--datasets", DATASETS[0], "--out", str(tmp_path / "one.csv")])  # fmt: skip
    fusion_loo.main()
    assert _rows(tmp_path / "one.csv") == [r for r in _rows(whole) if r["dataset"] == DATASETS[0]]


def test_grids_of_different_configurations_are_refused(tmp_path: Path) -> None:
    fusion_loo = load_fusion_loo()
    columns = "dataset,kind,config,pool_mrr,mention_relations\n"
    (tmp_path / "a.csv").write_text(columns + "x_q_en_c_en,monolingual,char-tfidf,0.5,\n", encoding="utf-8")
    (tmp_path / "b.csv").write_text(columns + "y_q_en_c_en,monolingual,word-tfidf,0.4,\n", encoding="utf-8")
    with pytest.raises(MeloInputError, match="do not share one set of configurations"):
        fusion_loo.read_grids([str(tmp_path / "a.csv"), str(tmp_path / "b.csv")])
    (tmp_path / "c.csv").write_text(columns + "x_q_en_c_en,monolingual,s | mentions=0.5,0.5,alias\n"
                                    "y_q_en_c_en,monolingual,s | mentions=0.5,0.4,all\n", encoding="utf-8")  # fmt: skip
    with pytest.raises(MeloInputError, match="mix mention relations"):
        fusion_loo.read_grids([str(tmp_path / "c.csv")])


def test_several_lexical_scorers_are_alternatives_of_one_grid(
    melo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each configuration fuses one lexical scorer: the grid over two is the union of the grid of
    # each, so the leave-one-out choice also picks the lexical scorer.
    fusion_loo = load_fusion_loo()
    data = linked_slice(tmp_path / "data", melo_data, SLICE)
    grids = {}
    for lexical in ("char-tfidf", "bm25", "char-tfidf,bm25"):
        path = tmp_path / f"{lexical}.csv"
        argv = ["fusion_loo.py", "--data", str(data), "--lexical", lexical, "--dense", "word-tfidf", "--centroid", "0",
                "--forms", "asis", "--datasets", DATASETS[0], "--grid-out", str(path), "--grid-only"]  # fmt: skip
        monkeypatch.setattr(sys, "argv", argv)
        fusion_loo.main()
        grids[lexical] = {r["config"]: r["pool_mrr"] for r in _rows(path)}
    assert len(grids["char-tfidf,bm25"]) == 2 * 9
    assert grids["char-tfidf,bm25"] == grids["char-tfidf"] | grids["bm25"]
    assert set(grids["char-tfidf"].values()) != set(grids["bm25"].values())


def test_rerun_evaluates_the_chosen_specs_again(
    melo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --drop none reproduces a run (as after retraining a model); --drop mentions runs it without them.
    fusion_loo = load_fusion_loo()
    data = linked_slice(tmp_path / "data", melo_data, SLICE)
    first = tmp_path / "first.csv"
    _run(fusion_loo, monkeypatch, data, "--datasets", ",".join(DATASETS), "--out", str(first))
    chosen = {r["dataset"]: r for r in _rows(first)}
    for drop in ("none", "mentions"):
        monkeypatch.setattr(sys, "argv", ["fusion_loo.py", "--data", str(data), "--rerun", str(first), "--drop", drop,
                                          "--mention-relations", "all", "--out", str(tmp_path / f"{drop}.csv")])  # fmt: skip
        fusion_loo.main()
    again = {r["dataset"]: r for r in _rows(tmp_path / "none.csv")}
    assert {n: (r["chosen"], r["mrr"]) for n, r in again.items()} == {
        n: (r["chosen"], r["mrr"]) for n, r in chosen.items()
    }
    without = {r["dataset"]: r for r in _rows(tmp_path / "mentions.csv")}
    lifted = [n for n, r in chosen.items() if "mentions=" in r["chosen"]]
    assert lifted and all("mentions=" not in without[n]["chosen"] for n in lifted)
    assert any(without[n]["mrr"] != chosen[n]["mrr"] for n in lifted)
