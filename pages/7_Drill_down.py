"""One dataset, one model: every query with its gold concept(s), the rank of the first relevant
element and the top-5 predictions; only the failures if you like; and two models side by side on
the same queries, with a Wilcoxon signed-rank test on the per-query reciprocal ranks and a bootstrap
interval of the difference in MRR; over the queries or, for other concepts, over the gold concepts."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from db.runs import OURS, run_queries
from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import load_dataset, resolve_dataset
from melo_core.evaluation.analysis import PairedComparison, compare_queries, drilldown_table, failures, gold_clusters
from ui import analysis as ui
from ui.common import store as open_store
from ui.navigation import app_navigation, keep_choice, restore_choice
from ui.safe import md_text

app_navigation()
st.set_page_config(page_title="Drill-down · MELO Studio", layout="wide")
st.title("Drill-down")
store = open_store()
runs = ui.run_table(store)
ours = runs[runs["source"] == OURS]
if ours.empty:
    st.info(
        "No runs of ours with per-query results yet (published baselines have metrics only). "
        "Evaluate a scorer on the Benchmark page or with `python -m melo_core eval --store`."
    )
    st.stop()


@st.cache_data(show_spinner=False)
def concept_mapping(data_dir: str, name: str) -> dict[str, str]:
    """corpus id -> ESCO concept URI of a dataset ({} when the dataset is not in the data folder)."""
    try:
        return dict(load_dataset(resolve_dataset(data_dir, name)).concept_of)
    except (MeloInputError, OSError):
        return {}


@st.cache_data(show_spinner="Comparing the two runs…", max_entries=16)
def paired(a: pd.DataFrame, b: pd.DataFrame, cluster_of: dict[str, str] | None) -> PairedComparison:
    return compare_queries(a, b, cluster_of)


# The URL and the session keep the dataset and the models: a link, a reload or the way back shows them.
left, middle, right = st.columns(3)
restore_choice("drill_dataset", "drill_dataset", sorted(set(ours["dataset"])))
dataset = left.selectbox("Dataset", sorted(set(ours["dataset"])), key="drill_dataset")
on_dataset = ours[ours["dataset"] == dataset].set_index("model")
restore_choice("drill_model", "drill_model", list(on_dataset.index))
model = middle.selectbox("Model", list(on_dataset.index), key="drill_model")
keep_choice("drill_dataset", dataset)
keep_choice("drill_model", model)
k = right.number_input("A failure: first relevant element below rank", 1, 100, 1, key="drill_k")
run = on_dataset.loc[model]
queries = run_queries(store, int(run["run_id"]))
table = drilldown_table(queries, concept_mapping(str(config.data_dir()), dataset))
only_failures = st.toggle("Only the failures", key="drill_failures")
by_concept = (
    st.radio(
        "Intervals and test over",
        ["queries", "gold concepts"],
        horizontal=True,
        key="drill_resample",
        help="Queries: how far the MRR could move with other queries of these concepts. Gold concepts: each "
        "concept drawn with all its queries (they succeed or fail together), for other concepts; wider.",
    )
    == "gold concepts"
)
over = "the gold concepts" if by_concept else "the queries"
shown = failures(table, int(k)) if only_failures else table
mrr = ui.mrr_interval(store, int(run["run_id"]), by_concept) if len(queries) else None
st.caption(
    f"{md_text(model)} on {md_text(dataset)}: {len(queries)} queries, MRR {mrr.describe() if mrr else 'none'} (95% bootstrap "
    f"interval over {over}), "
    f"{len(failures(table, int(k)))} with no relevant element in the top {int(k)} (run {int(run['run_id'])})."
)
depth = int(run["depth"]) if run["depth"] else None  # 0: the whole corpus was ranked
st.dataframe(
    # A gold concept past the run's depth has no rank (inf in the CSV): an empty cell, not "Infinity".
    shown.assign(first_rank=shown["first_rank"].where(shown["first_rank"] != float("inf"))),
    hide_index=True,
    key="drill_queries",
    column_config={
        # Each as wide as a short label: a long query or gold list kept the ranks and predictions off screen.
        **{
            c: st.column_config.TextColumn(width="medium")
            for c in shown.columns
            if c in ("query", "gold labels") or c.startswith("top ")
        },
        "first_rank": st.column_config.NumberColumn(
            format="%.0f",
            help=f"Rank of the first relevant element; empty when none is in the top {depth:d}"
            if depth
            else "Rank of the first relevant element",
        ),
    },
    # What a reader compares first: the query, its gold labels, the ranks and the top predictions;
    # the concepts' URIs (as wide as all of these) last. The CSV keeps the table's own order.
    column_order=[c for c in shown.columns if c != "gold concepts"] + ["gold concepts"],
)
st.download_button("Queries (CSV)", ui.csv_bytes(shown), file_name=f"{dataset}_{model}_queries.csv", key="drill_csv")

# -- two models side by side ---------------------------------------------------------------------------
st.subheader("Compare with another model")
others = [m for m in on_dataset.index if m != model]
if not others:
    st.caption("Only one model has a run on this dataset.")
    st.stop()
restore_choice("drill_other", "drill_other", others)
other = st.selectbox("Second model (B)", others, key="drill_other")
keep_choice("drill_other", other)
other_queries = run_queries(store, int(on_dataset.loc[other]["run_id"]))
kept = {"query_id": "query_id", "query_text": "query", "first_rank": "first_rank"}
comparison = paired(
    queries[list(kept)].rename(columns=kept),
    other_queries[list(kept)].rename(columns=kept),
    gold_clusters(queries) if by_concept else None,
)
a, b, c, d = st.columns(4)
a.metric(f"MRR A ({md_text(model)})", f"{comparison.mean_rr_a:.4f}")
b.metric(
    f"MRR B ({md_text(other)})", f"{comparison.mean_rr_b:.4f}", f"{comparison.mean_rr_b - comparison.mean_rr_a:+.4f}"
)
c.metric("B better / worse / same", f"{comparison.n_better:d} / {comparison.n_worse:d} / {comparison.n_same:d}")
d.metric("Wilcoxon p (two-sided)", f"{comparison.p_value:.3g}")
difference = comparison.difference.describe(signed=True) if comparison.difference else "none"
pairs = "the gold concepts' mean reciprocal ranks" if by_concept else "the paired reciprocal ranks"
st.caption(
    f"MRR B − A: {difference} (95% bootstrap interval over {over} of the {comparison.n_pairs:d} paired queries). "
    f"Wilcoxon signed-rank test on {pairs} (zero differences dropped, as the MELO "
    f"code does): statistic {comparison.statistic:.1f}, p = {comparison.p_value:.3g}."
)
status = st.multiselect("Show", ["better", "worse", "same"], default=["better", "worse"], key="drill_status")
changed = comparison.table[comparison.table["status"].isin(status)].sort_values("delta")
scatter = px.scatter(
    comparison.table, x="rr_a", y="rr_b", color="status", hover_data=["query_id", "query"],
    labels={"rr_a": f"reciprocal rank, {model}", "rr_b": f"reciprocal rank, {other}"},
)  # fmt: skip
ui.show_chart(scatter, comparison.table, f"compare_{dataset}")
# Past the run's depth a query has no rank (inf): an empty cell, as above, not "Infinity".
unranked = {
    column: changed[column].where(changed[column] != float("inf")) for column in ("first_rank_a", "first_rank_b")
}
st.dataframe(
    changed.assign(**unranked),
    hide_index=True,
    key="drill_compare",
    column_config={
        column: st.column_config.NumberColumn(
            format="%.0f", help="Rank of the first relevant element; empty when none is in the run's top"
        )
        for column in unranked
    },
)
