"""The mention-variants grid (``grid = "mention-variants"``, formerly benchmarks/mention_variants.py):
mentions split by language, lifted with their own weights; its "base" variant scores exactly as
the fusion grid with one mention weight for all; through the runner it reports pool MRR."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from melo_core.esco.crosswalk import RELATIONS, crosswalk_decisions
from melo_core.esco.datasets import load_dataset
from melo_core.evaluation.experiments import load_experiment, run_experiment
from melo_core.evaluation.experiments.grids.fusion import grid_mrr, split_config_key
from melo_core.evaluation.experiments.grids.mention_variants import VARIANTS, lifted, split_mentions, variant_grid
from melo_core.scorers.known_mentions import dataset_mentions
from tests.conftest import linked_slice

SLICE = ("processed/melo/bel_q_fr_c_fr", "processed/melo/nor_q_no_c_no", "raw/crosswalks_standard/fra_fr",
         "raw/crosswalks_standard/aut_de", "raw/crosswalks_standard/bel_fr")  # fmt: skip
DENSE = ["word-tfidf", "bm25", "char-tfidf"]  # stand in for the encoders: any four scorers fuse alike


@pytest.fixture(scope="module")
def data(melo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return linked_slice(tmp_path_factory.mktemp("data"), melo_data, SLICE)


def test_mentions_are_split_by_the_query_language_and_the_own_country_is_left_out(data: Path) -> None:
    groups = split_mentions(data, load_dataset(data / "processed/melo/bel_q_fr_c_fr"))
    french = {(t, u) for t, u, _ in crosswalk_decisions(data, "fra_fr", RELATIONS)}
    german = {(t, u) for t, u, _ in crosswalk_decisions(data, "aut_de", RELATIONS)}
    assert set(zip(groups["same"].texts, groups["same"].concepts, strict=True)) == french  # no bel_fr
    assert set(zip(groups["other"].texts, groups["other"].concepts, strict=True)) == german
    assert 0 < len(groups["same-alias"].texts) < len(groups["same"].texts)


def test_each_language_group_lifts_with_its_own_weight() -> None:
    base = np.array([[0.2, 0.5, 0.9]])
    best = {"other": np.array([[0.6, -np.inf, 0.1]]), "same": np.array([[0.4, 0.9, -np.inf]])}
    assert np.allclose(lifted(base, best, other=0.5, same=1.0, same_group="same"), [[0.4, 0.9, 0.9]])
    assert np.allclose(lifted(base, best, other=0.0, same=0.0, same_group="same"), base)


def test_the_base_variant_scores_as_the_fusion_grid_with_one_mention_weight(data: Path) -> None:
    dataset = load_dataset(data / "processed/melo/bel_q_fr_c_fr")
    grid = variant_grid(data, dataset, DENSE, {"base": VARIANTS["base"], "s0": VARIANTS["s0"]})
    mentions = dataset_mentions(data, dataset.name, RELATIONS)
    reference = grid_mrr(dataset, ["char-tfidf-lemmas"], DENSE, [0.0], ["asis"], mention_weights=(0.85,),
                         mentions=mentions)  # fmt: skip
    assert len(grid) == 2 * len(reference) == 2 * 84
    for key, value in reference.items():
        spec, _ = split_config_key(key)
        weights = ",".join(part.partition("*")[0] for part in spec.removeprefix("wsum:").split("+"))
        assert grid[f"base|{weights}"] == pytest.approx(value, abs=1e-12)
    # Leaving France's French titles out changes the Belgian French dataset.
    assert max(abs(grid[f"s0|{w}"] - grid[f"base|{w}"]) for w in ["0.1,0.3,0.5,0.1", "0.4,0.2,0.2,0.2"]) > 1e-3


def test_the_runner_reports_the_pool_mrr_of_the_configuration_chosen_on_the_other_dataset(
    data: Path, tmp_path: Path
) -> None:
    names = ["bel_q_fr_c_fr", "nor_q_no_c_no"]
    path = tmp_path / "tiny-variants.toml"
    path.write_text(f'description = "tiny"\n[leave_one_out]\ngrid = "mention-variants"\ndatasets = {names!r}\n'
                    f'[leave_one_out.options]\ndense = {DENSE!r}\nvariants = ["s0", "base"]\n'.replace("'", '"'),
                    encoding="utf-8")  # fmt: skip
    rows = run_experiment(load_experiment(path), data, results=tmp_path / "results.csv", limit_queries=40,
                          show_progress=False, say=lambda line: None)  # fmt: skip
    reported = {r["dataset"]: r for r in rows if r["dataset"] in names}
    assert {r["metric"] for r in rows} == {"pool_mrr"}
    grids = {n: variant_grid(data, load_dataset(data / "processed/melo" / n).subset(40), DENSE,
                             {"s0": VARIANTS["s0"], "base": VARIANTS["base"]}) for n in names}  # fmt: skip
    for name, other in (names, names[::-1]):
        # the other dataset's best; ties to the first in sorted order ("base|..." before "s0|...")
        best = max(sorted(grids[other]), key=lambda key: grids[other][key])
        assert reported[name]["pipeline"] == f"{best} over char-tfidf-lemmas+{'+'.join(DENSE)}"
        assert reported[name]["value"] == round(grids[name][best], 6)
