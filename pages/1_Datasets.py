"""Browse the MELO datasets: sizes, languages, and a sample of queries with their gold labels."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import dataset_overview, load_dataset, resolve_dataset
from ui.navigation import app_navigation
from ui.safe import md_text

app_navigation()
st.set_page_config(page_title="Datasets · MELO Studio", layout="wide")
st.title("Datasets")

data_dir = config.data_dir()
try:
    table = pd.DataFrame(dataset_overview(data_dir))
except MeloInputError as exc:
    st.error(md_text(exc))
    st.info(config.DATA_HELP)
    st.stop()

kinds = st.multiselect("Kind", ["monolingual", "cross-lingual", "multilingual"], default=[])
shown = table[table["kind"].isin(kinds)] if kinds else table
st.dataframe(shown, hide_index=True, width="stretch")

name = st.selectbox("Look inside a dataset", shown["dataset"].tolist())
if name:
    dataset = load_dataset(resolve_dataset(data_dir, name))
    text_of = dict(zip(dataset.corpus_ids, dataset.corpus, strict=True))
    sample = [
        {
            "query id": qid,
            "query": text,
            "relevant surface forms": len(dataset.relevant.get(qid, [])),
            "gold examples": " | ".join(text_of[c] for c in dataset.relevant.get(qid, [])[:3]),
        }
        for qid, text in zip(dataset.query_ids[:200], dataset.queries[:200], strict=True)
    ]
    st.caption(f"First {len(sample)} of {len(dataset.query_ids)} queries")
    st.dataframe(pd.DataFrame(sample), hide_index=True, width="stretch")
