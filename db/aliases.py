"""Curator decisions as known mentions: every current match by the pipeline's relations makes its
term a known mention of the concept (``Pipeline.set_mentions``), so what curators accepted helps
the next terms at once; exact and narrow matches are also what ``train --with-decisions`` learns."""

from __future__ import annotations

from sqlalchemy import func, select

from db.models import MATCH_OUTCOMES, DecisionRow, SchemeRow, TermRow
from db.store import Store
from melo_core.esco.crosswalk import ALIAS_RELATIONS


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
