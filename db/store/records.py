"""What the store returns: plain frozen dataclasses, so callers never hold ORM objects."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime

from db.models import DecisionRow, TermRow


@dataclass(frozen=True)
class Scheme:
    id: int
    name: str
    kind: str
    language: str | None
    base_uri: str | None
    terms: int
    todo: int
    done: int
    unsure: int


@dataclass(frozen=True)
class TaxonomyInfo:
    id: int
    name: str
    version: str
    source: str
    imported_at: datetime
    concepts: int


@dataclass(frozen=True)
class MigrationItem:
    """A current match that ``migrate`` could not carry over unchanged (``Store.migration_reviews``)."""

    id: int
    migration_id: int
    scheme: str
    term_id: int
    term_code: str
    term_label: str
    concept_uri: str
    outcome: str  # the match the curator had recorded
    change: str  # relabelled, replaced (candidate_uri given) or gone (no candidate)
    old_label: str | None
    new_label: str | None  # relabelled: the concept's new label; replaced: the candidate's label
    candidate_uri: str | None
    candidate_score: float | None
    from_version: str | None
    to_version: str
    open: bool  # no newer decision on the pair since the migration


@dataclass(frozen=True)
class MigrationReport:
    """What ``migrate`` did: every current match counted once."""

    scheme: str
    from_version: str | None
    to_version: str
    carried_over: int  # same URI, same label
    relabelled: int  # same URI, new preferred label: carried over, flagged for review
    replaced: int  # URI gone, a replacement candidate found: to review
    gone: int  # URI gone, no candidate: to review
    review: tuple[MigrationItem, ...]
    dry_run: bool = False

    def summary(self) -> str:
        head = f"scheme {self.scheme}: {self.from_version or 'no version'} -> {self.to_version}"
        counts = (
            f"{self.carried_over} carried over, {self.relabelled} relabelled (carried over, to review), "
            f"{self.replaced} gone with a replacement candidate, {self.gone} gone without candidate"
        )
        return f"{head}{' (dry run, nothing written)' if self.dry_run else ''}: {counts}"


@dataclass(frozen=True)
class Term:
    id: int
    scheme: str
    code: str
    uri: str
    label: str
    description: str
    language: str | None
    status: str  # todo, done or unsure


@dataclass(frozen=True)
class Decision:
    id: int
    term_id: int
    scheme: str
    term_code: str
    term_uri: str
    term_label: str
    concept_uri: str
    outcome: str
    curator: str
    decided_at: datetime
    comment: str
    scorer: str | None
    score: float | None
    rank: int | None
    # Label shown to the curator, or (in crosswalk()) the taxonomy's label when none was stored.
    concept_label: str | None
    undoes_id: int | None
    # Version of the scheme's target taxonomy when decided (None: not known).
    esco_version: str | None = None
    # Imported decisions: who ran the import (also the curator), and the curator and date the
    # file claimed (unverified; None when the file named none).
    imported_by: str | None = None
    original_author: str | None = None
    original_date: datetime | None = None
    # A confirmed machine proposal: the tool, version and pipeline that proposed it (None: not
    # proposed); its probability then is ``confidence``.
    proposed_by: str | None = None
    # The candidate's calibrated probability when decided (None: no calibrator, or not a candidate).
    confidence: float | None = None


LABEL_FIELD = [f.name for f in dataclass_fields(Decision)].index("concept_label")


@dataclass(frozen=True)
class Suggestion:
    term_id: int
    concept_uri: str
    scorer: str
    score: float
    rank: int
    created_at: datetime | None = None
    confidence: float | None = None  # calibrated probability (None: no calibrator scored it)
    confidence_offset: float | None = None  # the scheme's logit shift ``confidence`` holds (None: none)


@dataclass(frozen=True)
class ConsistencyWarning:
    kind: str  # several-exact, concept-many-exact, accepted-after-rejected
    scheme: str
    message: str
    term_codes: tuple[str, ...]
    concept_uris: tuple[str, ...]


@dataclass(frozen=True)
class Agreement:
    """Cohen's kappa between two curators over the (term, concept) pairs both decided."""

    curator_a: str
    curator_b: str
    items: int
    agreed: int
    observed: float | None
    expected: float | None
    kappa: float | None  # None when undefined: no common items, or chance agreement is 1


@dataclass(frozen=True)
class HourCount:
    hour: datetime
    curator: str
    decisions: int


@dataclass(frozen=True)
class LabelMatch:
    """A concept found by one of its labels (``find_concepts``): one per concept."""

    uri: str
    label: str  # the label that matched
    language: str
    label_kind: str  # preferred, alternative or hidden
    concept_kind: str
    isco_code: str | None
    name: str  # the concept's preferred label in the curator's language, else English


@dataclass(frozen=True)
class ConceptInfo:
    uri: str
    kind: str
    isco_code: str | None
    description: str
    taxonomy: str
    labels: dict[str, dict[str, list[str]]]  # language -> kind -> texts in order


@dataclass(frozen=True)
class Account:
    username: str
    role: str  # curator or reviewer
    disabled: bool
    local: bool  # signs in with a password (else through OpenID Connect)
    created_at: datetime


@dataclass(frozen=True)
class Actor:
    """A signed-in user: who decides, undoes, reviews or comments in a shared app. The store
    checks on every write that the session has not expired and the account is still enabled."""

    username: str
    role: str
    expires_at: datetime
    via: str = "password"  # password or oidc


@dataclass(frozen=True)
class Review:
    id: int
    decision_id: int
    reviewer: str
    verdict: str  # confirmed or rejected
    reviewed_at: datetime
    comment: str


@dataclass(frozen=True)
class Comment:
    id: int
    decision_id: int
    author: str
    text: str
    created_at: datetime


@dataclass(frozen=True)
class ReviewItem:
    """A current mapping in the review queue: its decision, review status (proposed, confirmed or
    rejected: the latest review of this decision), and the conflict it is part of (if any)."""

    decision: Decision
    status: str
    reviewer: str | None
    reviewed_at: datetime | None
    conflict: str | None
    comments: int


def decision_record(row: DecisionRow, term: TermRow, scheme: str) -> Decision:
    return Decision(
        id=row.id,
        term_id=row.term_id,
        scheme=scheme,
        term_code=term.code,
        term_uri=term.uri,
        term_label=term.label,
        concept_uri=row.concept_uri,
        outcome=row.outcome,
        curator=row.curator,
        decided_at=row.decided_at,
        comment=row.comment,
        scorer=row.scorer,
        score=row.score,
        rank=row.rank,
        concept_label=row.concept_label,
        undoes_id=row.undoes_id,
        esco_version=row.esco_version,
        imported_by=row.imported_by,
        original_author=row.original_author,
        original_date=row.original_date,
        proposed_by=row.proposed_by,
        confidence=row.confidence,
    )
