"""Compare models on the MELO benchmark: MRR heatmap (model × dataset, the longer list down the
page), grouped bars, top-k accuracy curves (the paper's figures 3, 6, 7) and the difference to the
published values, over the runs stored with `eval --store` or from this page, and the published
baselines."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from db.runs import OURS, PUBLISHED, evaluate_and_store, import_published, run_queries
from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import MeloDataset
from melo_core.esco.taxonomy import cached_taxonomy_from_melo
from melo_core.esco.titles import is_titles_dataset, titles_dataset
from melo_core.evaluation.analysis import (
    diff_to_published,
    filter_datasets,
    mean_curves,
    mrr_matrix,
    published_topk_frame,
    topk_curves_frame,
)
from ui import analysis as ui
from ui import auth
from ui.calibration import calibration_rows, ece_table, reliability_frame
from ui.common import catalogue_markdown, ensure_built_models
from ui.common import store as open_store
from ui.effort import effort_rows, effort_table
from ui.graded import graded_rows, graded_table
from ui.navigation import app_navigation, keep_choice, restore_choice
from ui.proposals import proposal_rows, proposal_table
from ui.safe import md_code, md_text

app_navigation()
st.set_page_config(page_title="Benchmark · MELO Studio", layout="wide")
st.title("Benchmark")
store = open_store()
auth.require_sign_in(store)  # a shared app stores and deletes runs for signed-in users only
datasets = ui.datasets()
METRICS = ("mrr", "acc@1", "acc@5", "acc@10", "map")
DEFAULT_TITLES = config.data_dir().parent / "jobbert" / "titles.csv"  # beside the MELO data, when there
DEFAULT_PUBLISHED = ("openai", "me5", "muse_cnn", "char_tf_idf", "edit_distance")

# -- getting runs ---------------------------------------------------------------------------------
with st.expander("Add runs: evaluate a scorer, or load the published baselines"):
    left, right = st.columns(2)
    chosen_sets = left.multiselect("Datasets", list(datasets["dataset"]), key="bench_run_datasets")
    specs = right.text_input("Scorers (comma-separated specs)", value="char-tfidf", key="bench_run_scorers",
                             help=catalogue_markdown())  # fmt: skip
    limit = left.number_input("Only the first N queries of each (0: all)", 0, 100_000, 0, key="bench_run_limit")

    def evaluate_runs(scorers: str, names: list[str], extra: list[MeloDataset] | None = None) -> None:
        """Evaluate the scorers on the datasets (and ``extra`` ones), storing each run, with a progress bar."""
        ensure_built_models(scorers)
        bar = st.progress(0.0, text="starting…")
        ids = evaluate_and_store(
            store,
            config.data_dir(),
            names,
            scorers.split(","),
            on_progress=lambda done, total, label: bar.progress(done / max(total, 1), text=md_text(label)),
            limit_queries=int(limit),
            extra_datasets=extra or [],
        )
        st.success(f"Stored {len(ids)} run(s).")
        st.session_state["bench_new_runs"] = [*st.session_state.get("bench_new_runs", []), *ids]  # chosen below

    if right.button("Evaluate and store", key="bench_run_go", disabled=not chosen_sets):
        try:
            evaluate_runs(specs, chosen_sets)
        except (MeloInputError, ValueError) as exc:
            st.error(md_text(exc))
    st.markdown("**Job-ad titles**: a CSV of titles with their ESCO concept URIs, ranked against the ESCO "
                "labels of the chosen languages (concept-level MRR, acc@k, recall@100).")  # fmt: skip
    left, middle, right = st.columns([3, 1, 2])
    titles_path = left.text_input("Titles CSV (path on the server)", value=str(DEFAULT_TITLES) if DEFAULT_TITLES.is_file()
                                  else "", key="bench_titles_path")  # fmt: skip
    title_langs = middle.text_input("Label languages", value="en", key="bench_titles_langs")
    title_specs = right.text_input("Pipelines or scorers", value="best", key="bench_titles_scorers",
                                   help=catalogue_markdown())  # fmt: skip
    if st.button("Evaluate the titles and store", key="bench_titles_go", disabled=not titles_path.strip()):
        try:
            titles, report = titles_dataset(titles_path.strip(), cached_taxonomy_from_melo(config.data_dir()),
                                            [x.strip() for x in title_langs.split(",") if x.strip()])  # fmt: skip
            st.caption(md_text(report.describe()))
            evaluate_runs(title_specs, [], [titles])
        except (MeloInputError, ValueError) as exc:
            st.error(md_text(exc))
    if st.button("Load the published baselines (read-only runs)", key="bench_load_published"):
        try:
            st.success(f"Loaded {import_published(store, config.data_dir()):d} published run(s).")
        except (MeloInputError, OSError) as exc:
            st.error(f"No published results under {md_code(config.data_dir())}: {md_text(exc)}")

# -- graded similarity (experiments/results.csv) ------------------------------------------------------
graded = graded_table(graded_rows())
if not graded.empty:
    st.subheader("Graded similarity")
    st.caption("Spearman correlation of each scorer's score with the crosswalk's grade of the pair (exact 3, "
               "close 2, narrow/broad 1, a drawn unrelated concept 0), per crosswalk: "
               "`python -m melo_core experiment run graded-similarity` (docs/experiments/graded-similarity.md). "
               "`best/domain`: the domain component of `best`, lifted by known mentions.")  # fmt: skip
    st.dataframe(graded, hide_index=True, key="bench_graded",
                 column_config={c: st.column_config.NumberColumn(format="%.4f") for c in graded.columns[1:]})  # fmt: skip

# -- calibrated confidence (experiments/results.csv) -------------------------------------------------
calibrated = calibration_rows()
eces = ece_table(calibrated)
if not eces.empty:
    st.subheader("Calibration")
    st.caption("Expected calibration error of the probability shown beside each candidate (15 equal-width bins), "
               "per crosswalk, from a calibrator fit without the crosswalk's country: `python -m melo_core "
               "experiment run calibration` (docs/experiments/calibration.md). The diagram pools every held-out "
               "candidate: on the diagonal, a probability of 0.8 is right 8 times in 10.")  # fmt: skip
    st.dataframe(eces, hide_index=True, key="bench_calibration",
                 column_config={c: st.column_config.NumberColumn(format="%.4f") for c in eces.columns[1:]})  # fmt: skip
    diagram = reliability_frame(calibrated)
    if not diagram.empty:
        figure = px.line(diagram, x="mean probability", y="share accepted", color="pipeline", markers=True,
                         hover_data=["candidates"], range_x=[0, 1], range_y=[0, 1])  # fmt: skip
        figure.add_shape(type="line", x0=0, y0=0, x1=1, y1=1, line={"dash": "dot", "color": "grey"})
        ui.show_chart(figure, diagram, "reliability_diagram")

# -- batch proposals (experiments/results.csv) ---------------------------------------------------------
proposal_results = proposal_table(proposal_rows())
if not proposal_results.empty:
    st.subheader("Batch proposals")
    st.caption("Proposals at a target precision (each column's; the Crosswalk page proposes at 0.95 unless the curator lowers it), leave one country "
               "out: of each crosswalk's linked terms, the share whose first candidate a calibrator fit without the "
               "crosswalk's country proposes (coverage), and the share of those that are a crosswalk match "
               "(precision; none where nothing was proposed): `python -m melo_core experiment run proposals` "
               "(docs/experiments/batch-proposals.md).")  # fmt: skip
    st.dataframe(proposal_results, hide_index=True, key="bench_proposals",
                 column_config={c: st.column_config.NumberColumn(format="%.3f")
                                for c in proposal_results.columns[1:]})  # fmt: skip

# -- curator effort (experiments/results.csv) --------------------------------------------------------
effort = effort_table(effort_rows())
if not effort.empty:
    st.subheader("Curator effort")
    st.caption("The simulated curator replays each crosswalk (seeds 0-2, mean): seconds per 100 terms by the cost "
               "model (accept the first 4 s; pick rank r <= 10: 6 s + 1 s x r; search 30 s) and acc@1. `best`: "
               "learning from each decision; `/static`: learning nothing; `/mentions-only`: known mentions only, as "
               "before; `/proposals`: learning after a batch of proposals at 0.95 (1.5 s to confirm or reject each); "
               "`/most-confident` etc.: queue orders. The mean of a column is over the crosswalks it holds. "
               "`python -m melo_core experiment run curator-effort` (docs/experiments/curator-effort.md).")  # fmt: skip
    st.dataframe(effort, hide_index=True, key="bench_effort",
                 column_config={c: st.column_config.NumberColumn(format="%.0f" if "s/100" in c else "%.3f")
                                for c in effort.columns[1:]})  # fmt: skip

runs = ui.run_table(store)
if runs.empty:
    st.info(
        "No runs stored yet. Evaluate a scorer above, or from the command line "
        "(`python -m melo_core eval --datasets all --scorers char-tfidf --store`), and load the "
        "paper's baselines (`python -m melo_core import-results --data DIR`)."
    )
    st.stop()

# -- job-ad titles ----------------------------------------------------------------------------------
title_runs = runs[runs["dataset"].map(is_titles_dataset)]
if not title_runs.empty:
    st.subheader("Job-ad titles")
    st.caption("Concept-level: one label per concept, depth 100 (acc@100 is recall@100). Known mentions come "
               "from every crosswalk; no title is ever a mention or alias.")  # fmt: skip
    shown = title_runs[["model", "dataset", "n_queries", "mrr", "acc@1", "acc@5", "acc@10", "acc@100"]].copy()
    helps = {"": "95% bootstrap interval of the MRR over the titles: other ads of the same concepts",
             ", other concepts": "95% bootstrap interval of the MRR over the gold concepts, each drawn with "
             "all its titles: a board with other concepts (eval --resample concepts)"}  # fmt: skip
    for by_concept, suffix in enumerate(helps):
        intervals = [ui.mrr_interval(store, int(r), bool(by_concept)) if s == OURS else None
                     for r, s in zip(title_runs["run_id"], title_runs["source"], strict=True)]  # fmt: skip
        shown.insert(4 + 2 * by_concept, f"MRR low{suffix}", [i.low if i else None for i in intervals])
        shown.insert(5 + 2 * by_concept, f"MRR high{suffix}", [i.high if i else None for i in intervals])
    st.dataframe(shown.rename(columns={"acc@100": "recall@100"}).sort_values(["dataset", "mrr"], ascending=[True, False]),
                 hide_index=True, key="bench_titles_table",
                 column_config={f"MRR {end}{suffix}": st.column_config.NumberColumn(format="%.4f", help=md_text(text))
                                for suffix, text in helps.items() for end in ("low", "high")})  # fmt: skip

# -- choosing models and datasets ---------------------------------------------------------------------
# Filters, datasets and models live in the URL and the session: a reload, a link or the way back
# from another page shows the same selection.
QUERY_LANGUAGES = sorted(set(datasets["query_language"]))
CORPUS_LANGUAGES = sorted({lang for langs in datasets["corpus_languages"] for lang in langs.split(",")})
KINDS = ["monolingual", "cross-lingual", "multilingual"]
FILTERS = (("bench_q", "query_lang", QUERY_LANGUAGES), ("bench_c", "corpus_lang", CORPUS_LANGUAGES),
           ("bench_kind", "kind", KINDS))  # fmt: skip
for key, param, options in FILTERS:
    restore_choice(key, param, options, many=True)
restore_choice("bench_metric", "metric", METRICS)
with st.sidebar:
    st.header("Datasets")
    query_languages = st.multiselect("Query language", QUERY_LANGUAGES, key="bench_q")
    corpus_languages = st.multiselect("Corpus language", CORPUS_LANGUAGES, key="bench_c")
    kinds = st.multiselect("Kind", KINDS, key="bench_kind")
    metric = st.selectbox("Metric", METRICS, key="bench_metric")
for key, param, _ in FILTERS:
    keep_choice(param, st.session_state[key], many=True)
keep_choice("metric", metric)
candidates = filter_datasets(datasets, query_languages or None, corpus_languages or None, kinds or None)
candidates = [d for d in candidates if d in set(runs["dataset"])]
models = sorted(set(runs["model"]), key=lambda m: (m.endswith(ui.PUBLISHED_SUFFIX), m))
default_models = [m for m in models if not m.endswith(ui.PUBLISHED_SUFFIX)] + [
    f"{name}{ui.PUBLISHED_SUFFIX}" for name in DEFAULT_PUBLISHED if f"{name}{ui.PUBLISHED_SUFFIX}" in models
]
if st.session_state.get("bench_dataset_options", candidates) != candidates:
    st.session_state["bench_datasets"] = candidates  # other filters: all their datasets, as at first
st.session_state["bench_dataset_options"] = candidates
restore_choice("bench_datasets", "dataset", candidates, many=True)
restore_choice("bench_models", "model", models, many=True)
st.session_state.setdefault("bench_datasets", candidates)
st.session_state.setdefault("bench_models", default_models)
new_runs = runs[runs["run_id"].isin(st.session_state.pop("bench_new_runs", []))]
if not new_runs.empty:  # runs just stored are shown at once
    for key, column, options in (("bench_datasets", "dataset", candidates), ("bench_models", "model", models)):
        added = [v for v in new_runs[column] if v in options]
        st.session_state[key] = list(dict.fromkeys([*st.session_state[key], *added]))
chosen = st.multiselect("Datasets", candidates, key="bench_datasets")
picked = st.multiselect("Models", models, key="bench_models")
keep_choice("dataset", chosen, many=True)
keep_choice("model", picked, many=True)
if not chosen or not picked:
    st.info("Choose at least one dataset and one model.")
    st.stop()
selected = runs[runs["dataset"].isin(chosen) & runs["model"].isin(picked)]
size = dict(zip(datasets["dataset"], datasets["n_queries"], strict=True))
partial = selected[(selected["source"] == OURS) & (selected["n_queries"] < selected["dataset"].map(size))]
if not partial.empty:
    st.warning(
        f"{len(partial)} of our runs cover only the first queries of their dataset (`--limit-queries`): "
        "their numbers are not comparable with full runs or the published values."
    )

# -- charts ------------------------------------------------------------------------------------------
st.subheader(f"{md_text(metric)} by model and dataset")
matrix = mrr_matrix(selected, picked, chosen, metric=metric)
# The longer list runs down the page: 47 datasets across a 1400 px window left cells too narrow
# for their numbers, while rows keep their height whatever their number.
drawn = matrix.T if len(chosen) > len(picked) else matrix
heatmap = px.imshow(
    drawn, text_auto=".3f", aspect="auto", color_continuous_scale="Viridis", zmin=0, zmax=1,
    labels={"color": metric}, height=120 + 32 * len(drawn.index),
)  # fmt: skip
ui.show_chart(heatmap, matrix.reset_index(), f"heatmap_{metric}")

bars = px.bar(
    selected,
    x="dataset",
    y=metric,
    color="model",
    color_discrete_map=ui.model_colours(runs["model"]),
    barmode="group",
    category_orders={"dataset": chosen, "model": picked},
)
ui.show_chart(bars, selected[["model", "dataset", metric]], f"bars_{metric}")

st.subheader("Top-k accuracy")
st.caption(
    "Our runs: every k from 1 to 100, from the stored rank of each query's first relevant element. "
    "Published runs: the paper's summary has k = 1, 5 and 10 only (markers)."
)
scope = st.selectbox("Curves for", ["mean over the chosen datasets", *chosen], key="bench_curve_scope")
scope_sets = [scope]
if scope.startswith("mean"):  # a mean compares models only over datasets that all of them ran on
    covered = selected.groupby("dataset")["model"].nunique()
    scope_sets = [d for d in chosen if covered.get(d, 0) == len(picked)]
    st.caption(f"Mean over the {len(scope_sets)} chosen dataset(s) on which every chosen model has a run.")
ours = selected[(selected["source"] == OURS) & selected["dataset"].isin(scope_sets)]
ranks = {(r.model, r.dataset): run_queries(store, int(r.run_id))["first_rank"].to_numpy() for r in ours.itertuples()}
curves = pd.concat(
    [
        topk_curves_frame(ranks).assign(source=OURS),
        published_topk_frame(selected[selected["source"] == PUBLISHED], datasets=scope_sets).assign(source=PUBLISHED),
    ],
    ignore_index=True,
)
if curves.empty:
    st.caption("No run of the chosen models on these datasets.")
else:
    averaged = mean_curves(curves)
    lines = px.line(
        averaged,
        x="k",
        y="accuracy",
        color="model",
        color_discrete_map=ui.model_colours(runs["model"]),
        markers=True,
        log_x=True,
        range_y=[0, 1],
    )
    ui.show_chart(lines, averaged, "topk_curves")

st.subheader("Difference to the published value")
our_runs = selected[selected["source"] == OURS]
published = runs[runs["source"] == PUBLISHED].assign(model=lambda f: f["scorer"])
diff = diff_to_published(our_runs, published, metric=metric)
diff["queries"] = our_runs["n_queries"].to_numpy()
diff["of"] = diff["dataset"].map(size).to_numpy()
st.dataframe(
    diff, hide_index=True, key="bench_diff", column_config={"diff": st.column_config.NumberColumn(format="%+.4f")}
)
st.download_button("Table (CSV)", ui.csv_bytes(diff), file_name=f"diff_{metric}.csv", key="bench_diff_csv")
