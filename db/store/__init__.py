"""The crosswalk store: what the CLI and the Streamlit pages call.

``Store(url)`` opens any SQLAlchemy URL (default ``MELO_DB_URL``, else the SQLite file ``melo.db``
in the project root) and upgrades the schema to the latest Alembic revision. SQLite runs with
WAL, foreign keys on and a busy timeout, so several app sessions can share one file; writes take
the write lock up front (``BEGIN IMMEDIATE``) so a read-then-write never fails half-way.

Every method opens and closes its own transaction and returns plain frozen dataclasses, so
callers never hold ORM objects or sessions. A decision is committed before ``decide`` returns.

One ``Store``, its methods grouped by concern, a module each:

- ``engine``: the database and its schema (Alembic); ``base``: transactions and shared queries;
- ``taxonomies``: taxonomies and concepts (labels, search by label);
- ``terms``: schemes, terms and the curation queue, suggestions;
- ``decisions``: decisions and undo (retried while an import holds the lock: ``retry``);
- ``versions``: the taxonomy version a scheme targets, and ``migrate`` to another version;
- ``crosswalk``: the current crosswalk and its consistency (warnings, agreement, activity);
- ``accounts``: accounts of a shared app, sign-in, who acts (``Actor``);
- ``reviews``: reviews of decisions (confirm, reject), comments, conflicts, the review queue;
- ``proposals``: machine proposals at a stated precision, confirmed or rejected in bulk;
- ``records``: the dataclasses returned.

Evaluation runs are ``db.runs`` (functions over a ``Store``), imports ``db.imports``, exports
``db.exports``.
"""

from db.store.accounts import (
    AccessError,
    AccountQueries,
    NotAllowed,
    SignInFailed,
    SignInRequired,
    actor_name,
)
from db.store.base import search_text
from db.store.crosswalk import IMPORT_CURATOR_PREFIX, CrosswalkQueries
from db.store.decisions import DecisionQueries
from db.store.engine import (
    MIGRATIONS,
    _alembic_config,
    create_store_engine,
    current_revisions,
    head_revisions,
    upgrade_schema,
)
from db.store.proposals import OPEN, PROPOSAL_VERDICTS, NewProposal, Proposal, ProposalQueries
from db.store.records import (
    Account,
    Actor,
    Agreement,
    Comment,
    ConceptInfo,
    ConsistencyWarning,
    Decision,
    HourCount,
    LabelMatch,
    MigrationItem,
    MigrationReport,
    Review,
    ReviewItem,
    Scheme,
    Suggestion,
    TaxonomyInfo,
    Term,
)
from db.store.retry import StoreBusy
from db.store.reviews import CONFLICTING, PROPOSED, REVIEW_FILTERS, ReviewQueries, select_all
from db.store.taxonomies import TaxonomyQueries
from db.store.terms import STATUSES, TermQueries
from db.store.versions import VersionQueries


class Store(
    TaxonomyQueries,
    TermQueries,
    DecisionQueries,
    ReviewQueries,
    CrosswalkQueries,
    VersionQueries,
    AccountQueries,
    ProposalQueries,
):
    """The crosswalk store at ``url`` (default: ``MELO_DB_URL`` or ``melo.db``); ``sign_in=True``
    for a shared app, where every write that records a person needs a signed-in ``Actor``."""


__all__ = [
    "CONFLICTING",
    "IMPORT_CURATOR_PREFIX",
    "MIGRATIONS",
    "OPEN",
    "PROPOSAL_VERDICTS",
    "PROPOSED",
    "REVIEW_FILTERS",
    "STATUSES",
    "AccessError",
    "Account",
    "Actor",
    "Agreement",
    "Comment",
    "ConceptInfo",
    "ConsistencyWarning",
    "Decision",
    "HourCount",
    "LabelMatch",
    "MigrationItem",
    "MigrationReport",
    "NewProposal",
    "NotAllowed",
    "Proposal",
    "Review",
    "ReviewItem",
    "Scheme",
    "SignInFailed",
    "SignInRequired",
    "Store",
    "StoreBusy",
    "Suggestion",
    "TaxonomyInfo",
    "Term",
    "_alembic_config",
    "actor_name",
    "create_store_engine",
    "current_revisions",
    "head_revisions",
    "search_text",
    "select_all",
    "upgrade_schema",
]
