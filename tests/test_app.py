"""The landing page starts with and without data (Streamlit AppTest, real data folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
MELO_DATA = Path(os.environ.get("MELO_DATA", ROOT.parent / "shared" / "melo"))


@pytest.fixture(autouse=True)
def empty_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Home shows the curation status: a store of its own, not melo.db in the project."""
    monkeypatch.setenv("MELO_DB_URL", f"sqlite:///{tmp_path / 'melo.db'}")


def run_page(script: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("MELO_DATA", str(data_dir))
    monkeypatch.chdir(ROOT)
    app = AppTest.from_file(str(ROOT / script), default_timeout=60)
    return app.run()


def test_landing_page_without_data_explains_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = run_page("app.py", tmp_path / "nothing-here", monkeypatch)
    assert not app.exception
    assert any("No MELO data" in w.value for w in app.warning)
    text = " ".join(m.value for m in app.markdown)
    assert "MELO_DATA" in text and "melo-benchmark" in text


def test_landing_page_with_data_counts_datasets(monkeypatch: pytest.MonkeyPatch) -> None:
    if not MELO_DATA.is_dir():
        pytest.skip(f"MELO data not found at {MELO_DATA}")
    app = run_page("app.py", MELO_DATA, monkeypatch)
    assert not app.exception
    metrics = {m.label: m.value for m in app.metric}
    expected = sum(1 for p in (MELO_DATA / "processed" / "melo").iterdir() if (p / "queries.tsv").is_file())
    assert metrics["Datasets"] == str(expected)
    assert metrics["Corpus languages"] == "21"
    # The command line and the scorer lists are in the docs, linked; Home leads with the curation.
    assert [h.value for h in app.subheader][:2] == ["Curation", "Benchmark data"]
    assert any("`docs/cli.md`" in c.value for c in app.caption)
    assert not any("`char-tfidf`" in m.value for m in app.markdown)
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "python -m melo_core scorers" in cli and "eval --data" in cli


def test_datasets_page_shows_queries_of_the_chosen_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    if not MELO_DATA.is_dir():
        pytest.skip(f"MELO data not found at {MELO_DATA}")
    app = run_page("pages/1_Datasets.py", MELO_DATA, monkeypatch)
    assert not app.exception
    app.selectbox[0].select("nor_q_no_c_no").run()
    assert not app.exception
    sample = app.dataframe[1].value
    first_query = (MELO_DATA / "processed/melo/nor_q_no_c_no/queries.tsv").read_text(encoding="utf-8").split("\n")[0]
    assert sample.iloc[0]["query"] == first_query.split("\t")[1]
    assert (sample["relevant surface forms"] > 0).all()
