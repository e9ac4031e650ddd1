"""Curator decisions as known mentions: every current match by the pipeline's relations makes its
term a known mention of the concept (``Pipeline.set_mentions``), so what curators accepted helps
the next terms at once; exact and narrow matches are also what ``train --with-decisions`` learns.

What a scheme's decisions teach the linker, read here once for the Link page and `propose` alike
(``melo_core.linking.scheme_learning``): ``decided_mentions`` (less the scheme's boilerplate) and
``scheme_kinds`` (the kind of concept it maps to)."""

from __future__ import annotations

from collections.abc import Container

from sqlalchemy import func, select

from db.models import MATCH_OUTCOMES, DecisionRow, SchemeRow, TermRow
from db.store import Store
from melo_core.esco.crosswalk import ALIAS_RELATIONS
from melo_core.esco.taxonomy import Concept
from melo_core.linking.scheme_learning import Boilerplate, TargetKinds
from melo_core.linking.scheme_learning import scheme_kinds as kinds_of_decisions


def accepted_aliases(store: Store, scheme: str | None = None,
                     relations: tuple[str, ...] = ALIAS_RELATIONS) -> list[tuple[str, str, str | None]]:  # fmt: skip
    """(term label, concept URI, language) of every current decision by ``relations`` (default
    exactMatch or narrowMatch), of all schemes (or one), in decision order. The language is the
    term's, else its scheme's. Pipelines take them as known mentions (with their own relations).

    Current means the latest decision per (term, concept): an exact match later undone or
    turned into a broad match or a rejection is not returned."""
    latest = select(func.max(DecisionRow.id)).group_by(DecisionRow.term_id, DecisionRow.concept_uri)
    query = (
        select(TermRow.label, DecisionRow.concept_uri, func.coalesce(TermRow.language, SchemeRow.language))
        .join(TermRow, TermRow.id == DecisionRow.term_id)
        .join(SchemeRow, SchemeRow.id == TermRow.scheme_id)
        .where(DecisionRow.id.in_(latest), DecisionRow.outcome.in_(relations))
        .order_by(DecisionRow.id)
    )
    if scheme is not None:
        query = query.where(SchemeRow.name == scheme)
    with store.read() as session:
        return [(label, uri, language) for label, uri, language in session.execute(query)]


def scheme_matches(store: Store, scheme: str) -> list[tuple[str, str]]:
    """(concept URI, relation) of every current match decision of ``scheme`` (exact, narrow, broad,
    close, related), in decision order: what the scheme teaches about the kind of concept it maps
    to (``melo_core.linking.scheme_learning.scheme_kinds``)."""
    latest = select(func.max(DecisionRow.id)).group_by(DecisionRow.term_id, DecisionRow.concept_uri)
    query = (
        select(DecisionRow.concept_uri, DecisionRow.outcome)
        .join(TermRow, TermRow.id == DecisionRow.term_id)
        .join(SchemeRow, SchemeRow.id == TermRow.scheme_id)
        .where(DecisionRow.id.in_(latest), DecisionRow.outcome.in_(MATCH_OUTCOMES), SchemeRow.name == scheme)
        .order_by(DecisionRow.id)
    )
    with store.read() as session:
        return [(uri, outcome) for uri, outcome in session.execute(query)]


def scheme_labels(store: Store, scheme: str) -> list[str]:
    """The labels of every term of ``scheme``: where its boilerplate is read from."""
    query = select(TermRow.label).join(SchemeRow, SchemeRow.id == TermRow.scheme_id).where(SchemeRow.name == scheme)
    with store.read() as session:
        return list(session.scalars(query))


def scheme_boilerplate(store: Store, scheme: str) -> Boilerplate:
    """The words many of ``scheme``'s terms share."""
    return Boilerplate.of(scheme_labels(store, scheme))


def decided_mentions(store: Store, scheme: str, relations: tuple[str, ...], known: Container[str],
                     boilerplate: Boilerplate | None = None) -> list[tuple[str, str, str | None]]:  # fmt: skip
    """The store's current decisions by ``relations`` (every scheme's) as known mentions for linking
    ``scheme``: those whose concept is ``known``, less a term made mostly of ``scheme``'s
    boilerplate ("Chemistry Teachers, Postsecondary"), which would pull its look-alikes to its
    concept. ``boilerplate``: the scheme's, when the caller keeps it."""
    if boilerplate is None:
        boilerplate = scheme_boilerplate(store, scheme)
    return [m for m in accepted_aliases(store, relations=relations)
            if m[1] in known and boilerplate.teaches_mention(m[0])]  # fmt: skip


def scheme_kinds(store: Store, scheme: str, concepts: dict[str, Concept]) -> TargetKinds:
    """The kinds of concept ``scheme``'s current matches point to (occupation or ISCO group, which
    level), for ``Linker.link(..., kinds=...)``; ``concepts``: the taxonomy's ``by_uri``."""
    return kinds_of_decisions(scheme_matches(store, scheme), concepts)
