"""Batch proposals: the machine proposes a term's first candidate where its calibrated probability
clears the threshold of a stated precision (``db.proposals``); a person confirms (it becomes a
decision signed by her) or rejects it (it never comes back for that pair).

A new table ``proposals``, and on ``decisions`` the provenance of a confirmed proposal: the tool
that proposed it (``proposed_by``: tool, version, pipeline; its calibrated probability goes to
``confidence``, revision 0008). Existing decisions keep NULL (not proposed).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RELATIONS = "relation IN ('exactMatch', 'narrowMatch', 'broadMatch', 'closeMatch', 'relatedMatch')"
_STATUSES = "status IN ('open', 'confirmed', 'rejected')"


def upgrade() -> None:
    op.create_table(
        "proposals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("concept_uri", sa.String(500), nullable=False),
        sa.Column("concept_label", sa.Text(), nullable=True),
        sa.Column("relation", sa.String(20), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("tool_version", sa.String(200), nullable=False),
        sa.Column("pipeline", sa.String(200), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("target_precision", sa.Float(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("proposed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_by", sa.String(200), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decision_id", sa.Integer(), nullable=True),
        sa.CheckConstraint(_RELATIONS, name=op.f("ck_proposals_relation")),
        sa.CheckConstraint(_STATUSES, name=op.f("ck_proposals_status")),
        sa.ForeignKeyConstraint(["term_id"], ["source_terms.id"], name=op.f("fk_proposals_term_id_source_terms")),
        sa.ForeignKeyConstraint(["decision_id"], ["decisions.id"], name=op.f("fk_proposals_decision_id_decisions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_proposals")),
        # One proposal per pair, whatever became of it: proposing again adds nothing, and a rejected
        # pair is never proposed again.
        sa.UniqueConstraint("term_id", "concept_uri", name=op.f("uq_proposals_term_id_concept_uri")),
    )
    op.create_index("ix_proposals_status", "proposals", ["status", "term_id"])
    # Plain ADD COLUMN, no table rebuilt: on SQLite a rebuild of decisions would drop its
    # append-only triggers.
    op.add_column("decisions", sa.Column("proposed_by", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_column("decisions", "proposed_by")
    op.drop_index("ix_proposals_status", table_name="proposals")
    op.drop_table("proposals")
