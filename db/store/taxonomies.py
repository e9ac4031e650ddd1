"""Taxonomies and concepts: what was imported, labels, search by label, one concept's record."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from db.models import ConceptRow, LabelRow, TaxonomyRow
from db.search import search_words
from db.store.base import StoreBase, chunks
from db.store.records import ConceptInfo, LabelMatch, TaxonomyInfo

INSIDE_WORD_MIN = 3  # a query word this long also matches inside a label's word (compounds)


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

    def find_concepts(
        self, text: str, limit: int = 20, languages: Iterable[str] | None = None, language: str | None = None
    ) -> list[LabelMatch]:
        """Concepts with a label holding every word of ``text`` (any language, or ``languages``),
        one result per concept with the label that matched best and the concept's preferred name
        in ``language`` (the curator's), else English. Case- and accent-insensitive on every
        backend (``search_words``: ``backer`` finds ``Bäcker``).

        A query word matches a whole word of the label, the start of one (so typing works: ``nurs
        car`` finds ``nurse responsible for general care``), or, ranked last and from three
        letters on, the inside of one (compounds: ``baker`` finds ``brødbaker``). Best first: the
        label equal to the query; more words matched whole, then at their start; labels in
        ``language``, then English; preferred labels, then alternative, then hidden; shorter
        labels (fewer extra words)."""
        if limit < 0:  # SQLite reads LIMIT -10 as none, PostgreSQL refuses it
            raise ValueError(f"limit must be 0 or more, got {limit}")
        words = search_words(text)
        if not words or limit == 0:  # as ``queue(limit=0)``: nothing asked, nothing found
            return []
        folded = LabelRow.search_text  # " word word " (db.formats.label_search_text)
        # Words are letters and digits only: nothing in them for LIKE to read as a wildcard.
        scores = [case((folded.like(f"% {w} %"), 2), (folded.like(f"% {w}%"), 1), else_=0) for w in words]
        word_score = sum(scores[1:], scores[0])
        # Inside a word only from three letters on: one or two would match most of the 316k labels.
        found_in = [folded.like(f"%{w}%" if len(w) >= INSIDE_WORD_MIN else f"% {w}%") for w in words]
        ranking = (
            case((folded == f" {' '.join(words)} ", 0), else_=1),
            -word_score,
            case((LabelRow.language == (language or "en"), 0), (LabelRow.language == "en", 1), else_=2),
            case((LabelRow.kind == "preferred", 0), (LabelRow.kind == "alternative", 1), else_=2),
            func.length(folded),
            LabelRow.text,
            ConceptRow.taxonomy_id.desc(),
        )
        matches = (
            select(
                ConceptRow.uri,
                LabelRow.text.label("label"),
                LabelRow.language,
                LabelRow.kind.label("label_kind"),
                ConceptRow.kind.label("concept_kind"),
                ConceptRow.isco_code,
                *(key.label(f"rank_{i}") for i, key in enumerate(ranking[:5])),
                func.row_number().over(partition_by=ConceptRow.uri, order_by=ranking).label("nth"),
            )
            .join(LabelRow, LabelRow.concept_id == ConceptRow.id)
            .where(*found_in)
        )
        if languages is not None:
            matches = matches.where(LabelRow.language.in_(sorted(set(languages))))
        best = matches.subquery()
        query = (
            select(best.c.uri, best.c.label, best.c.language, best.c.label_kind, best.c.concept_kind, best.c.isco_code)
            .where(best.c.nth == 1)
            .order_by(*(best.c[f"rank_{i}"] for i in range(5)), best.c.label, best.c.uri)
            .limit(limit)
        )
        with self.read() as s:
            rows = s.execute(query).all()
            names = preferred_labels(s, [row.uri for row in rows], language)
        return [LabelMatch(*row, name=names.get(row.uri, row.label)) for row in rows]

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
