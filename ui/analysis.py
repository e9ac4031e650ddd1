"""What the analysis pages share: the stored runs as one table with a model name per run, the
dataset table, and one way to show a chart (Plotly, PNG from the chart's camera button, its data
as CSV). Streamlit glue only: the numbers come from ``db.runs`` and ``melo_core.evaluation.analysis``."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from db.formats import neutralise
from db.runs import OURS, run_metrics_frame, run_queries
from db.store import Store
from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.evaluation.analysis import dataset_table, gold_clusters
from melo_core.evaluation.significance import Interval, mean_interval
from ui.safe import md_code

PUBLISHED_SUFFIX = " (published)"
# 24 distinct colours; a model keeps its colour in every chart and on every page.
MODEL_PALETTE: tuple[str, ...] = tuple(px.colors.qualitative.Dark24)


def model_name(scorer: str, source: str) -> str:
    """Our runs by scorer spec; published baselines by paper model name, marked as such."""
    return scorer if source == OURS else scorer + PUBLISHED_SUFFIX


def model_colours(models: Iterable[str]) -> dict[str, str]:
    """``color_discrete_map`` for Plotly Express charts coloured by model: pass every model of the
    store (``run_table``), not the chosen ones, so a model keeps its colour in each chart and
    whatever the selection. A colour comes from the model's name (a stable hash, not its place in a
    list); a model whose colour is taken gets the next free one, so up to 24 models all differ."""
    colours: dict[str, str] = {}
    taken: set[int] = set()
    for model in sorted(set(models)):
        slot = int.from_bytes(hashlib.blake2b(model.encode("utf-8"), digest_size=4).digest(), "big")
        slot %= len(MODEL_PALETTE)
        for _ in range(len(MODEL_PALETTE)):
            if slot not in taken:
                break
            slot = (slot + 1) % len(MODEL_PALETTE)
        taken.add(slot)
        taken = set() if len(taken) == len(MODEL_PALETTE) else taken  # more models than colours: reuse
        colours[model] = MODEL_PALETTE[slot]
    return colours


def run_table(store: Store) -> pd.DataFrame:
    """The newest run per (scorer, dataset), with a ``model`` column naming it."""
    frame = run_metrics_frame(store, latest=True)
    frame.insert(1, "model", [model_name(s, src) for s, src in zip(frame["scorer"], frame["source"], strict=True)])
    return frame


@st.cache_data(show_spinner="Bootstrapping the MRR over the queries…", max_entries=64)
def _mrr_interval(_store: Store, url: str, run_id: int, by_concept: bool) -> Interval:
    queries = run_queries(_store, run_id)
    clusters = [list(gold_clusters(queries).values())] if by_concept else None
    return mean_interval([queries["reciprocal_rank"].to_numpy()], clusters=clusters)


def mrr_interval(store: Store, run_id: int, by_concept: bool = False) -> Interval:
    """The 95% bootstrap interval of a stored run's MRR over its queries (a few seconds for 15,000
    queries, once per run and store); ``by_concept``: gold concepts are drawn, each with all its
    queries (``eval --resample concepts``), for other concepts than the run's."""
    return _mrr_interval(store, store.url, run_id, by_concept)


@st.cache_data(show_spinner="Reading the datasets…")
def _datasets(data_dir: str) -> pd.DataFrame:
    return dataset_table(data_dir)


def datasets() -> pd.DataFrame:
    """One row per MELO dataset of the data folder (languages, kind, size); stops with help
    when there is no data."""
    try:
        return _datasets(str(config.data_dir()))
    except (MeloInputError, OSError):
        st.warning(f"No MELO data in {md_code(config.data_dir())}. {config.DATA_HELP}")
        st.stop()
        raise  # unreachable: st.stop() raises


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The frame as CSV, text cells a spreadsheet would run as a formula neutralised."""
    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object:
            safe[column] = [neutralise(v) if isinstance(v, str) else v for v in safe[column]]
    return safe.to_csv(index=False).encode("utf-8")


def show_chart(figure: go.Figure, data: pd.DataFrame, name: str) -> None:
    """The chart (its camera button saves a PNG named ``name``) and a download of its data."""
    st.plotly_chart(
        figure,
        key=f"chart_{name}",
        config={"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2}},
    )
    st.download_button(
        f"Data of this chart (CSV, {len(data):,} rows)",
        csv_bytes(data),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"csv_{name}",
    )
