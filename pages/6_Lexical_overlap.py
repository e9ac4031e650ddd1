"""Lexical overlap: how close each query is in spelling to its closest relevant corpus element
(the minimum normalised edit distance, the MELO paper's figures 1 and 4), and how models' MRR and
a bi-encoder's gain over a lexical baseline follow each dataset's median (figures 2 and 5)."""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from db.runs import OURS
from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.evaluation import analysis
from melo_core.evaluation.analysis import Distance
from ui import analysis as ui
from ui.common import store as open_store
from ui.navigation import app_navigation
from ui.safe import md_code, md_text

app_navigation()
st.set_page_config(page_title="Lexical overlap · MELO Studio", layout="wide")
st.title("Lexical overlap")

DISTANCES = {
    "indel": "Normalised Indel (the paper's 1 − fuzz.ratio/100)",
    "levenshtein": "Normalised Levenshtein (÷ longer length)",
}
PAPER_MODELS = ("edit_distance", "char_tf_idf", "muse_cnn", "openai")
DEFAULT_BASELINE = "char_tf_idf" + ui.PUBLISHED_SUFFIX
DEFAULT_BI_ENCODERS = ("openai", "muse_cnn")
FULL, PARTIAL = "all queries", "first queries only"


@st.cache_data(show_spinner="Computing the minimum edit distances of the monolingual datasets…")
def overlap(data_dir: str, distance: Distance, cache_dir: str) -> pd.DataFrame:
    # Disk-cached per dataset already; this saves re-reading the pickles on every rerun.
    return analysis.overlap_table(data_dir, distance=distance, cache_dir=cache_dir)


@st.cache_data(show_spinner=False)
def distances_of(data_dir: str, name: str, distance: Distance, cache_dir: str) -> np.ndarray:
    return analysis.cached_min_edit_distances(data_dir, name, distance, cache_dir=cache_dir)


def histogram_figure(frame: pd.DataFrame, median: float, title: str) -> go.Figure:
    """Bars of the share of queries per bin over [0, 1] and a dashed line at the median."""
    figure = go.Figure(
        go.Bar(
            x=(frame["left"] + frame["right"]) / 2,
            y=frame["probability"],
            width=frame["right"] - frame["left"],
            customdata=frame[["left", "right", "count"]],
            hovertemplate="[%{customdata[0]:.2f}, %{customdata[1]:.2f}): %{customdata[2]} queries"
            " (%{y:.1%})<extra></extra>",
            marker_line_width=0.5,
        )
    )
    figure.add_vline(x=median, line_dash="dash", line_color="firebrick")
    figure.update_layout(
        title=title,
        xaxis_title="Minimum normalised edit distance to a relevant element",
        yaxis_title="Probability",
        bargap=0.02,
    )
    figure.update_xaxes(range=[0, 1])
    return figure


def with_coverage(runs: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The runs on monolingual datasets with a ``coverage`` column: a run of ours that evaluated
    fewer queries than the dataset has (``--limit-queries``) is partial; published runs are full."""
    sized = runs.merge(table[["dataset", "n_queries"]].rename(columns={"n_queries": "dataset_queries"}), on="dataset")
    partial = sized["n_queries"].notna() & (sized["n_queries"] < sized["dataset_queries"])
    return sized.assign(coverage=np.where(partial, PARTIAL, FULL))


def rho_table(points: pd.DataFrame, y: str, key: str) -> None:
    rho = analysis.rho_by_model(points, x="median", y=y)
    # A keyed container, not a keyed dataframe: AppTest finds tables by their container's key.
    st.container(key=key).dataframe(
        rho,
        hide_index=True,
        column_config={
            "n": st.column_config.NumberColumn("datasets"),
            "rho": st.column_config.NumberColumn("Spearman's rho", format="%.3f"),
            "p": st.column_config.NumberColumn("p", format="%.2g"),
        },
    )


# -- controls -------------------------------------------------------------------------------------
with st.sidebar:
    distance = cast(
        Distance, st.selectbox("Distance", list(DISTANCES), format_func=DISTANCES.__getitem__, key="ov_distance")
    )
    bins = int(st.number_input("Histogram bins", min_value=5, max_value=100, value=20, step=5, key="ov_bins"))

data_dir, cache_dir = str(config.data_dir()), str(config.cache_dir())
try:
    table = overlap(data_dir, distance, cache_dir)
except (MeloInputError, OSError):
    st.warning(f"No MELO data in {md_code(data_dir)}. {config.DATA_HELP}")
    st.stop()
if table.empty:
    st.warning(f"No monolingual MELO dataset in {md_code(data_dir)}. {config.DATA_HELP}")
    st.stop()

# -- per dataset ----------------------------------------------------------------------------------
st.header("Minimum edit distance per monolingual dataset")
st.caption(
    "Per query: the distance between the lowercased query and its closest relevant corpus element "
    "(ASCII-folded except for non-Latin scripts), over the queries with at least one relevant element."
)
st.container(key="ov_table").dataframe(
    table,
    hide_index=True,
    column_config={
        "median": st.column_config.NumberColumn(format="%.3f"),
        "mean": st.column_config.NumberColumn(format="%.3f"),
    },
)

names = table["dataset"].tolist()
name = st.selectbox("Dataset", names, key="ov_dataset")
histogram = analysis.overlap_histogram(distances_of(data_dir, name, distance, cache_dir), bins)
bars = histogram.to_frame()
ui.show_chart(
    histogram_figure(bars, histogram.median, f"{name}: median {histogram.median:.3f} ({histogram.n} queries)"),
    bars.assign(dataset=name, distance=distance, median=histogram.median),
    f"overlap_histogram_{name}",
)
st.caption(f"Median distance of **{md_text(name)}**: {histogram.median:.4f} over {histogram.n:d} queries.")
with st.expander("Histogram numbers"):
    st.container(key="ov_histogram_data").dataframe(bars, hide_index=True)

if st.checkbox("All monolingual datasets (small multiples)", key="ov_all"):
    frames = []
    for other in names:
        each = analysis.overlap_histogram(distances_of(data_dir, other, distance, cache_dir), bins)
        frames.append(each.to_frame().assign(dataset=other, median=each.median))
    everything = pd.concat(frames, ignore_index=True)
    everything["panel"] = [f"{d} ({m:.2f})" for d, m in zip(everything["dataset"], everything["median"], strict=True)]
    everything["center"] = (everything["left"] + everything["right"]) / 2
    grid = px.bar(everything, x="center", y="probability", facet_col="panel", facet_col_wrap=6, height=900)
    grid.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    grid.update_traces(width=1 / bins)
    grid.update_xaxes(range=[0, 1], title="")
    # An explicit range: autorange over 24 facets came out far too tall in the browser.
    grid.update_yaxes(title="", range=[0, float(everything["probability"].max()) * 1.05])
    grid.update_layout(title="Minimum edit distance per dataset (median in brackets)", bargap=0.02)
    ui.show_chart(grid, everything.drop(columns=["panel", "center"]), "overlap_histograms_all")

# -- models against the median --------------------------------------------------------------------
st.header("MRR against lexical overlap")
runs = ui.run_table(open_store())
if runs.empty:
    st.info(
        "No evaluation runs in the store yet. Load the published baselines with "
        "`python -m melo_core import-results --data DIR`, or evaluate scorers with "
        "`python -m melo_core eval --data DIR --scorers char-tfidf --store` (or from the Benchmark page)."
    )
    st.stop()

sized = with_coverage(runs, table)
if sized.empty:
    st.info("None of the stored runs is on a monolingual dataset: evaluate a scorer on one (see above).")
    st.stop()
partial_runs = sized[sized["coverage"] == PARTIAL]
include_partial = False
if not partial_runs.empty:
    listed = ", ".join(
        f"{r.model} on {r.dataset} ({int(r.n_queries)} of {int(r.dataset_queries)})"
        for r in partial_runs.itertuples(index=False)
    )
    st.caption(
        f"{len(partial_runs)} run(s) of ours evaluated only the first queries of their dataset: {md_text(listed)}. "
        "Their MRR is not comparable with the median over all queries or with full runs."
    )
    include_partial = st.checkbox("Include partial runs (open markers)", key="ov_partial")
usable = sized if include_partial else sized[sized["coverage"] == FULL]
# Open markers for partial runs, only when they are drawn (else the legend repeats "all queries").
markers = {"symbol": "coverage", "symbol_map": {FULL: "circle", PARTIAL: "circle-open"}} if include_partial else {}
NOTHING = "No full run of these models on a monolingual dataset (partial runs are left out unless included)."

metrics = usable[["model", "dataset", "mrr"]]
coverage = usable[["model", "dataset", "coverage"]]
# Choices from every monolingual run, so that ticking "include partial" keeps the selection.
models = sorted(sized["model"].unique())
ours = set(sized.loc[sized["source"] == OURS, "model"])
defaults = [m for m in models if m in ours or m in {p + ui.PUBLISHED_SUFFIX for p in PAPER_MODELS}]
chosen = st.multiselect("Models", models, default=defaults, key="ov_models")
st.caption(f"Distance: {md_text(DISTANCES[distance])}. One point per model and monolingual dataset it was run on.")

points = analysis.mrr_vs_overlap(metrics[metrics["model"].isin(chosen)], table).merge(coverage, on=["model", "dataset"])
if points.empty:
    st.info("Choose at least one model." if not chosen else md_text(NOTHING))
else:
    scatter = px.scatter(
        points,
        x="median",
        y="mrr",
        color="model",
        color_discrete_map=ui.model_colours(runs["model"]),
        **markers,
        hover_data=["dataset"],
        labels={"median": "Median minimum edit distance", "mrr": "MRR"},
        title="MRR against the dataset's median minimum edit distance",
    )
    ui.show_chart(scatter, points, "overlap_mrr_vs_median")
    rho_table(points, "mrr", "ov_rho_mrr")

# -- gain of a bi-encoder over a lexical baseline -------------------------------------------------
st.header("Gain over a lexical baseline")
left, right = st.columns(2)
baseline = left.selectbox(
    "Lexical baseline",
    models,
    index=models.index(DEFAULT_BASELINE) if DEFAULT_BASELINE in models else 0,
    key="ov_baseline",
)
others = [m for m in models if m != baseline]
encoders = right.multiselect(
    "Bi-encoder(s)",
    others,
    default=[m for m in others if m in {p + ui.PUBLISHED_SUFFIX for p in DEFAULT_BI_ENCODERS}],
    key="ov_gain_models",
)
gains = analysis.gain_vs_overlap(metrics, encoders, baseline, table).merge(coverage, on=["model", "dataset"])
if gains.empty:
    st.info(
        f"Choose at least one model run on the same monolingual datasets as {md_text(baseline)}. {md_text(NOTHING)}"
    )
else:
    figure = px.scatter(
        gains,
        x="median",
        y="gain",
        color="model",
        color_discrete_map=ui.model_colours(runs["model"]),
        **markers,
        hover_data=["dataset"],
        labels={"median": "Median minimum edit distance", "gain": f"MRR gain over {baseline}"},
        title=f"Gain in MRR over {baseline} against the median minimum edit distance",
    )
    figure.add_hline(y=0, line_color="grey", line_width=1)
    ui.show_chart(figure, gains, "overlap_gain_vs_median")
    rho_table(gains, "gain", "ov_rho_gain")
