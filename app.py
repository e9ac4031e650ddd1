"""MELO Studio: `streamlit run app.py` (or `make run`). The entry point names the pages for the
navigation (this landing page is "Home") and runs the one the URL asks for."""

from __future__ import annotations

import streamlit as st

from melo_core import config
from melo_core.datasets import dataset_overview
from melo_core.errors import MeloInputError
from ui.common import catalogue_markdown
from ui.safe import md_code

st.set_page_config(page_title="MELO Studio", page_icon="🔗", layout="wide")

PAGES = (
    "pages/1_Datasets.py",
    "pages/2_Link.py",
    "pages/3_Crosswalk.py",
    "pages/4_Import.py",
    "pages/5_Benchmark.py",
    "pages/6_Lexical_overlap.py",
    "pages/7_Drill_down.py",
)


@st.cache_data(show_spinner="Reading the benchmark folder…")
def overview(data_dir: str) -> list[dict[str, object]]:
    return dataset_overview(data_dir)


def home() -> None:
    """The landing page."""
    st.set_page_config(page_title="MELO Studio", page_icon="🔗", layout="wide")
    st.title("MELO Studio")
    st.caption(
        "Link occupation names to the ESCO taxonomy, compare models on the MELO benchmark, and build crosswalks."
    )

    data_dir = config.data_dir()
    try:
        rows = overview(str(data_dir))
    except MeloInputError:
        rows = []

    if not rows:
        st.warning(f"No MELO data in {md_code(data_dir)}.")
        st.markdown(
            f"""
**Get the data** (nothing is downloaded automatically):

1. Download the official MELO benchmark release from
   [github.com/Avature/melo-benchmark](https://github.com/Avature/melo-benchmark) and put its
   `data/processed/melo/…` folders under `./data/processed/melo/` in this project; **or**
2. point `MELO_DATA` at any folder with that layout and restart, for example
   `MELO_DATA=../shared/melo make run`.

{config.DATA_HELP}
"""
        )
        st.stop()

    queries = sum(int(r["queries"]) for r in rows)  # type: ignore[call-overload]
    languages = sorted({lang for r in rows for lang in str(r["corpus languages"]).split(", ") if lang})
    left, middle, right = st.columns(3)
    left.metric("Datasets", len(rows))
    middle.metric("Queries", f"{queries:,}")
    right.metric("Corpus languages", len(languages))
    st.success(f"Benchmark data: {md_code(data_dir)}")

    st.subheader("Run the same evaluation from the command line")
    st.code(
        f"python -m melo_core eval --data {data_dir} --datasets nor_q_no_c_no --scorers char-tfidf,bm25 --out results.csv",
        language="bash",
    )
    st.markdown(catalogue_markdown())
    st.page_link("pages/1_Datasets.py", label="Browse the datasets", icon="📚")
    st.page_link("pages/2_Link.py", label="Link terms to ESCO (curation)", icon="🔗")
    st.page_link("pages/3_Crosswalk.py", label="Review and export the crosswalk", icon="🗺️")
    st.page_link("pages/4_Import.py", label="Import a taxonomy, terms or a crosswalk", icon="📥")
    st.page_link("pages/5_Benchmark.py", label="Compare models on the benchmark", icon="📊")
    st.page_link("pages/6_Lexical_overlap.py", label="Lexical overlap and model quality", icon="🔤")
    st.page_link("pages/7_Drill_down.py", label="Drill down to the queries a model gets wrong", icon="🔍")


st.navigation([st.Page(home, title="Home", default=True), *(st.Page(page) for page in PAGES)]).run()
