"""ESCO versions: a scheme's target taxonomy, the version each decision was made against, and
``migrate`` (its runs and the review queue of matches whose concept changed).

Existing decisions keep ``esco_version`` NULL (not known: they are append-only, and what they were
decided against was never recorded). Existing schemes target the most recently imported
taxonomy, if any (what labels were taken from until now).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHANGES = ("relabelled", "replaced", "gone")


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    # Plain ADD COLUMN, no table rebuilt (on SQLite a rebuild of source_schemes trips over the
    # foreign keys pointing at it, one of decisions drops its triggers). No foreign key on
    # taxonomy_id for the same reason (SQLite could not drop the column again); taxonomies are
    # never deleted.
    op.add_column("source_schemes", sa.Column("taxonomy_id", sa.Integer(), nullable=True))
    op.add_column("decisions", sa.Column("esco_version", sa.String(200), nullable=True))
    op.execute("UPDATE source_schemes SET taxonomy_id = (SELECT MAX(id) FROM taxonomies) WHERE taxonomy_id IS NULL")
    op.create_table(
        "scheme_migrations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scheme_id", sa.Integer(), nullable=False),
        sa.Column("from_taxonomy_id", sa.Integer(), nullable=True),
        sa.Column("to_taxonomy_id", sa.Integer(), nullable=False),
        sa.Column("curator", sa.String(200), nullable=False),
        sa.Column("migrated_at", _utc(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["scheme_id"], ["source_schemes.id"], name="fk_scheme_migrations_scheme_id_source_schemes"
        ),
        sa.ForeignKeyConstraint(
            ["from_taxonomy_id"], ["taxonomies.id"], name="fk_scheme_migrations_from_taxonomy_id_taxonomies"
        ),
        sa.ForeignKeyConstraint(
            ["to_taxonomy_id"], ["taxonomies.id"], name="fk_scheme_migrations_to_taxonomy_id_taxonomies"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_scheme_migrations"),
    )
    op.create_table(
        "migration_reviews",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("migration_id", sa.Integer(), nullable=False),
        sa.Column("decision_id", sa.Integer(), nullable=False),
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("concept_uri", sa.String(500), nullable=False),
        sa.Column("change", sa.String(20), nullable=False),
        sa.Column("old_label", sa.Text(), nullable=True),
        sa.Column("new_label", sa.Text(), nullable=True),
        sa.Column("candidate_uri", sa.String(500), nullable=True),
        sa.Column("candidate_score", sa.Float(), nullable=True),
        sa.CheckConstraint(
            "change IN (" + ", ".join(repr(c) for c in CHANGES) + ")", name="ck_migration_reviews_change"
        ),
        sa.ForeignKeyConstraint(
            ["migration_id"], ["scheme_migrations.id"], name="fk_migration_reviews_migration_id_scheme_migrations"
        ),
        sa.ForeignKeyConstraint(["decision_id"], ["decisions.id"], name="fk_migration_reviews_decision_id_decisions"),
        sa.ForeignKeyConstraint(["term_id"], ["source_terms.id"], name="fk_migration_reviews_term_id_source_terms"),
        sa.PrimaryKeyConstraint("id", name="pk_migration_reviews"),
    )
    op.create_index("ix_migration_reviews_migration", "migration_reviews", ["migration_id"])


def downgrade() -> None:
    op.drop_index("ix_migration_reviews_migration", table_name="migration_reviews")
    op.drop_table("migration_reviews")
    op.drop_table("scheme_migrations")
    # Native DROP COLUMN on both backends (SQLite >= 3.35): no table rebuilt, so the decisions'
    # append-only triggers stay.
    op.drop_column("decisions", "esco_version")
    op.drop_column("source_schemes", "taxonomy_id")
