"""MELO Studio: `streamlit run app.py` (or `make run`). The entry point names the pages for the
navigation (this landing page is "Home") and runs the one the URL asks for."""

from __future__ import annotations

import streamlit as st

from db.store import PROPOSED, Actor, Store
from melo_core import config
from melo_core.errors import MeloInputError
from melo_core.esco.datasets import dataset_overview
from ui import auth
from ui.common import store as open_store
from ui.navigation import PAGES
from ui.safe import md_code, md_text

st.set_page_config(page_title="MELO Studio", page_icon="🔗", layout="wide")


@st.cache_data(show_spinner="Reading the benchmark folder…")
def overview(data_dir: str) -> list[dict[str, object]]:
    return dataset_overview(data_dir)


@st.cache_data(max_entries=64, show_spinner=False)
def proposed_mappings(_store: Store, url: str, scheme: str, state: str) -> int:
    """How many current mappings of the scheme wait for a reviewer; kept until ``state`` (the
    scheme's decisions and reviews) changes."""
    return len(_store.review_queue(scheme, PROPOSED))


def next_step(counts: dict[str, int], under_review: int) -> tuple[str, str, dict[str, str]]:
    """What a curator does next in a scheme: (what, page, query parameters besides the scheme)."""
    if counts.get("returned"):
        return (
            f"Look again at {counts['returned']:,} term(s) a reviewer returned",
            "pages/2_Link.py",
            {"queue": "returned"},
        )
    if counts["todo"]:
        return f"Link the next term ({counts['todo']:,} left)", "pages/2_Link.py", {"queue": "todo"}
    if counts["unsure"]:
        return f"Settle {counts['unsure']:,} unsure term(s)", "pages/2_Link.py", {"queue": "unsure"}
    if under_review:
        return f"Review {under_review:,} proposed mapping(s)", "pages/3_Crosswalk.py", {}
    return "Everything is linked and reviewed: export the crosswalk", "pages/3_Crosswalk.py", {}


def curation_status() -> None:
    """Per source scheme: its terms, done, left, unsure and under review, and a link to go on."""
    st.subheader("Curation")
    store = open_store()
    if store.sign_in_required and not isinstance(st.session_state.get(auth.SESSION_KEY), Actor):
        # A shared app shows its schemes to signed-in users only; the Link page signs in.
        st.page_link("pages/2_Link.py", label="Sign in to curate and see the progress of each scheme", icon="🔗")
        return
    schemes = store.schemes()
    if not schemes:
        st.info("No source terms to link yet: the Link page imports ESCO and a national terminology in one click.")
        st.page_link("pages/2_Link.py", label="Start curating", icon="🔗")
        return
    for scheme in schemes:
        counts = store.queue_counts(scheme.name)
        under_review = proposed_mappings(store, store.url, scheme.name, store.fingerprint(scheme.name, reviews=True))
        with st.container(border=True):
            st.markdown(
                f"**{md_text(scheme.name)}** · {md_text(scheme.language or 'language not given')} · "
                f"{sum(counts.values()):,} terms"
            )
            shown = {"Done": counts["done"], "Left": counts["todo"], "Unsure": counts["unsure"]}
            if counts.get("returned"):
                shown["Returned"] = counts["returned"]
            shown["Under review"] = under_review
            for column, (name, value) in zip(st.columns(len(shown)), shown.items(), strict=True):
                column.metric(md_text(name), f"{value:,}")
            what, page, query = next_step(counts, under_review)
            st.page_link(
                page, label=f"Continue: {md_text(what)}", icon="▶️", query_params={"scheme": scheme.name, **query}
            )


def home() -> None:
    """The landing page."""
    st.set_page_config(page_title="MELO Studio", page_icon="🔗", layout="wide")
    st.title("MELO Studio")
    st.caption(
        "Link occupation names to the ESCO taxonomy, compare models on the MELO benchmark, and build crosswalks."
    )

    curation_status()

    st.subheader("Benchmark data")
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

    st.caption(f"Everything here also runs from the command line: {md_code('docs/cli.md')}.")
    for page in PAGES:
        st.page_link(page.script, label=page.link, icon=page.icon)


st.navigation([st.Page(home, title="Home", default=True), *(st.Page(page.script) for page in PAGES)]).run()
