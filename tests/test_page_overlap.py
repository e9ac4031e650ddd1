"""The Lexical overlap page with Streamlit's AppTest on the small stored run set (conftest's
``run_set_db``): its histogram, median and Spearman's rho checked against direct computations on
the raw TSV files."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from streamlit.testing.v1 import AppTest

from melo_core.scorers.text import NON_LATIN_LANGUAGES
from tests.paper_reference import paper_min_distances, read_pairs

ROOT = Path(__file__).resolve().parent.parent
PAGE = "pages/6_Lexical_overlap.py"
CHOSEN = "bel_q_fr_c_fr"  # has partial runs of ours in the run set
MODEL = "openai"


def direct_distances(folder: Path) -> np.ndarray:
    """The paper's rule: ASCII-folded unless a language of the dataset has a non-Latin script."""
    languages = {folder.name.split("_")[2], *folder.name.split("_")[4:]}
    return np.array(paper_min_distances(folder, fold=not NON_LATIN_LANGUAGES.intersection(languages)))


def monolingual(melo_data: Path) -> list[str]:
    names = sorted(p.name for p in (melo_data / "processed" / "melo").iterdir() if p.is_dir())
    return [n for n in names if (parts := n.split("_")) and len(parts) == 5 and parts[2] == parts[4]]


@pytest.fixture
def env(melo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MELO_DATA", str(melo_data))
    monkeypatch.setenv("MELO_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    return tmp_path


@pytest.fixture
def with_runs(env: Path, run_set_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = env / "melo.db"
    shutil.copy(run_set_db, copy)
    monkeypatch.setenv("MELO_DB_URL", f"sqlite:///{copy}")


def page() -> AppTest:
    return AppTest.from_file(str(ROOT / PAGE), default_timeout=60)


def dataframe(app: AppTest, key: str):  # AppTest's Dataframe
    """The table the page shows in the container with this key."""
    return app.container(key).dataframe[0]


def figure(app: AppTest, index: int) -> dict:
    return json.loads(app.get("plotly_chart")[index].proto.spec)


def values(array: list | dict) -> np.ndarray:
    """A figure's array: a JSON list, or Plotly's typed array ({"dtype", "bdata": base64})."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
    return np.asarray(array)


def test_histogram_median_and_rho_match_direct_computations(with_runs: None, melo_data: Path) -> None:
    app = page().run()
    assert not app.exception
    app.selectbox(key="ov_dataset").select(CHOSEN).run()
    assert not app.exception

    # The histogram of the chosen dataset: the numbers shown and the bars plotted.
    distances = direct_distances(melo_data / "processed" / "melo" / CHOSEN)
    counts, edges = np.histogram(distances, bins=20, range=(0.0, 1.0))
    shown = dataframe(app, "ov_histogram_data").value
    np.testing.assert_allclose(shown["left"], edges[:-1])
    np.testing.assert_array_equal(shown["count"], counts)
    np.testing.assert_allclose(shown["probability"], counts / distances.size)
    bars = figure(app, 0)["data"][0]
    np.testing.assert_allclose(values(bars["y"]), counts / distances.size)

    # The median: in the caption, the chart's title and the per-dataset table.
    median = float(np.median(distances))
    assert any(f"{median:.4f} over {distances.size} queries" in c.value for c in app.caption)
    assert f"median {median:.3f}" in figure(app, 0)["layout"]["title"]["text"]
    table = dataframe(app, "ov_table").value.set_index("dataset")
    assert table.loc[CHOSEN, "median"] == pytest.approx(median, abs=1e-12)
    assert table.loc[CHOSEN, "n_queries"] == distances.size

    # Spearman's rho of the published MRR against the medians, over the 24 monolingual datasets.
    names = monolingual(melo_data)
    medians = [float(np.median(direct_distances(melo_data / "processed" / "melo" / n))) for n in names]
    mrr = [float(read_pairs(melo_data / "results" / MODEL / n / "summary.tsv")["recip_rank"]) for n in names]
    expected = stats.spearmanr(medians, mrr)
    rho = dataframe(app, "ov_rho_mrr").value.set_index("model").loc[MODEL + " (published)"]
    assert rho["n"] == len(names) == 24
    assert rho["rho"] == pytest.approx(expected.statistic, abs=1e-12)
    assert rho["p"] == pytest.approx(expected.pvalue, rel=1e-9)

    # Our runs cover 60 queries: named as partial and left out until asked for.
    assert any("first queries of their dataset" in c.value for c in app.caption)
    assert "edit-distance" not in set(dataframe(app, "ov_rho_mrr").value["model"])
    app.checkbox(key="ov_partial").check().run()
    assert not app.exception
    assert "edit-distance" in set(dataframe(app, "ov_rho_mrr").value["model"])

    # The gain of a bi-encoder over char TF-IDF, with its rho.
    assert app.selectbox(key="ov_baseline").value == "char_tf_idf (published)"
    gain = dataframe(app, "ov_rho_gain").value.set_index("model")
    assert MODEL + " (published)" in gain.index


def test_empty_store_explains_and_still_shows_the_histogram(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MELO_DB_URL", f"sqlite:///{env / 'empty.db'}")
    app = page().run()
    assert not app.exception
    assert any("import-results" in i.value and "eval" in i.value for i in app.info)
    assert len(dataframe(app, "ov_histogram_data").value) == 20
    assert "ov_rho_mrr" not in [c.key for c in app.get("container")]

    # The other distance, and every monolingual dataset as small multiples.
    indel = dataframe(app, "ov_table").value
    app.checkbox(key="ov_all").check()
    app.selectbox(key="ov_distance").select("levenshtein").run()
    assert not app.exception
    levenshtein = dataframe(app, "ov_table").value
    assert list(levenshtein["dataset"]) == list(indel["dataset"])
    assert (levenshtein["median"] >= indel["median"] - 1e-12).all()  # Levenshtein/max >= Indel/sum
    assert len(app.get("plotly_chart")) == 2
