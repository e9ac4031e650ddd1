"""ESCO versions: the taxonomy a scheme is linked against, and ``migrate``, which re-targets a
scheme's crosswalk to another imported version.

A scheme targets one imported taxonomy (``source_schemes.taxonomy_id``); every decision records
that taxonomy's version when it is made (``decisions.esco_version``). ``migrate_scheme`` looks at
each current match (latest decision per term and concept, a SKOS relation):

- the concept's URI is in the new version with the same preferred label: **carried over**;
- same URI, another preferred label: **relabelled**, carried over and queued for review;
- URI gone, and the new version has a concept with the old preferred label (case and accents
  aside), else a label close to it (rapidfuzz ratio >= ``min_similarity``): **replaced**, queued
  with that candidate;
- URI gone, no candidate: **gone**, queued.

Nothing is rewritten: decisions stay as they are (append-only), the scheme gets its new target,
and the queue lists the pairs to look at. An item stays open until the pair gets a newer decision
(re-decide it to confirm it against the new version, reject it, or undo it).
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from typing import cast

from rapidfuzz import fuzz, process
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.formats import search_fold
from db.models import (
    MATCH_OUTCOMES,
    ConceptRow,
    DecisionRow,
    LabelRow,
    MigrationReviewRow,
    SchemeMigrationRow,
    SchemeRow,
    TaxonomyRow,
    TermRow,
    utcnow,
)
from db.store.base import StoreBase, chunks
from db.store.records import MigrationItem, MigrationReport, TaxonomyInfo
from melo_core.errors import MeloInputError
from melo_core.files.text_limits import check_name

MIN_SIMILARITY = 0.85  # rapidfuzz ratio / 100 for a replacement candidate by label


def _taxonomy_info(s: Session, row: TaxonomyRow) -> TaxonomyInfo:
    concepts = s.scalar(select(func.count()).select_from(ConceptRow).where(ConceptRow.taxonomy_id == row.id)) or 0
    return TaxonomyInfo(row.id, row.name, row.version, row.source, row.imported_at, concepts)


def _preferred(s: Session, taxonomy_id: int, uris: Iterable[str]) -> dict[str, dict[str, str]]:
    """uri -> language -> preferred label, in one taxonomy."""
    labels: dict[str, dict[str, str]] = defaultdict(dict)
    for chunk in chunks(sorted(set(uris))):
        query = (
            select(ConceptRow.uri, LabelRow.language, LabelRow.text)
            .join(LabelRow, LabelRow.concept_id == ConceptRow.id)
            .where(ConceptRow.taxonomy_id == taxonomy_id, ConceptRow.uri.in_(chunk), LabelRow.kind == "preferred")
        )
        for uri, language, text in s.execute(query):
            labels[uri][language] = text
    return labels


def _same_label(a: str, b: str) -> bool:
    """Equal up to Unicode compatibility forms and spacing (a no-break space is no new label);
    case counts."""
    return " ".join(unicodedata.normalize("NFKC", a).split()) == " ".join(unicodedata.normalize("NFKC", b).split())


def _language(wanted: str | None, *available: Iterable[str]) -> str | None:
    """The language to compare labels in: the scheme's, else English, else the first common one."""
    common = set.intersection(*(set(a) for a in available)) if available else set()
    for language in (wanted, "en"):
        if language in common:
            return language
    return min(common) if common else None


class _Candidates:
    """Labels of the new version in one language: a replacement candidate for an old label."""

    def __init__(self, s: Session, taxonomy_id: int, language: str):
        query = (
            select(ConceptRow.uri, LabelRow.text, LabelRow.kind)
            .join(LabelRow, LabelRow.concept_id == ConceptRow.id)
            .where(ConceptRow.taxonomy_id == taxonomy_id, LabelRow.language == language)
            .order_by(LabelRow.kind != "preferred", ConceptRow.uri, LabelRow.position)
        )
        self.exact: dict[str, tuple[str, str]] = {}
        self.preferred: dict[str, str] = {}
        self.choices: list[str] = []
        self.owners: list[tuple[str, str]] = []
        for uri, text, kind in s.execute(query):
            folded = search_fold(text)
            self.exact.setdefault(folded, (uri, text))
            if kind == "preferred":
                self.preferred[uri] = text
            self.choices.append(folded)
            self.owners.append((uri, text))

    def find(self, label: str, min_similarity: float) -> tuple[str, str, float] | None:
        """(uri, its preferred label, score): the same label scores 1.0."""
        folded = search_fold(label)
        if folded in self.exact:
            uri, _ = self.exact[folded]
            return uri, self.preferred.get(uri, self.exact[folded][1]), 1.0
        if not self.choices:
            return None
        best = process.extractOne(folded, self.choices, scorer=fuzz.ratio, score_cutoff=min_similarity * 100)
        if best is None:
            return None
        uri, text = self.owners[best[2]]
        return uri, self.preferred.get(uri, text), round(best[1] / 100, 4)


class VersionQueries(StoreBase):
    """A scheme's target taxonomy version, and migrating a crosswalk to another version."""

    def scheme_taxonomy(self, scheme: str) -> TaxonomyInfo | None:
        """The taxonomy version the scheme is linked against (None: none imported yet)."""
        with self.read() as s:
            row = self._scheme_row(s, scheme)
            taxonomy = None if row.taxonomy_id is None else s.get(TaxonomyRow, row.taxonomy_id)
            return None if taxonomy is None else _taxonomy_info(s, taxonomy)

    def migrate_scheme(
        self,
        scheme: str,
        to_version: str,
        *,
        name: str | None = None,
        curator: str = "migrate",
        min_similarity: float = MIN_SIMILARITY,
        dry_run: bool = False,
    ) -> MigrationReport:
        """Re-target ``scheme`` to the imported taxonomy ``to_version`` (of ``name``: default the
        current target's name), in one transaction; ``dry_run`` writes nothing. An unknown scheme
        or version, or the version already targeted, is a ``MeloInputError`` and changes nothing."""
        try:  # the name recorded with the migration: NFC, no invisible or bidi characters
            curator = check_name(curator.strip(), "curator")
        except ValueError as exc:
            raise MeloInputError(str(exc)) from None
        with self.write() as s:
            row = s.scalars(select(SchemeRow).where(SchemeRow.name == scheme)).first()
            if row is None:
                raise self._unknown_scheme(s, scheme)
            source = None if row.taxonomy_id is None else s.get(TaxonomyRow, row.taxonomy_id)
            target = self._target(s, to_version, name or (source.name if source else None))
            if source is not None and source.id == target.id:
                raise MeloInputError(f"scheme {scheme!r} already targets {target.name} {target.version}")
            counts, items = self._compare(s, row, source, target, min_similarity)
            report = MigrationReport(
                scheme=scheme,
                from_version=source.version if source else None,
                to_version=target.version,
                carried_over=counts["carried_over"],
                relabelled=counts["relabelled"],
                replaced=counts["replaced"],
                gone=counts["gone"],
                review=(),
                dry_run=dry_run,
            )
            if dry_run:
                return _with_review(report, [_item(0, 0, scheme, i, report) for i in items])
            migration = SchemeMigrationRow(
                scheme_id=row.id,
                from_taxonomy_id=source.id if source else None,
                to_taxonomy_id=target.id,
                curator=curator,
                migrated_at=utcnow(),
                counts={
                    "carried_over": report.carried_over,
                    "relabelled": report.relabelled,
                    "replaced": report.replaced,
                    "gone": report.gone,
                },
            )
            s.add(migration)
            s.flush()
            review = []
            for item in items:
                decision = cast(DecisionRow, item["decision"])
                review_row = MigrationReviewRow(
                    migration_id=migration.id,
                    decision_id=decision.id,
                    term_id=decision.term_id,
                    concept_uri=decision.concept_uri,
                    change=item["change"],
                    old_label=item["old_label"],
                    new_label=item["new_label"],
                    candidate_uri=item["candidate_uri"],
                    candidate_score=item["candidate_score"],
                )
                s.add(review_row)
                s.flush()
                review.append(_item(review_row.id, migration.id, scheme, item, report))
            row.taxonomy_id = target.id
            return _with_review(report, review)

    @staticmethod
    def _target(s: Session, version: str, name: str | None) -> TaxonomyRow:
        query = select(TaxonomyRow).where(TaxonomyRow.version == version)
        if name is not None:
            query = query.where(TaxonomyRow.name == name)
        found = s.scalars(query.order_by(TaxonomyRow.id)).all()
        if len(found) == 1:
            return found[0]
        known = ", ".join(f"{t.name} {t.version}" for t in s.scalars(select(TaxonomyRow).order_by(TaxonomyRow.id)))
        if not found:
            wanted = f"{name} {version}" if name else version
            raise MeloInputError(
                f"no taxonomy version {wanted!r} in the store (imported: {known or 'none'}; "
                "import it first with import-taxonomy --version)"
            )
        names = ", ".join(t.name for t in found)
        raise MeloInputError(f"version {version!r} exists for several taxonomies ({names}): name one with --name")

    def _compare(
        self, s: Session, scheme: SchemeRow, source: TaxonomyRow | None, target: TaxonomyRow, min_similarity: float
    ) -> tuple[dict[str, int], list[dict[str, object]]]:
        latest = self._latest_ids(scheme.id)
        current = s.execute(
            select(DecisionRow, TermRow.code, TermRow.label)
            .join(TermRow, TermRow.id == DecisionRow.term_id)
            .where(DecisionRow.id.in_(latest), DecisionRow.outcome.in_(MATCH_OUTCOMES))
            .order_by(TermRow.id, DecisionRow.concept_uri)
        ).all()
        uris = {d.concept_uri for d, _, _ in current}
        old = _preferred(s, source.id, uris) if source else {}
        new = _preferred(s, target.id, uris)
        present: set[str] = set()
        for chunk in chunks(sorted(uris)):
            present.update(
                s.scalars(select(ConceptRow.uri).where(ConceptRow.taxonomy_id == target.id, ConceptRow.uri.in_(chunk)))
            )
        counts = {"carried_over": 0, "relabelled": 0, "replaced": 0, "gone": 0}
        items: list[dict[str, object]] = []
        candidates: dict[str, _Candidates] = {}
        target_languages = set(
            s.scalars(
                select(LabelRow.language)
                .join(ConceptRow, ConceptRow.id == LabelRow.concept_id)
                .where(ConceptRow.taxonomy_id == target.id)
                .distinct()
            )
        )
        for decision, code, label in current:
            uri = decision.concept_uri
            old_labels = old.get(uri, {})
            item = {"decision": decision, "code": code, "label": label, "candidate_uri": None, "candidate_score": None}
            if uri in present:
                language = _language(scheme.language, old_labels, new.get(uri, {}))
                before = old_labels.get(language) if language else None
                after = new.get(uri, {}).get(language) if language else None
                if before is None or after is None or _same_label(before, after):
                    counts["carried_over"] += 1
                    continue
                counts["relabelled"] += 1
                items.append({**item, "change": "relabelled", "old_label": before, "new_label": after})
                continue
            # A label in a language the new version has: the scheme's, else English, else any.
            language = _language(scheme.language, old_labels, target_languages)
            before = old_labels.get(language) if language else None
            if before is None and decision.concept_label and (scheme.language or "en") in target_languages:
                language, before = scheme.language or "en", decision.concept_label  # the label shown
            before = before or next(iter(old_labels.values()), None) or decision.concept_label
            found = None
            if before and language:
                if language not in candidates:
                    candidates[language] = _Candidates(s, target.id, language)
                found = candidates[language].find(before, min_similarity)
            if found is None:
                counts["gone"] += 1
                items.append({**item, "change": "gone", "old_label": before, "new_label": None})
                continue
            counts["replaced"] += 1
            candidate_uri, candidate_label, score = found
            items.append(
                {
                    **item,
                    "change": "replaced",
                    "old_label": before,
                    "new_label": candidate_label,
                    "candidate_uri": candidate_uri,
                    "candidate_score": score,
                }
            )
        return counts, items

    def migration_reviews(self, scheme: str, open_only: bool = True) -> list[MigrationItem]:
        """The review queue of the scheme's migrations, oldest first: items still open (no newer
        decision on the pair since), or all of them."""
        with self.read() as s:
            row = self._scheme_row(s, scheme)
            latest = set(s.scalars(self._latest_ids(row.id)))
            source = TaxonomyRow.__table__.alias("source")
            target = TaxonomyRow.__table__.alias("target")
            query = (
                select(
                    MigrationReviewRow,
                    DecisionRow.outcome,
                    TermRow.code,
                    TermRow.label,
                    source.c.version,
                    target.c.version,
                )
                .join(SchemeMigrationRow, SchemeMigrationRow.id == MigrationReviewRow.migration_id)
                .join(DecisionRow, DecisionRow.id == MigrationReviewRow.decision_id)
                .join(TermRow, TermRow.id == MigrationReviewRow.term_id)
                .outerjoin(source, source.c.id == SchemeMigrationRow.from_taxonomy_id)
                .join(target, target.c.id == SchemeMigrationRow.to_taxonomy_id)
                .where(SchemeMigrationRow.scheme_id == row.id)
                .order_by(MigrationReviewRow.id)
            )
            items = []
            for review, outcome, code, label, from_version, to_version in s.execute(query):
                is_open = review.decision_id in latest
                if open_only and not is_open:
                    continue
                items.append(
                    MigrationItem(
                        id=review.id,
                        migration_id=review.migration_id,
                        scheme=scheme,
                        term_id=review.term_id,
                        term_code=code,
                        term_label=label,
                        concept_uri=review.concept_uri,
                        outcome=outcome,
                        change=review.change,
                        old_label=review.old_label,
                        new_label=review.new_label,
                        candidate_uri=review.candidate_uri,
                        candidate_score=review.candidate_score,
                        from_version=from_version,
                        to_version=to_version,
                        open=is_open,
                    )
                )
            return items


def _item(
    review_id: int, migration_id: int, scheme: str, item: dict[str, object], report: MigrationReport
) -> MigrationItem:
    decision = item["decision"]
    assert isinstance(decision, DecisionRow)
    return MigrationItem(
        id=review_id,
        migration_id=migration_id,
        scheme=scheme,
        term_id=decision.term_id,
        term_code=str(item["code"]),
        term_label=str(item["label"]),
        concept_uri=decision.concept_uri,
        outcome=decision.outcome,
        change=str(item["change"]),
        old_label=item["old_label"],  # type: ignore[arg-type]
        new_label=item["new_label"],  # type: ignore[arg-type]
        candidate_uri=item["candidate_uri"],  # type: ignore[arg-type]
        candidate_score=item["candidate_score"],  # type: ignore[arg-type]
        from_version=report.from_version,
        to_version=report.to_version,
        open=True,
    )


def _with_review(report: MigrationReport, review: list[MigrationItem]) -> MigrationReport:
    from dataclasses import replace

    return replace(report, review=tuple(review))
