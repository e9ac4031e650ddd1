"""Curator decisions as linker aliases: every current exact or narrow match makes its term an
extra surface form of the concept (``Linker.add_aliases`` / ``set_aliases``), so what curators
accepted helps the next terms at once. Broad, close and related matches are left out: a broader
term is wider than the concept, a close or related one names another concept."""

from __future__ import annotations

from sqlalchemy import func, select

from db.models import DecisionRow, SchemeRow, TermRow
from db.store import Store
from melo_core.crosswalk import ALIAS_RELATIONS


def accepted_aliases(store: Store, scheme: str | None = None) -> list[tuple[str, str, str | None]]:
    """(term label, concept URI, language) of every current exactMatch or narrowMatch decision,
    of all schemes (or one), in decision order. The language is the term's, else its scheme's.

    Current means the latest decision per (term, concept): an exact match later undone or
    turned into a broad match or a rejection is not returned."""
    latest = select(func.max(DecisionRow.id)).group_by(DecisionRow.term_id, DecisionRow.concept_uri)
    query = (
        select(TermRow.label, DecisionRow.concept_uri, func.coalesce(TermRow.language, SchemeRow.language))
        .join(TermRow, TermRow.id == DecisionRow.term_id)
        .join(SchemeRow, SchemeRow.id == TermRow.scheme_id)
        .where(DecisionRow.id.in_(latest), DecisionRow.outcome.in_(ALIAS_RELATIONS))
        .order_by(DecisionRow.id)
    )
    if scheme is not None:
        query = query.where(SchemeRow.name == scheme)
    with store.read() as session:
        return [(label, uri, language) for label, uri, language in session.execute(query)]
