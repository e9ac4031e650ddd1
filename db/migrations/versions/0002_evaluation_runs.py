"""Evaluation runs: one row per run (metrics, protocol, code version) and one per evaluated query.

Revision ID: 0002
Revises: 0001
Create Date: 2025-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scorer", sa.String(500), nullable=False),
        sa.Column("dataset", sa.String(200), nullable=False),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("mode", sa.String(20), nullable=True),
        sa.Column("depth", sa.Integer(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("n_queries", sa.Integer(), nullable=True),
        sa.Column("skipped_queries", sa.Integer(), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.Column("code_version", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(_one_of("source", ("ours", "published")), name="ck_runs_source"),
        sa.CheckConstraint(f"mode IS NULL OR {_one_of('mode', ('trec', 'exact'))}", name="ck_runs_mode"),
        sa.CheckConstraint("depth IS NULL OR depth >= 0", name="ck_runs_depth"),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
    )
    op.create_table(
        "run_queries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("query_id", sa.String(200), nullable=False),
        sa.Column("query_text", sa.Text(), nullable=False),
        sa.Column("first_rank", sa.Integer(), nullable=True),
        sa.Column("gold", sa.JSON(), nullable=False),
        sa.Column("top", sa.JSON(), nullable=False),
        sa.CheckConstraint("first_rank IS NULL OR first_rank >= 1", name="ck_run_queries_first_rank"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_queries_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_run_queries"),
        # Its index also serves lookups and cascades by run_id.
        sa.UniqueConstraint("run_id", "position", name="uq_run_queries_run_id_position"),
    )


def downgrade() -> None:
    op.drop_table("run_queries")
    op.drop_table("runs")
