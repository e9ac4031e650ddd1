"""Taxonomies and concepts: what was imported, labels, search by label, one concept's record."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from db.formats import search_fold
from db.models import ConceptRow, LabelRow, TaxonomyRow
from db.store.base import StoreBase, chunks, like_escape
from db.store.records import ConceptInfo, LabelMatch, TaxonomyInfo


class TaxonomyQueries(StoreBase):
    """Taxonomies and concepts."""

    def taxonomies(self) -> list[TaxonomyInfo]:
        with self.read() as s:
            counts = dict(
                s.execute(select(ConceptRow.taxonomy_id, func.count()).group_by(ConceptRow.taxonomy_id)).all()
            )
            rows = s.scalars(select(TaxonomyRow).order_by(TaxonomyRow.id)).all()
            return [TaxonomyInfo(t.id, t.name, t.version, t.source, t.imported_at, counts.get(t.id, 0)) for t in rows]

    def concept_labels(self, uris: Iterable[str], language: str | None = None) -> dict[str, str]:
        """Preferred label of each concept in ``language``, else English, else the first language
        (alphabetically); among taxonomies with that language, the most recently imported."""
        with self.read() as s:
            return preferred_labels(s, uris, language)

    def concept_descriptions(self, uris: Iterable[str]) -> dict[str, str]:
        """The description of each concept that has one (the most recently imported taxonomy's)."""
        wanted = sorted(set(uris))
        found: dict[str, str] = {}
        with self.read() as s:
            for chunk in chunks(wanted):
                query = (
                    select(ConceptRow.uri, ConceptRow.description)
                    .where(ConceptRow.uri.in_(chunk), ConceptRow.description != "")
                    .order_by(ConceptRow.taxonomy_id)
                )
                found.update({uri: text for uri, text in s.execute(query)})
        return found

    def find_concepts(self, text: str, limit: int = 20, languages: Iterable[str] | None = None) -> list[LabelMatch]:
        """Concepts having a label that contains ``text`` (any language, or ``languages``), one
        match per concept, best first: the label equal to the text, then labels starting with
        it, then shorter labels. Case- and accent-insensitive on every backend (``search_fold``:
        ``backer`` finds ``Bäcker``)."""
        if limit < 0:  # SQLite reads LIMIT -10 as none, PostgreSQL refuses it
            raise ValueError(f"limit must be 0 or more, got {limit}")
        needle = search_fold(text.strip())
        if not needle or limit == 0:  # as ``queue(limit=0)``: nothing asked, nothing found
            return []
        folded = LabelRow.search_text
        escaped = like_escape(needle)
        closeness = case((folded == needle, 0), (folded.like(f"{escaped}%", escape="\\"), 1), else_=2)
        query = (
            select(
                ConceptRow.uri, LabelRow.text, LabelRow.language, LabelRow.kind, ConceptRow.kind, ConceptRow.isco_code
            )
            .join(LabelRow, LabelRow.concept_id == ConceptRow.id)
            .where(folded.like(f"%{escaped}%", escape="\\"))
            .order_by(closeness, func.length(LabelRow.text), LabelRow.text, ConceptRow.uri)
            .limit(limit * 10)
        )
        if languages is not None:
            query = query.where(LabelRow.language.in_(sorted(set(languages))))
        found: dict[str, LabelMatch] = {}
        with self.read() as s:
            for row in s.execute(query):
                if row[0] not in found:
                    found[row[0]] = LabelMatch(*row)
        return list(found.values())[:limit]

    def concept(self, uri: str) -> ConceptInfo | None:
        """A concept as the most recently imported taxonomy that has it describes it."""
        with self.read() as s:
            row = s.scalars(
                select(ConceptRow).where(ConceptRow.uri == uri).order_by(ConceptRow.taxonomy_id.desc()).limit(1)
            ).first()
            if row is None:
                return None
            labels: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
            query = (
                select(LabelRow)
                .where(LabelRow.concept_id == row.id)
                .order_by(LabelRow.language, LabelRow.kind, LabelRow.position)
            )
            for label in s.scalars(query):
                labels[label.language][label.kind].append(label.text)
            taxonomy = s.get(TaxonomyRow, row.taxonomy_id)
            assert taxonomy is not None
            return ConceptInfo(
                uri=row.uri,
                kind=row.kind,
                isco_code=row.isco_code,
                description=row.description,
                taxonomy=f"{taxonomy.name} {taxonomy.version}",
                labels={lang: dict(kinds) for lang, kinds in labels.items()},
            )


def preferred_labels(session: Session, uris: Iterable[str], language: str | None) -> dict[str, str]:
    """Preferred label of each concept in ``language``, else English, else the first language
    (alphabetically); among taxonomies with that language, the most recently imported."""
    best: dict[str, tuple[tuple[int, int, str], str]] = {}

    def fetch(wanted: Sequence[str], languages: Sequence[str] | None) -> None:
        for chunk in chunks(sorted(wanted)):
            query = (
                select(ConceptRow.uri, ConceptRow.taxonomy_id, LabelRow.language, LabelRow.text)
                .join(LabelRow, LabelRow.concept_id == ConceptRow.id)
                .where(LabelRow.kind == "preferred", ConceptRow.uri.in_(chunk))
            )
            if languages is not None:
                query = query.where(LabelRow.language.in_(languages))
            for uri, taxonomy_id, lang, label in session.execute(query):
                rank = (0 if lang == language else 1 if lang == "en" else 2, -taxonomy_id, lang)
                if uri not in best or rank < best[uri][0]:
                    best[uri] = (rank, label)

    wanted = set(uris)
    # The wanted languages first; all languages (21 in the MELO union) only for the rest.
    fetch(sorted(wanted), sorted({language or "en", "en"}))
    rest = wanted - best.keys()
    if rest:
        fetch(sorted(rest), None)
    return {uri: label for uri, (_, label) in best.items()}
