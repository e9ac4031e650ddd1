"""Crosswalk store: taxonomies, concepts, labels, source schemes and terms, suggestions, decisions.

Revision ID: 0001
Revises:
Create Date: 2025-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OUTCOMES = (
    "exactMatch",
    "narrowMatch",
    "broadMatch",
    "closeMatch",
    "relatedMatch",
    "rejected",
    "unsure",
    "undecided",
)


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "taxonomies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("version", sa.String(200), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("checksum", sa.String(64), nullable=False),
        sa.Column("imported_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_taxonomies"),
        sa.UniqueConstraint("name", "version", name="uq_taxonomies_name_version"),
    )
    op.create_table(
        "concepts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("taxonomy_id", sa.Integer(), nullable=False),
        sa.Column("uri", sa.String(500), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("isco_code", sa.String(20), nullable=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.CheckConstraint(_one_of("kind", ("occupation", "isco_group")), name="ck_concepts_kind"),
        sa.ForeignKeyConstraint(
            ["taxonomy_id"], ["taxonomies.id"], name="fk_concepts_taxonomy_id_taxonomies", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_concepts"),
        sa.UniqueConstraint("taxonomy_id", "uri", name="uq_concepts_taxonomy_id_uri"),
    )
    op.create_index("ix_concepts_uri", "concepts", ["uri"])
    op.create_table(
        "labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("concept_id", sa.Integer(), nullable=False),
        sa.Column("language", sa.String(35), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.CheckConstraint(_one_of("kind", ("preferred", "alternative", "hidden")), name="ck_labels_kind"),
        sa.ForeignKeyConstraint(
            ["concept_id"], ["concepts.id"], name="fk_labels_concept_id_concepts", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_labels"),
        sa.UniqueConstraint(
            "concept_id", "language", "kind", "position", name="uq_labels_concept_id_language_kind_position"
        ),
    )
    op.create_table(
        "source_schemes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("language", sa.String(35), nullable=True),
        sa.Column("base_uri", sa.String(500), nullable=True),
        sa.Column("created_at", _utc(), nullable=False),
        sa.CheckConstraint(_one_of("kind", ("terminology", "job-titles")), name="ck_source_schemes_kind"),
        sa.PrimaryKeyConstraint("id", name="pk_source_schemes"),
        sa.UniqueConstraint("name", name="uq_source_schemes_name"),
    )
    op.create_table(
        "source_terms",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scheme_id", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(500), nullable=False),
        sa.Column("uri", sa.String(1000), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("language", sa.String(35), nullable=True),
        sa.Column("search_text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["scheme_id"], ["source_schemes.id"], name="fk_source_terms_scheme_id_source_schemes"),
        sa.PrimaryKeyConstraint("id", name="pk_source_terms"),
        sa.UniqueConstraint("scheme_id", "code", name="uq_source_terms_scheme_id_code"),
    )
    op.create_index("ix_source_terms_scheme_uri", "source_terms", ["scheme_id", "uri"])
    op.create_table(
        "suggestions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("concept_uri", sa.String(500), nullable=False),
        sa.Column("scorer", sa.String(200), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.ForeignKeyConstraint(
            ["term_id"], ["source_terms.id"], name="fk_suggestions_term_id_source_terms", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_suggestions"),
        sa.UniqueConstraint("term_id", "scorer", "concept_uri", name="uq_suggestions_term_id_scorer_concept_uri"),
    )
    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("concept_uri", sa.String(500), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("curator", sa.String(200), nullable=False),
        sa.Column("decided_at", _utc(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("scorer", sa.String(200), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("concept_label", sa.Text(), nullable=True),
        sa.Column("undoes_id", sa.Integer(), nullable=True),
        sa.CheckConstraint(_one_of("outcome", OUTCOMES), name="ck_decisions_outcome"),
        sa.ForeignKeyConstraint(["term_id"], ["source_terms.id"], name="fk_decisions_term_id_source_terms"),
        sa.ForeignKeyConstraint(["undoes_id"], ["decisions.id"], name="fk_decisions_undoes_id_decisions"),
        sa.PrimaryKeyConstraint("id", name="pk_decisions"),
    )
    op.create_index("ix_decisions_pair", "decisions", ["term_id", "concept_uri", "id"])
    op.create_index("ix_decisions_curator", "decisions", ["curator", "id"])

    # Decisions are append-only, whoever writes to the database.
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER decisions_no_{event.lower()} BEFORE {event} ON decisions "
                "BEGIN SELECT RAISE(ABORT, 'decisions are append-only'); END"
            )
    elif dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION melo_decisions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION 'decisions are append-only'; END $$"
        )
        op.execute(
            "CREATE TRIGGER decisions_append_only BEFORE UPDATE OR DELETE ON decisions "
            "FOR EACH ROW EXECUTE FUNCTION melo_decisions_append_only()"
        )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS decisions_no_update")
        op.execute("DROP TRIGGER IF EXISTS decisions_no_delete")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS decisions_append_only ON decisions")
        op.execute("DROP FUNCTION IF EXISTS melo_decisions_append_only()")
    for table in ("decisions", "suggestions", "source_terms", "source_schemes", "labels", "concepts", "taxonomies"):
        op.drop_table(table)
