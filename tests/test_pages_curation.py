"""The curation pages (Link, Crosswalk) with Streamlit's AppTest, a temporary SQLite store and a
data folder holding one real dataset (nor_q_no_c_no) and one crosswalk (nor_no)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from db.exports import skos_csv_text
from db.quickstart import start_curation
from db.store import Store

ROOT = Path(__file__).resolve().parent.parent
LINK = "pages/2_Link.py"
CROSSWALK = "pages/3_Crosswalk.py"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: the taxonomy and the fitted char-tfidf are built once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def env(nor_data: Path, cache: Path, esco_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'melo.db'}"
    monkeypatch.setenv("MELO_DATA", str(nor_data))
    monkeypatch.setenv("MELO_ESCO", str(esco_csv))  # ISCO groups for the union's occupations
    monkeypatch.setenv("MELO_CACHE", str(cache))
    monkeypatch.setenv("MELO_DB_URL", url)
    monkeypatch.chdir(ROOT)
    return url


@pytest.fixture
def started(env: str, nor_data: Path) -> str:
    """A store holding the ESCO union of the small data folder and the nor_no terms."""
    with Store(env, create=True) as store:
        start_curation(store, nor_data, "nor_no")
    return env


def page(script: str, curator: str | None = "alice") -> AppTest:
    app = AppTest.from_file(str(ROOT / script), default_timeout=60)
    if curator:
        app.session_state["curator"] = curator
    app.session_state["link_pipeline"] = "lexical"  # ready at once (best would be prepared in the background)
    return app


def button(app: AppTest, label: str):  # AppTest's Button
    return next(b for b in app.button if b.label == label)


def test_first_run_asks_the_curator_then_imports_with_one_click(env: str) -> None:
    app = page(LINK, curator=None).run()
    assert not app.exception
    assert [t.label for t in app.text_input] == ["Your name (recorded with every decision)"]
    app.text_input[0].input("Alice")
    button(app, "Start").click().run()
    assert not app.exception
    assert app.session_state["curator"] == "Alice"
    assert app.query_params["curator"] == "Alice"  # in the address: a reload keeps the curator
    assert any("store is empty" in i.value for i in app.info)
    assert app.selectbox(key="start_crosswalk").value == "nor_no"

    app.button(key="start_import").click().run()
    assert not app.exception
    with Store(env) as store:
        [scheme] = store.schemes()
        assert (scheme.name, scheme.language, scheme.todo) == ("nor_no", "no", scheme.terms)
        assert scheme.terms > 100
        assert store.taxonomies()[0].concepts > 1000
        first = store.queue("nor_no", limit=1)[0]
    assert app.subheader[0].value == first.label  # straight into the queue
    # the crosswalk is keyed by URI: the code shows as its last segment, the URI once beside it
    code = first.code.rsplit("/", 1)[-1]
    assert first.code == first.uri and code.isdigit()
    assert app.selectbox(key="link_term").options[0] == f"{first.label}  ·  {code}  [todo]"
    (caption,) = [c.value for c in app.caption if c.value.startswith("Code ")]
    assert caption == f"Code `{code}` · `{first.uri}` · status **todo**"  # code spans: no link, no markup
    # No calibrator fitted here: the scores are raw, and the page says how to get probabilities.
    assert any("Raw scores" in c.value and "melo_core prepare --pipeline" in c.value for c in app.caption)


def test_accept_a_candidate_then_see_it_on_the_crosswalk_page(started: str) -> None:
    app = page(LINK).run()
    assert not app.exception
    with Store(started) as store:
        first = store.queue("nor_no", limit=2)
    assert app.subheader[0].value == first[0].label
    table = app.dataframe[0].value
    assert len(table) == 10 and list(table["rank"]) == list(range(1, 11))
    # What a curator decides on, before the wide labels: at 1400 px only about four columns show.
    assert list(table.columns[:4]) == ["rank", "concept", "score", "decision"]
    assert {"matched label", "ISCO group", "kind"} <= set(table.columns[4:]) and table.columns[-1] == "uri"
    assert any(group[:1].isdigit() for group in table["ISCO group"])  # "2221 Nursing professionals"
    # ISCO repeats a label across levels (01, 011, 0110): a group is shown with its code first.
    groups = table[table["kind"] == "isco_group"]
    assert len(groups) >= 2 and len(set(groups["concept"])) == len(groups)
    for name, group in zip(groups["concept"], groups["ISCO group"], strict=True):
        assert name.startswith(f"ISCO {group.split()[0]} ")
    choice = app.radio(key=f"link_choice_{first[0].id}")
    assert choice.value is not None
    assert choice.index == 0 and choice.value.startswith("1|")  # the top candidate is preselected
    # An option reads rank, label, matched label, ISCO code and score; a URI's last segment (a UUID
    # for an occupation) made it wrap onto a second line.
    # Radio options are markdown: the rank's "1." is escaped ("1\\.") so that it is no list.
    assert [o.split(".", 1)[0].rstrip("\\") for o in choice.options] == [str(r) for r in table["rank"]]
    assert not any(uri.rsplit("/", 1)[-1] in o for o, uri in zip(choice.options, table["uri"], strict=True))

    button(app, "Exact").click().run()
    assert not app.exception
    assert app.subheader[0].value == first[1].label  # the accepted term left the todo queue
    [hourly] = app.get("vega_lite_chart")  # "Your decisions per hour": this one, in this hour
    per_hour = pa.ipc.open_stream(hourly.proto.data.data).read_pandas()
    assert list(per_hour["decisions"]) == [1] and json.loads(hourly.proto.spec)["mark"]["type"] == "bar"
    with Store(started) as store:
        [decision] = store.current(first[0].id)
        assert decision.concept_uri == table.iloc[0]["uri"]
        assert (decision.outcome, decision.curator, decision.scorer, decision.rank) == (
            "exactMatch",
            "alice",
            "lexical",
            1,
        )
        assert decision.score == pytest.approx(float(table.iloc[0]["score"]), abs=1e-4)
        assert decision.concept_label is not None
        top = table.iloc[0]  # stored: the ESCO label, without the code the page shows an ISCO group with
        code = f"ISCO {top['ISCO group'].split()[0]} " if top["kind"] == "isco_group" else ""
        assert top["concept"] == code + decision.concept_label
        assert store.suggestions(first[0].id, "lexical")[0].concept_uri == decision.concept_uri
        assert store.queue_counts("nor_no")["done"] == 1
        assert decision.concept_uri in skos_csv_text(store, "nor_no")

    crosswalk = page(CROSSWALK).run()
    assert not crosswalk.exception
    rows = crosswalk.dataframe[0].value
    assert list(rows["code"]) == [first[0].code]
    assert list(rows["relation"]) == ["exactMatch"] and list(rows["curator"]) == ["alice"]
    assert [d.label for d in crosswalk.download_button] == ["SKOS CSV", "SSSOM TSV"]
    # SKOS Turtle is written once asked for, then kept up to date with the others.
    button(crosswalk, "Write SKOS Turtle").click().run()
    assert not crosswalk.exception
    assert [d.label for d in crosswalk.download_button] == ["SKOS CSV", "SSSOM TSV", "SKOS Turtle"]
    assert "Write SKOS Turtle" not in [b.label for b in crosswalk.button]
    files = [d.proto.url for d in crosswalk.download_button]  # named by their content

    # Change it, then revoke it: new decisions, the history stays.
    crosswalk.selectbox(key="cw_new_relation").select("broadMatch")
    button(crosswalk, "Change").click().run()
    assert not crosswalk.exception
    assert list(crosswalk.dataframe[0].value["relation"]) == ["broadMatch"]
    # The downloads kept between reruns are written again once the crosswalk changed.
    changed = [d.proto.url for d in crosswalk.download_button]
    assert all(new != old for new, old in zip(changed, files, strict=True)), (files, changed)
    button(crosswalk, "Revoke").click().run()
    assert not crosswalk.exception
    assert crosswalk.dataframe[0].value.empty
    with Store(started) as store:
        outcomes = [d.outcome for d in store.history(first[0].id)]
    assert outcomes == ["exactMatch", "broadMatch", "rejected"]


def test_reload_shows_the_same_term_and_undo_skip_unsure_work(started: str) -> None:
    with Store(started) as store:
        terms = store.queue("nor_no", limit=3)
    app = page(LINK).run()
    button(app, "Skip ▶").click().run()
    assert app.subheader[0].value == terms[1].label
    assert app.query_params["term"] == str(terms[1].id)

    reloaded = page(LINK)
    reloaded.query_params["term"] = str(terms[1].id)
    reloaded.query_params["scheme"] = "nor_no"
    reloaded.run()
    assert not reloaded.exception
    assert reloaded.subheader[0].value == terms[1].label

    button(reloaded, "Unsure").click().run()
    assert reloaded.subheader[0].value == terms[2].label  # unsure terms wait in their own queue
    reloaded.button(key="link_undo").click().run()
    assert not reloaded.exception
    assert reloaded.subheader[0].value == terms[1].label  # back to the undone term
    with Store(started) as store:
        assert store.term_by_id(terms[1].id).status == "todo"
        assert [d.outcome for d in store.history(terms[1].id)] == ["unsure", "undecided"]

    reloaded.radio(key="link_status").set_value("unsure").run()
    assert not reloaded.exception
    assert any("Nothing in this queue" in s.value for s in reloaded.success)


def test_a_reloaded_page_keeps_the_curator_from_its_address(started: str) -> None:
    app = page(LINK, curator=None)
    app.query_params["curator"] = "bob"  # a new session: what a reload of .../Link?curator=bob starts
    app.run()
    assert not app.exception
    assert [t.label for t in app.text_input if t.label.startswith("Your name")] == []
    assert any(m.value == "Curator: **bob**" for m in app.sidebar.markdown)
    app.button(key="change_curator").click().run()
    assert "curator" not in app.query_params and "curator" not in app.session_state
    assert [t.label for t in app.text_input] == ["Your name (recorded with every decision)"]


def test_pick_a_candidate_by_its_number_then_accept_as_narrow(started: str) -> None:
    with Store(started) as store:
        term = store.queue("nor_no", limit=1)[0]
    app = page(LINK).run()
    table = app.dataframe[0].value
    choice = app.radio(key=f"link_choice_{term.id}")  # key 3 checks its third option in the browser
    assert choice.options[2].startswith("3\\.") and choice.options[2].endswith("\\[3\\]")  # the rank escaped: no list
    choice.set_value(f"3|{table.iloc[2]['uri']}")
    button(app, "Narrow").click().run()
    assert not app.exception
    with Store(started) as store:
        [decision] = store.current(term.id)
    assert (decision.concept_uri, decision.outcome, decision.rank) == (table.iloc[2]["uri"], "narrowMatch", 3)


def test_find_a_concept_by_label_and_reject_it(started: str) -> None:
    with Store(started) as store:
        term = store.queue("nor_no", limit=1)[0]
        match = store.find_concepts("lege", limit=1)[0]
    app = page(LINK).run()
    app.text_input(key="link_concept_search").input("LEGE").run()
    assert not app.exception
    choice = app.radio(key=f"link_choice_{term.id}")
    searched = [o for o in choice.options if o.startswith("🔎")]
    assert searched and match.label in searched[0]
    choice.set_value(f"search|{match.uri}")
    button(app, "Reject").click().run()
    assert not app.exception
    with Store(started) as store:
        [decision] = store.current(term.id)
    assert (decision.concept_uri, decision.outcome, decision.scorer, decision.rank) == (
        match.uri,
        "rejected",
        None,
        None,
    )


def test_crosswalk_page_kappa_and_warnings(started: str) -> None:
    with Store(started) as store:
        terms = store.queue("nor_no", limit=4)
        uri = store.find_concepts("lege", limit=1)[0].uri
        for who in ("alice", "bob"):
            for t in terms:
                store.decide(t.id, uri, "exactMatch", who)
        store.decide(terms[0].id, uri, "rejected", "bob")
    app = page(CROSSWALK).run()
    assert not app.exception
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Pairs both decided"] == "4" and metrics["Agreed"] == "3"
    warnings = app.dataframe[1].value
    assert "concept-many-exact" in set(warnings["kind"])
    app.selectbox(key="cw_curator").select("bob").run()
    assert set(app.dataframe[0].value["curator"]) == {"bob"} and len(app.dataframe[0].value) == 3
    app.multiselect(key="cw_relations").set_value(["rejected"]).run()
    assert list(app.dataframe[0].value["code"]) == [terms[0].code]


def test_crosswalk_page_shows_what_others_did_since_its_last_run(started: str) -> None:
    """The page keeps what it read until the store changes: another curator's decision, comment
    or review (another process, as on a team's server) shows on the next rerun."""
    with Store(started) as store:
        terms = store.queue("nor_no", limit=2)
        uri = store.find_concepts("lege", limit=1)[0].uri
        first = store.decide(terms[0].id, uri, "exactMatch", "alice")
    app = page(CROSSWALK).run()
    assert not app.exception
    assert len(app.dataframe[0].value) == 1
    assert any(c.value.startswith("1 current decision in ") for c in app.caption)
    # The mapping leads, the URIs close the table (a MELO term's code is a URI too).
    columns = list(app.dataframe[0].value.columns)
    assert columns[:3] == ["term", "relation", "concept"] and columns[-2:] == ["code", "concept uri"]
    assert any(c.value == "None." for c in app.caption)  # no consistency warning yet
    assert list(app.dataframe[1].value["comments"]) == [0]
    assert len(app.run().dataframe[0].value) == 1  # a rerun with nothing changed reads the same

    with Store(started) as store:
        store.add_comment(first.id, "bob", "is this the hospital doctor?")
    assert list(app.run().dataframe[1].value["comments"]) == [1]

    with Store(started) as store:
        store.decide(terms[0].id, store.find_concepts("lege", limit=2)[1].uri, "exactMatch", "bob")
    app.run()
    assert len(app.dataframe[0].value) == 2
    assert "several-exact" in set(app.dataframe[1].value["kind"])  # the warnings table comes first now
    assert len(app.dataframe[2].value) == 2

    with Store(started) as store:
        store.review([first.id], "rita", "rejected")
    app.radio(key="cw_review_status").set_value("rejected").run()
    assert list(app.dataframe[2].value["reviewer"]) == ["rita"]
    with Store(started) as store:
        store.review([first.id], "rita", "confirmed")
    assert app.run().dataframe[2].value.empty


def test_label_languages_typed_in_capitals_or_unknown_are_read_or_named(started: str) -> None:
    ranked = {}
    for typed in ("no", "NO", "no,XX"):
        app = page(LINK)
        app.session_state["link_label_languages_nor_no"] = typed
        app.run()
        assert not app.exception and not app.error
        ranked[typed] = app.dataframe[0].value["concept"].tolist()
        assert [w.value for w in app.warning] == (
            ["The taxonomy has no labels in xx (it has no). Searching the others."] if "XX" in typed else []
        )
    assert ranked["NO"] == ranked["no,XX"] == ranked["no"]
    app = page(LINK)
    app.session_state["link_label_languages_nor_no"] = "xx"
    app.run()
    assert [e.value for e in app.error] == ["The taxonomy has no labels in xx (it has no)."] and not app.dataframe


def test_a_hybrid_scorer_shows_each_scorers_score_and_rank(started: str) -> None:
    app = page(LINK)
    app.session_state["link_advanced"] = True
    app.session_state["link_scorer"] = "rrf:char-tfidf+muse"
    app.run()
    assert not app.exception
    table = app.dataframe[0].value
    assert {"char-tfidf score", "char-tfidf rank", "muse score", "muse rank"} <= set(table.columns)
    assert table["char-tfidf rank"].min() >= 1 and table["muse rank"].min() >= 1


def test_a_mistyped_scorer_spec_stops_with_a_suggestion(started: str) -> None:
    app = page(LINK)
    app.session_state["link_advanced"] = True
    app.session_state["link_scorer"] = "muse@centriod=0.2"
    app.run()
    assert not app.exception and not app.dataframe
    assert [e.value for e in app.error] == ["unknown option 'centriod' for muse; did you mean 'centroid'?"]


# -- a shared app: sign-in, review, descriptions ------------------------------------------------


def shared_page(script: str) -> AppTest:
    app = AppTest.from_file(str(ROOT / script), default_timeout=60)
    app.session_state["link_pipeline"] = "lexical"
    return app


def sign_in(app: AppTest, username: str, password: str) -> AppTest:
    app.text_input(key="sign_in_user").input(username)
    app.text_input(key="sign_in_password").input(password)
    return button(app, "Sign in").click().run()


@pytest.fixture
def shared(started: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """MELO_AUTH=on over the started store: curator alice, reviewer rita."""
    monkeypatch.setenv("MELO_AUTH", "on")
    with Store(started) as store:
        store.add_account("alice", "curator", "alice-secret")
        store.add_account("rita", "reviewer", "rita-secret")
    return started


def test_shared_app_asks_to_sign_in_and_says_why_not(shared: str) -> None:
    app = shared_page(LINK).run()
    assert not app.exception
    assert [s.value for s in app.subheader] == ["Sign in"]
    assert not [b for b in app.button if b.label == "Exact"]  # nothing to decide without a session
    sign_in(app, "alice", "wrong-password")
    assert [e.value for e in app.error] == ["wrong user name or password."]
    sign_in(app, "alice", "alice-secret")
    assert not app.exception and not app.error
    assert any("Signed in as **alice** (curator)" in m.value for m in app.sidebar.markdown)
    button(app, "Exact").click().run()
    with Store(shared) as store:
        [decision] = store.crosswalk("nor_no")
    assert decision.curator == "alice"  # the signed-in identity, nothing typed

    # The session expires: the next run asks again, saying so.
    actor = app.session_state["melo_actor"]
    app.session_state["melo_actor"] = replace(actor, expires_at=datetime.now(UTC) - timedelta(minutes=1))
    app.run()
    assert [s.value for s in app.subheader] == ["Sign in"]
    assert [w.value for w in app.warning] == ["Your session has expired: sign in again."]

    # An account disabled during a session: refused at once, and it cannot sign in again.
    sign_in(app, "alice", "alice-secret")
    with Store(shared) as store:
        store.set_disabled("alice")
    app.run()
    assert [s.value for s in app.subheader] == ["Sign in"]
    assert "disabled" in app.warning[0].value
    sign_in(app, "alice", "alice-secret")
    assert [e.value for e in app.error] == ["the account 'alice' is disabled: ask an administrator."]


def test_review_queue_bulk_confirm_and_confirmed_only_download(shared: str) -> None:
    with Store(shared) as store:
        alice = store.sign_in("alice", "alice-secret")
        terms = store.queue("nor_no", limit=3)
        uri = store.find_concepts("lege", limit=1)[0].uri
        for t in terms:
            store.decide(t.id, uri, "exactMatch", alice)
    curator = sign_in(shared_page(CROSSWALK).run(), "alice", "alice-secret")
    assert not curator.exception
    assert any("Only reviewers confirm or reject" in c.value for c in curator.caption)
    assert not [b for b in curator.button if b.label.startswith("Confirm selected")]

    reviewer = sign_in(shared_page(CROSSWALK).run(), "rita", "rita-secret")
    assert not reviewer.exception
    queue = reviewer.dataframe[2].value
    assert list(queue["status"]) == ["proposed"] * 3 and set(queue["curator"]) == {"alice"}
    reviewer.checkbox(key="cw_review_all").check().run()
    reviewer.text_input(key="cw_review_comment").input("checked against ISCO")
    reviewer.button(key="cw_confirm").click().run()
    assert not reviewer.exception
    assert [s.value for s in reviewer.success] == ["Confirmed 3 mapping(s)."]
    assert reviewer.dataframe[2].value.empty  # nothing proposed any more
    reviewer.radio(key="cw_review_status").set_value("confirmed").run()
    assert list(reviewer.dataframe[2].value["reviewer"]) == ["rita"] * 3
    with Store(shared) as store:
        store.decide(terms[0].id, uri, "narrowMatch", alice)  # a new decision: proposed again
        assert len(store.review_queue("nor_no", "proposed")) == 1
        assert skos_csv_text(store, "nor_no", confirmed_only=True).count("skos:exactMatch") == 2
    held = [c.value for c in reviewer.run().caption if c.value.startswith("The downloads hold")]
    assert held == ["The downloads hold 3 decisions."]
    reviewer.checkbox(key="cw_confirmed_only").check().run()
    assert not reviewer.exception
    held = [c.value for c in reviewer.caption if c.value.startswith("The downloads hold")]
    assert held == ["The downloads hold 2 decisions confirmed by a reviewer."]  # the new one is not confirmed
    link = shared_page(LINK)
    link.session_state["melo_actor"] = reviewer.session_state["melo_actor"]
    link.session_state["link_status"] = "done"
    link.session_state["link_term"] = terms[1].id
    link.run()
    assert not link.exception
    assert any("(alice; confirmed by rita)" in m.value for m in link.markdown if m.value.startswith("Current"))


def test_candidate_descriptions_on_demand(started: str) -> None:
    with Store(started) as store:
        term = store.queue("nor_no", limit=1)[0]
    app = page(LINK).run()
    assert not app.exception
    # One screen per term (issue 90): a description's start under its candidate, in full in an expander.
    captions = list(app.radio(key=f"link_choice_{term.id}").proto.captions)
    assert len(captions) == 10 and sum(len(c) > 60 for c in captions) >= 5  # ESCO descriptions
    assert all(len(c) <= 110 for c in captions)  # one line each
    [details] = [e for e in app.expander if e.label.startswith("Candidates in full")]
    texts = [m.value for m in details.markdown]
    assert len(texts) == 10 and texts[0].startswith("**1. ")
    assert sum(len(t) > 200 and "_no description" not in t for t in texts) >= 5


def test_shared_app_imports_only_for_signed_in_users(shared: str) -> None:
    app = shared_page("pages/4_Import.py").run()
    assert not app.exception
    assert [s.value for s in app.subheader] == ["Sign in"] and not app.get("file_uploader")
    sign_in(app, "alice", "alice-secret")
    assert not app.exception and app.get("file_uploader")
