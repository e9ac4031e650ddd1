"""The current crosswalk: filter it, revoke or change a mapping (as new decisions), read the
consistency warnings and the agreement between two curators, and download SKOS CSV or SSSOM."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pandas as pd
import streamlit as st

from db.exports import skos_csv_text, sssom_text
from db.models import MATCH_OUTCOMES, REJECTED, UNSURE
from ui import common as ui

st.set_page_config(page_title="Crosswalk · MELO Studio", layout="wide")
st.title("Crosswalk")

store = ui.store()
curator = ui.curator()
schemes = store.schemes()
if not schemes:
    ui.first_run(store)

ALL = "(all)"
names = [s.name for s in schemes]

# -- filters ----------------------------------------------------------------------------------
with st.sidebar:
    scheme_name = st.selectbox("Source scheme", names, key="cw_scheme")
    relations = st.multiselect(
        "Relation", [*MATCH_OUTCOMES, REJECTED, UNSURE], default=list(MATCH_OUTCOMES), key="cw_relations"
    )
    curators = store.curators(scheme_name, include_imports=True)
    who = st.selectbox("Curator", [ALL, *curators], key="cw_curator")
    use_dates = st.checkbox("Filter by date (UTC)", key="cw_use_dates")
    since = until = None
    if use_dates:
        today = datetime.now(UTC).date()
        picked = st.date_input("Decided between", value=(today - timedelta(days=7), today), key="cw_dates")
        dates = list(picked) if isinstance(picked, tuple) else [picked]
        first, last = (dates[0], dates[-1]) if dates else (today, today)
        since = datetime.combine(first, time.min, UTC)
        until = datetime.combine(last, time.min, UTC) + timedelta(days=1)

mappings = store.crosswalk(
    scheme_name,
    outcomes=relations or MATCH_OUTCOMES,
    curator=None if who == ALL else who,
    since=since,
    until=until,
)
st.caption(f"{len(mappings)} current decisions in **{scheme_name}** (the latest per term and concept).")
st.dataframe(
    pd.DataFrame(
        [
            {
                "code": d.term_code,
                "term": d.term_label,
                "relation": d.outcome,
                "concept": d.concept_label or "",
                "concept uri": d.concept_uri,
                "curator": d.curator,
                "decided (UTC)": d.decided_at.strftime("%Y-%m-%d %H:%M"),
                "scorer": d.scorer or "",
                "rank": d.rank,
                "comment": d.comment,
            }
            for d in mappings
        ],
        columns=[
            "code",
            "term",
            "relation",
            "concept",
            "concept uri",
            "curator",
            "decided (UTC)",
            "scorer",
            "rank",
            "comment",
        ],
    ),
    hide_index=True,
    width="stretch",
    column_config={"concept uri": st.column_config.LinkColumn("concept uri")},
)

# -- revoke or change -------------------------------------------------------------------------
if mappings:
    st.subheader("Revoke or change a mapping")
    by_id = {d.id: d for d in mappings}
    with st.form("cw_change", enter_to_submit=False):
        chosen = st.selectbox(
            "Mapping",
            list(by_id),
            format_func=lambda i: (
                f"{by_id[i].term_label} → {by_id[i].concept_label or by_id[i].concept_uri} "
                f"({by_id[i].outcome}, {by_id[i].curator})"
            ),
            key="cw_mapping",
        )
        new_relation = st.selectbox("New relation", MATCH_OUTCOMES, key="cw_new_relation")
        comment = st.text_input("Comment", key="cw_comment")
        change_column, revoke_column, _ = st.columns([1, 1, 4])
        change = change_column.form_submit_button("Change", width="stretch")
        revoke = revoke_column.form_submit_button("Revoke", width="stretch")
    if change or revoke:
        old = by_id[chosen]
        outcome = REJECTED if revoke else new_relation
        store.decide(
            old.term_id,
            old.concept_uri,
            outcome,
            curator,
            comment=comment or ("revoked" if revoke else f"changed from {old.outcome}"),
            concept_label=old.concept_label,
        )
        st.session_state["cw_flash"] = f"{old.term_label} → {old.concept_label or old.concept_uri}: now {outcome}."
        st.rerun()
if message := st.session_state.pop("cw_flash", None):
    st.success(message)

# -- quality ----------------------------------------------------------------------------------
st.subheader("Consistency warnings")
warnings = store.warnings(scheme_name)
if warnings:
    st.dataframe(
        pd.DataFrame([{"kind": w.kind, "warning": w.message, "terms": ", ".join(w.term_codes)} for w in warnings]),
        hide_index=True,
        width="stretch",
    )
else:
    st.caption("None.")

st.subheader("Agreement between two curators")
people = store.curators(scheme_name)
if len(people) < 2:
    st.caption("Needs decisions by two curators on this scheme.")
else:
    a_column, b_column = st.columns(2)
    a = a_column.selectbox("Curator A", people, index=0, key="cw_kappa_a")
    b = b_column.selectbox("Curator B", people, index=1, key="cw_kappa_b")
    agreement = store.agreement(a, b, scheme_name)
    k_column, items_column, observed_column = st.columns(3)
    k_column.metric("Cohen's kappa", "—" if agreement.kappa is None else f"{agreement.kappa:.3f}")
    items_column.metric("Pairs both decided", agreement.items)
    observed_column.metric("Agreed", agreement.agreed)

# -- exports ----------------------------------------------------------------------------------
st.subheader("Download")
negatives = st.checkbox("Include rejections", key="cw_negatives")
skos_column, sssom_column, _ = st.columns([1, 1, 3])
skos_column.download_button(
    "SKOS CSV",
    skos_csv_text(store, scheme_name, negatives=negatives),
    file_name=f"{scheme_name}.csv",
    mime="text/csv",
    key="cw_download_skos",
)
sssom_column.download_button(
    "SSSOM TSV",
    sssom_text(store, scheme_name, negatives=negatives),
    file_name=f"{scheme_name}.sssom.tsv",
    mime="text/tab-separated-values",
    key="cw_download_sssom",
)
