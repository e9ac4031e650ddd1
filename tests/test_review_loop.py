"""Review that closes the loop (issue 90): a rejection and its comment send the term back to the
curators' queue (status "returned", shown on the Link page); "select all" leaves conflicting
mappings out unless asked; a review action clears the selection and the comment; refusals name
the mapping, not an id, beside the buttons; reviewing needs sign-in. Store tests run on SQLite,
and on PostgreSQL too when MELO_TEST_PG_URL is set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from db.imports import import_terms, read_terms_csv
from db.store import NotAllowed, Store, select_all

BAKER = "http://data.europa.eu/esco/occupation/baker"
PASTRY = "http://data.europa.eu/esco/occupation/pastry-baker"
NURSE = "http://data.europa.eu/esco/occupation/nurse"


@pytest.fixture
def team(store_url: str, tmp_path: Path) -> Iterator[tuple[Store, dict[str, int]]]:
    """A shared store (sign-in required) with terms B1 Baker, B2 Konditor, N1 Sykepleier; curators
    alice and bob, reviewer rita."""
    path = tmp_path / "tst.csv"
    path.write_text("code,label\nB1,Baker\nB2,Konditor\nN1,Sykepleier\n", encoding="utf-8")
    with Store(store_url) as setup:
        import_terms(setup, "tst", read_terms_csv(path), language="no")
        for name, role in (("alice", "curator"), ("bob", "curator"), ("rita", "reviewer")):
            setup.add_account(name, role, f"{name}-secret-1")
        terms = {t.code: t.id for t in setup.terms("tst")}
    with Store(store_url, sign_in=True) as opened:
        yield opened, terms


# -- the store ----------------------------------------------------------------------------------


def test_a_rejection_returns_the_term_to_the_queue_with_its_comment(team: tuple[Store, dict[str, int]]) -> None:
    store, terms = team
    alice, rita = store.sign_in("alice", "alice-secret-1"), store.sign_in("rita", "rita-secret-1")
    baker = store.decide(terms["B1"], BAKER, "exactMatch", alice, concept_label="baker")
    pastry = store.decide(terms["B2"], PASTRY, "narrowMatch", alice, concept_label="pastry baker")
    store.review([pastry.id], rita, "confirmed")
    store.review([baker.id], rita, "rejected", comment="a Baker here bakes bread only: narrower")

    assert [(t.code, t.status) for t in store.queue("tst", status="returned")] == [("B1", "returned")]
    assert store.queue_counts("tst") == {"todo": 1, "done": 1, "unsure": 0, "returned": 1}
    assert store.term_by_id(terms["B1"]).status == "returned"
    [verdict] = store.latest_reviews([baker.id]).values()
    assert (verdict.reviewer, verdict.comment) == ("rita", "a Baker here bakes bread only: narrower")

    # The curator answers with a new decision on the pair: done again, and proposed for review.
    store.decide(terms["B1"], BAKER, "narrowMatch", alice, concept_label="baker")
    assert store.queue("tst", status="returned") == []
    assert store.term_by_id(terms["B1"]).status == "done"
    # Rejecting the mapping herself also settles it: the term has no match left to do.
    store.review([store.current(terms["B1"])[0].id], rita, "rejected")
    store.decide(terms["B1"], BAKER, "rejected", alice)
    assert store.queue_counts("tst")["returned"] == 0 and store.term_by_id(terms["B1"]).status == "todo"


def test_select_all_leaves_conflicts_out_unless_asked(team: tuple[Store, dict[str, int]]) -> None:
    store, terms = team
    alice, bob = store.sign_in("alice", "alice-secret-1"), store.sign_in("bob", "bob-secret-1")
    rita = store.sign_in("rita", "rita-secret-1")
    store.decide(terms["B1"], BAKER, "exactMatch", alice)
    store.decide(terms["B1"], BAKER, "narrowMatch", bob)  # the two disagree on Baker
    nurse = store.decide(terms["N1"], NURSE, "exactMatch", alice)
    items = store.review_queue("tst", "proposed")
    assert len(items) == 2

    assert [i.decision.id for i in select_all(items)] == [nurse.id]
    assert len(select_all(items, include_conflicting=True)) == 2
    store.review([i.decision.id for i in select_all(items)], rita, "confirmed")
    [left] = store.review_queue("tst", "proposed")
    assert (left.decision.term_code, left.conflict) == ("B1", "alice: exactMatch · bob: narrowMatch")


def test_refusals_name_the_mapping_not_an_id(team: tuple[Store, dict[str, int]]) -> None:
    store, terms = team
    alice, rita = store.sign_in("alice", "alice-secret-1"), store.sign_in("rita", "rita-secret-1")
    hers = store.decide(terms["B1"], BAKER, "exactMatch", rita, concept_label="baker")
    with pytest.raises(NotAllowed) as refused:
        store.review([hers.id], rita, "confirmed")
    assert str(refused.value) == "“Baker” → baker is your own decision: another reviewer reviews it"
    old = store.decide(terms["B2"], PASTRY, "exactMatch", alice)  # no label: the URI's last segment
    store.decide(terms["B2"], PASTRY, "closeMatch", alice)
    with pytest.raises(ValueError) as stale:
        store.review([old.id], rita, "confirmed")
    assert str(stale.value) == "“Konditor” → pastry-baker is no longer the current decision of its pair: reload"
