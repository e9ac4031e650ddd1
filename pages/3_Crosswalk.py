"""The current crosswalk: filter it, revoke or change a mapping (as new decisions), review it
(a queue of proposed, conflicting, confirmed mappings; reviewers confirm or reject selected rows;
comments on any decision), read the consistency warnings and the agreement between two curators,
and download SKOS CSV, SSSOM or SKOS Turtle (everything, or only confirmed mappings)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pandas as pd
import streamlit as st

from db.exports import EXPORT_FORMATS, ExportOptions, export_text, exported_count
from db.models import MATCH_OUTCOMES, REJECTED, UNSURE
from db.store import (
    REVIEW_FILTERS,
    AccessError,
    ConsistencyWarning,
    Decision,
    ReviewItem,
    Store,
    StoreBusy,
    select_all,
)
from melo_core.errors import MeloInputError
from ui import auth
from ui import common as ui
from ui.navigation import app_navigation, keep_choice, restore_choice
from ui.proposals import PAGE_TARGETS, run_propose
from ui.safe import md_text

app_navigation()
st.set_page_config(page_title="Crosswalk · MELO Studio", layout="wide")
st.title("Crosswalk")

store = ui.store()
curator = ui.curator()
schemes = store.schemes()
if not schemes:
    ui.first_run(store)

ALL = "(all)"
BUSY = "The store is busy (an import is running); {what}: try again."
ALL_STATUSES = "all"
REVIEW_COLUMNS = ["status", "term", "relation", "concept", "curator", "conflict", "comments", "reviewer",
                  "decided (UTC)", "file says", "code"]  # fmt: skip
names = [s.name for s in schemes]

# -- filters ----------------------------------------------------------------------------------
restore_choice("cw_scheme", "scheme", names)  # as on the Link page: from a link, a reload or the last visit
with st.sidebar:
    scheme_name = st.selectbox("Source scheme", names, key="cw_scheme")
keep_choice("scheme", scheme_name)
with st.sidebar:
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


# Every click on this page reruns it. On 7,551 decisions its three reads of the crosswalk (the
# table, the warnings, the review queue) were 0.6 s of a 0.75 s rerun, so they are kept until the
# store's fingerprint says what they read changed (anyone's decision or re-import; for the review
# queue, a review or comment too).
@st.cache_data(max_entries=24, show_spinner=False)
def current_mappings(_store: Store, url: str, scheme: str, outcomes: tuple[str, ...], who: str | None,
                     since: datetime | None, until: datetime | None, state: str) -> list[Decision]:  # fmt: skip
    return _store.crosswalk(scheme, outcomes=outcomes, curator=who, since=since, until=until)


@st.cache_data(max_entries=12, show_spinner=False)
def consistency_warnings(_store: Store, url: str, scheme: str, state: str) -> list[ConsistencyWarning]:
    return _store.warnings(scheme)


@st.cache_data(max_entries=24, show_spinner=False)
def review_items(_store: Store, url: str, scheme: str, status: str | None, state: str) -> list[ReviewItem]:
    return _store.review_queue(scheme, status)


decided = store.fingerprint(scheme_name)
discussed = decided + store.discussion_fingerprint()  # the scheme's terms digested once
mappings = current_mappings(
    store,
    store.url,
    scheme_name,
    tuple(relations or MATCH_OUTCOMES),
    None if who == ALL else who,
    since,
    until,
    decided,
)
st.caption(
    f"{len(mappings)} current decision{'' if len(mappings) == 1 else 's'} in **{md_text(scheme_name)}** (the latest per "
    "term and concept)."
)
st.dataframe(
    pd.DataFrame(
        [
            {
                # The mapping first, its provenance after, the URIs last: a MELO term's code is a
                # URI too, and at 1400 px code and term left the concept's URI off screen.
                "term": d.term_label,
                "relation": d.outcome,
                "concept": d.concept_label or "",
                "curator": d.curator,
                "decided (UTC)": d.decided_at.strftime("%Y-%m-%d %H:%M"),
                # An imported decision's curator and date as its file claimed them (unverified).
                "file says": auth.claimed(d),
                "comment": d.comment,
                "scorer": d.scorer or "",
                "rank": d.rank,
                "code": d.term_code,
                "concept uri": d.concept_uri,
            }
            for d in mappings
        ],
        columns=[
            "term",
            "relation",
            "concept",
            "curator",
            "decided (UTC)",
            "file says",
            "comment",
            "scorer",
            "rank",
            "code",
            "concept uri",
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
        try:
            store.decide(
                old.term_id,
                old.concept_uri,
                outcome,
                curator,
                comment=comment or ("revoked" if revoke else f"changed from {old.outcome}"),
                concept_label=old.concept_label,
            )
        except AccessError as exc:
            st.session_state["cw_refused"] = f"Not changed: {auth.refused(exc)}"
        except StoreBusy:  # an import holds the lock longer than a decision waits
            st.session_state["cw_refused"] = BUSY.format(what="nothing was changed")
        else:
            st.session_state["cw_flash"] = f"{old.term_label} → {old.concept_label or old.concept_uri}: now {outcome}."
        st.rerun()
if message := st.session_state.pop("cw_flash", None):
    st.success(md_text(message))  # it quotes labels and names
if message := st.session_state.pop("cw_refused", None):
    st.error(md_text(message))

# -- quality ----------------------------------------------------------------------------------
st.subheader("Consistency warnings")
warnings = consistency_warnings(store, store.url, scheme_name, decided)
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
    items_column.metric("Pairs both decided", int(agreement.items))
    observed_column.metric("Agreed", int(agreement.agreed))

# -- review -----------------------------------------------------------------------------------
REVIEW_SAID = "cw_review_said"  # what the last review action said, shown beside its buttons


def review_selected(decision_ids: list[int], verdict: str) -> None:
    """The review buttons' action, run before the page is drawn again. Done: the selection, select
    all and the comment are cleared, as the rows they chose have moved on. Refused: they stay, to
    be put right."""
    try:
        done = store.review(decision_ids, curator, verdict, st.session_state.get("cw_review_comment", ""))
    except StoreBusy:
        st.session_state[REVIEW_SAID] = ("error", BUSY.format(what="nothing was reviewed"))
    except AccessError as exc:
        st.session_state[REVIEW_SAID] = ("error", f"Nothing reviewed: {auth.refused(exc)}")
    except (ValueError, KeyError) as exc:
        st.session_state[REVIEW_SAID] = ("error", f"Nothing reviewed: {exc.args[0] if exc.args else exc}")
    else:
        back = " Their terms are back in the curators' queue (Link page, queue returned)."
        back = back if verdict == "rejected" else ""
        st.session_state[REVIEW_SAID] = ("success", f"{verdict.capitalize()} {len(done)} mapping(s).{back}")
        st.session_state["cw_review_table"] = {"selection": {"rows": []}}
        st.session_state["cw_review_all"] = False
        st.session_state["cw_review_conflicting"] = False
        st.session_state["cw_review_comment"] = ""


with st.container(key="cw_review"):  # one block: the review queue (docs/review-queue.png)
    st.subheader("Review queue")
    st.caption(
        "A mapping is proposed until a reviewer confirms or rejects its current decision; a new decision on the "
        "pair makes it proposed again. Conflicting: curators chose different relations or concepts."
    )
    review_filter = st.radio("Show", [*REVIEW_FILTERS, ALL_STATUSES], horizontal=True, key="cw_review_status")
    items = review_items(
        store, store.url, scheme_name, None if review_filter == ALL_STATUSES else review_filter, discussed
    )
    selection = st.dataframe(
        pd.DataFrame(
            [
                {
                    "status": i.status,
                    "code": i.decision.term_code,
                    "term": i.decision.term_label,
                    "relation": i.decision.outcome,
                    "concept": i.decision.concept_label or i.decision.concept_uri,
                    "curator": i.decision.curator,
                    "decided (UTC)": i.decision.decided_at.strftime("%Y-%m-%d %H:%M"),
                    "file says": auth.claimed(i.decision),
                    "reviewer": i.reviewer or "",
                    "conflict": i.conflict or "",
                    "comments": i.comments,
                }
                for i in items
            ],
            columns=REVIEW_COLUMNS,
        ),
        hide_index=True,
        width="stretch",
        on_select="rerun",
        selection_mode="multi-row",
        key="cw_review_table",
        column_config={"conflict": st.column_config.TextColumn("conflict", width="large")},
    )
    conflicting = sum(1 for i in items if i.conflict)
    every = st.checkbox(
        f"Select all {len(items)} shown"
        if not conflicting
        else f"Select all {len(items) - conflicting:d} shown without a conflict",
        key="cw_review_all",
        disabled=not items,
    )
    # A conflict is settled by looking at it: select all leaves conflicting rows out unless asked.
    with_conflicts = every and conflicting and st.checkbox(f"Also the {conflicting:d} conflicting",
                                                           key="cw_review_conflicting")  # fmt: skip
    if every:
        selected = select_all(items, include_conflicting=bool(with_conflicts))
    else:
        selected = [items[r] for r in selection.selection.rows if r < len(items)]
    if auth.role(curator) in (None, "reviewer"):
        # A typed name (no sign-in) proves nobody: anyone could review as anyone.
        may_review = auth.role(curator) == "reviewer"
        st.text_input("Review comment (optional)", key="cw_review_comment", disabled=not may_review)
        confirm_column, reject_column, said_column = st.columns([1, 1, 3])
        chosen_ids = [i.decision.id for i in selected]
        confirm_column.button(f"Confirm selected ({len(selected)})", disabled=not (selected and may_review),
                              type="primary", key="cw_confirm", width="stretch", on_click=review_selected,
                              args=(chosen_ids, "confirmed"))  # fmt: skip
        reject_column.button(f"Reject selected ({len(selected)})", disabled=not (selected and may_review),
                             key="cw_reject", width="stretch", on_click=review_selected,
                             args=(chosen_ids, "rejected"))  # fmt: skip
        if said := st.session_state.pop(REVIEW_SAID, None):  # beside the buttons that did it
            kind, text = said
            (said_column.success if kind == "success" else said_column.error)(md_text(text))
        if not may_review:
            st.caption("Reviewing needs sign-in, or anyone who types a name could review: start the app with "
                       "MELO_AUTH=on and give reviewers an account (`python -m melo_core users add NAME "
                       "--role reviewer`).")  # fmt: skip
    else:
        st.caption("Only reviewers confirm or reject; you can comment.")

    with st.expander("Comments on a decision"):
        if not items:
            st.caption("No mapping in this view.")
        else:
            by_decision = {i.decision.id: i.decision for i in items}
            default = selected[0].decision.id if selected else next(iter(by_decision))
            about = st.selectbox(
                "Decision",
                list(by_decision),
                index=list(by_decision).index(default),
                format_func=lambda i: (
                    f"{by_decision[i].term_label} → {by_decision[i].concept_label or by_decision[i].concept_uri} "
                    f"({by_decision[i].outcome}, {by_decision[i].curator})"
                ),
                key="cw_comment_about",
            )
            for c in store.comments([about]):
                st.markdown(
                    f"**{md_text(c.author)}** · {c.created_at.strftime('%Y-%m-%d %H:%M')} UTC — {md_text(c.text)}"
                )
            for r in store.reviews(about):
                st.markdown(f"**{md_text(r.reviewer)}** {md_text(r.verdict)} · {r.reviewed_at.strftime('%Y-%m-%d %H:%M')} "
                            "UTC" + (f" — {md_text(r.comment)}" if r.comment else ""))  # fmt: skip
            with st.form("cw_comment_form", clear_on_submit=True):
                remark = st.text_area("Your comment", key="cw_comment_text")
                if st.form_submit_button("Add comment") and remark.strip():
                    try:
                        store.add_comment(about, curator, remark)
                    except AccessError as exc:
                        st.session_state["cw_refused"] = f"Not added: {auth.refused(exc)}"
                    except StoreBusy:
                        st.session_state["cw_refused"] = BUSY.format(what="the comment was not added")
                    st.rerun()

# -- machine proposals (db.proposals) -----------------------------------------------------------
PROPOSALS_SAID = "cw_proposals_said"  # what the last proposal action said, shown beside its buttons


def resolve_proposals(proposal_ids: list[int], verdict: str) -> None:
    """The proposal buttons' action: confirmed, each proposal becomes a decision signed by whoever
    pressed the button; rejected, it is never proposed again."""
    try:
        done = store.resolve_proposals(proposal_ids, curator, verdict)
    except StoreBusy:
        said = ("error", BUSY.format(what="nothing was changed"))
    except AccessError as exc:
        said = ("error", f"Nothing changed: {auth.refused(exc)}")
    except (ValueError, KeyError) as exc:
        said = ("error", f"Nothing changed: {exc.args[0] if exc.args else exc}")
    else:
        after = " They are your decisions now." if verdict == "confirmed" else " They will not be proposed again."
        said = ("success", f"{verdict.capitalize()} {len(done)} proposal(s).{after}")
        st.session_state["cw_proposal_table"] = {"selection": {"rows": []}}
    st.session_state[PROPOSALS_SAID] = said


def propose_now(scheme: str, target: float) -> None:
    with st.spinner("Linking the undecided terms…"):
        worked, said = run_propose(store.url, scheme, target)
    st.session_state[PROPOSALS_SAID] = ("success" if worked else "error", said)


with st.container(key="cw_proposals"):
    st.subheader("Machine proposals")
    st.caption(
        "Propose links every undecided term and proposes its first candidate where the calibrated probability "
        "reaches the threshold at which first candidates were right as often as the target precision in other "
        "countries' crosswalks (`python -m melo_core propose --precision` does the same). A lower target proposes "
        "more terms and more wrong ones: the Benchmark page's Batch proposals shows both per crosswalk. A proposal "
        "is no decision: confirmed, it becomes yours; rejected, it does not come back. Keys: Y confirms, N "
        "rejects the selected proposals, or all shown when none is selected."
    )
    open_proposals = store.proposals(scheme_name)
    proposal_table = st.dataframe(
        pd.DataFrame(
            [
                {
                    "term": p.term_label,
                    "relation": p.relation,
                    "concept": p.concept_label or p.concept_uri,
                    "probability": f"{p.confidence:.0%}",
                    "pipeline": p.pipeline,
                    "proposed (UTC)": p.proposed_at.strftime("%Y-%m-%d %H:%M"),
                    "code": p.term_code,
                }
                for p in open_proposals
            ],
            columns=["term", "relation", "concept", "probability", "pipeline", "proposed (UTC)", "code"],
        ),
        hide_index=True,
        width="stretch",
        on_select="rerun",
        selection_mode="multi-row",
        key="cw_proposal_table",
    )
    picked_rows = [r for r in proposal_table.selection.rows if r < len(open_proposals)]
    chosen_proposals = [open_proposals[r] for r in picked_rows] if picked_rows else open_proposals
    shown = len(chosen_proposals)
    proposal_ids = [p.id for p in chosen_proposals]
    target_column, propose_column, yes_column, no_column, proposals_said_column = st.columns(
        [1, 1, 1, 1, 2], vertical_alignment="bottom"
    )
    target = target_column.selectbox("Target precision", PAGE_TARGETS, format_func=lambda p: f"{p * 100:.0f} %",
                                     key="cw_target")  # fmt: skip
    propose_column.button(f"Propose at {target * 100:.0f} %", key="cw_propose", width="stretch",
                          on_click=propose_now, args=(scheme_name, target))  # fmt: skip
    yes_column.button(f"Confirm {shown:d} selected" if picked_rows else f"Confirm all {shown:d}", key="cw_proposals_confirm", type="primary", width="stretch", shortcut="Y",
                      disabled=not proposal_ids, on_click=resolve_proposals, args=(proposal_ids, "confirmed"))  # fmt: skip
    no_column.button(f"Reject {shown:d} selected" if picked_rows else f"Reject all {shown:d}", key="cw_proposals_reject", width="stretch", shortcut="N",
                     disabled=not proposal_ids, on_click=resolve_proposals, args=(proposal_ids, "rejected"))  # fmt: skip
    if said := st.session_state.pop(PROPOSALS_SAID, None):  # beside the buttons that did it
        kind, text = said
        (proposals_said_column.success if kind == "success" else proposals_said_column.error)(md_text(text))

# -- exports ----------------------------------------------------------------------------------
st.subheader("Download")
negatives = st.checkbox("Include rejections", key="cw_negatives")
confirmed_only = st.checkbox("Only confirmed mappings", key="cw_confirmed_only",
                             help="Only the mappings whose current decision a reviewer confirmed")  # fmt: skip
# No "SKOS CSV" in the label: its help button would share the download button's name.
undecided = st.checkbox("Include undecided terms", key="cw_undecided",
                        help="The CSV only: also each term without a mapping in the file, with empty relation "
                        "columns (the whole scheme, as an import restores it)")  # fmt: skip


# Every click on this page reruns it, and a crosswalk of 7,551 decisions takes about 6 s to write
# in the three formats (Turtle most of it). The files are kept until what they are written from
# changes (export_fingerprint: decisions, reviews and comments, which the files carry): a filter
# writes nothing again. Eager, not written on click: a deferred download is revoked
# by the next rerun (docs/benchmarks.md). The formats are db/exports.py EXPORT_FORMATS.
@st.cache_data(max_entries=12, show_spinner="Writing the downloads…")
def cached_export(_store: Store, url: str, scheme: str, fmt: str, negatives: bool, confirmed_only: bool,
                  undecided: bool, fingerprint: str) -> str:  # fmt: skip
    undecided = undecided and "undecided" in EXPORT_FORMATS[fmt].takes  # SSSOM and Turtle hold mappings only
    options = ExportOptions(negatives=negatives, confirmed_only=confirmed_only, undecided=undecided)
    return export_text(_store, scheme, fmt, options)[0]


@st.cache_data(max_entries=12, show_spinner=False)
def export_count(_store: Store, url: str, scheme: str, negatives: bool, confirmed_only: bool, fingerprint: str) -> int:
    return exported_count(_store, scheme, negatives=negatives, confirmed_only=confirmed_only)


# A slow format (on_request: SKOS Turtle is 5 of the 6 s the three files of 7,551 decisions take to
# write; the click that writes fra_fr's, 11,118 decisions, takes 20.8 s: benchmarks/crosswalk_page.py
# --crosswalk fra_fr, 2 cores, 2026-12-07) is written once a user asks for it, then kept up to date.
def ask_for(fmt: str) -> None:
    st.session_state[f"cw_{fmt}_asked"] = True


# The downloads are written from what the table and the review queue are: `discussed`, read above
# (export_fingerprint).
fingerprint = discussed
held = export_count(store, store.url, scheme_name, negatives, confirmed_only, fingerprint)
for column, entry in zip(st.columns([*([1] * len(EXPORT_FORMATS)), 2]), EXPORT_FORMATS.values(), strict=False):
    if entry.on_request and not st.session_state.get(f"cw_{entry.name}_asked"):
        column.button(md_text(f"Write {entry.label}"), key=f"cw_write_{entry.name}", on_click=ask_for,
                      args=(entry.name,),
                      help="About 20 s for 11,000 decisions; then kept up to date like the others")  # fmt: skip
        continue
    try:
        text = cached_export(store, store.url, scheme_name, entry.name, negatives, confirmed_only, undecided,
                             fingerprint)  # fmt: skip
    except MeloInputError as exc:  # e.g. an IRI SSSOM cannot write as a CURIE: the export names the mapping
        column.error(md_text(f"{entry.label}: {exc}"))
        continue
    column.download_button(md_text(entry.label), text, file_name=f"{scheme_name}.{entry.extension}",
                           mime=entry.media_type, key=f"cw_download_{entry.name}")  # fmt: skip
# Under the buttons: until a rerun has written the new files, the browser still serves the previous
# ones, and a caption above them said what they would hold before they did (a click then got the
# unfiltered file).
st.caption(f"The downloads hold {held:d} decision{'' if held == 1 else 's'}"
           f"{' confirmed by a reviewer' if confirmed_only else ''}{', rejections included' if negatives else ''}.")  # fmt: skip
