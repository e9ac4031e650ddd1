"""benchmarks/mention_variants.py: mentions split by language, lifted with their own weights, and
its "base" variant scoring exactly as fusion_loo.py's grid with one mention weight for all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from melo_core.crosswalk import RELATIONS, crosswalk_decisions
from melo_core.datasets import load_dataset
from melo_core.scorers.known_mentions import dataset_mentions
from tests.conftest import linked_slice, load_benchmark, load_fusion_loo

SLICE = ("processed/melo/bel_q_fr_c_fr", "raw/crosswalks_standard/fra_fr", "raw/crosswalks_standard/aut_de",
         "raw/crosswalks_standard/bel_fr")  # fmt: skip


@pytest.fixture(scope="module")
def data(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return linked_slice(tmp_path_factory.mktemp("data"), melo_data, SLICE)


def test_mentions_are_split_by_the_query_language_and_the_own_country_is_left_out(data: Path) -> None:
    variants = load_benchmark("mention_variants")
    groups = variants.split_mentions(str(data), load_dataset(data / "processed/melo/bel_q_fr_c_fr"))
    french = {(t, u) for t, u, _ in crosswalk_decisions(data, "fra_fr", RELATIONS)}
    german = {(t, u) for t, u, _ in crosswalk_decisions(data, "aut_de", RELATIONS)}
    assert set(zip(groups["same"].texts, groups["same"].concepts, strict=True)) == french  # no bel_fr
    assert set(zip(groups["other"].texts, groups["other"].concepts, strict=True)) == german
    assert 0 < len(groups["same-alias"].texts) < len(groups["same"].texts)


def test_each_language_group_lifts_with_its_own_weight() -> None:
    variants = load_benchmark("mention_variants")
    base = np.array([[0.2, 0.5, 0.9]])
    best = {"other": np.array([[0.6, -np.inf, 0.1]]), "same": np.array([[0.4, 0.9, -np.inf]])}
    lifted = variants.lifted(base, best, other=0.5, same=1.0, same_group="same")
    assert np.allclose(lifted, [[0.4, 0.9, 0.9]])  # other: 0.2 + 0.5 * 0.4; same: up to 0.9; never down
    assert np.allclose(variants.lifted(base, best, other=0.0, same=0.0, same_group="same"), base)


def test_the_base_variant_scores_as_the_fusion_grid_with_one_mention_weight(data: Path) -> None:
    variants, fusion_loo = load_benchmark("mention_variants"), load_fusion_loo()
    dataset = load_dataset(data / "processed/melo/bel_q_fr_c_fr")
    dense = ["word-tfidf", "bm25", "char-tfidf"]  # stand in for the encoders: any four scorers fuse alike
    grid = variants.variant_grid(str(data), dataset, dense, {"base": variants.VARIANTS["base"],
                                                             "s0": variants.VARIANTS["s0"]})  # fmt: skip
    mentions = dataset_mentions(data, dataset.name, RELATIONS)
    reference = fusion_loo.grid_mrr(dataset, ["char-tfidf-lemmas"], dense, [0.0], ["asis"],
                                    mention_weights=(0.85,), mentions=mentions)  # fmt: skip
    assert len(grid) == 2 * len(reference) == 2 * 84
    for key, value in reference.items():
        spec, _ = fusion_loo.split_config_key(key)
        weights = ",".join(part.partition("*")[0] for part in spec.removeprefix("wsum:").split("+"))
        assert grid[f"base|{weights}"] == pytest.approx(value, abs=1e-12)
    # Leaving France's French titles out changes the Belgian French dataset.
    assert max(abs(grid[f"s0|{w}"] - grid[f"base|{w}"]) for w in ["0.1,0.3,0.5,0.1", "0.4,0.2,0.2,0.2"]) > 1e-3


def test_leave_one_out_never_lets_a_dataset_choose_for_itself() -> None:
    variants = load_benchmark("mention_variants")
    grid = {"a": {"x": 0.9, "y": 0.1}, "b": {"x": 0.2, "y": 0.3}, "c": {"x": 0.2, "y": 0.3}}
    mean, bound, chosen = variants.leave_one_out(grid, ["x", "y"])
    assert chosen == {"a": "y", "b": "x", "c": "x"}  # a prefers x, yet b and c choose it
    assert mean == pytest.approx((0.1 + 0.2 + 0.2) / 3) and bound == pytest.approx((0.9 + 0.2 + 0.2) / 3)
