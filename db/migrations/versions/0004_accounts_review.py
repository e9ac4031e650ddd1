"""Accounts (curators and reviewers of a shared app), reviews of decisions and comments on them;
reviews and comments are append-only like decisions.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = ("reviews", "comments")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(200), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("password_hash", sa.String(300), nullable=True),
        sa.Column("disabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.CheckConstraint(_one_of("role", ("curator", "reviewer")), name="ck_accounts_role"),
        sa.PrimaryKeyConstraint("id", name="pk_accounts"),
        sa.UniqueConstraint("username", name="uq_accounts_username"),
    )
    op.create_table(
        "reviews",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("decision_id", sa.Integer(), nullable=False),
        sa.Column("reviewer", sa.String(200), nullable=False),
        sa.Column("verdict", sa.String(20), nullable=False),
        sa.Column("reviewed_at", _utc(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.CheckConstraint(_one_of("verdict", ("confirmed", "rejected")), name="ck_reviews_verdict"),
        sa.ForeignKeyConstraint(["decision_id"], ["decisions.id"], name="fk_reviews_decision_id_decisions"),
        sa.PrimaryKeyConstraint("id", name="pk_reviews"),
    )
    op.create_index("ix_reviews_decision", "reviews", ["decision_id", "id"])
    op.create_table(
        "comments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("decision_id", sa.Integer(), nullable=False),
        sa.Column("author", sa.String(200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.ForeignKeyConstraint(["decision_id"], ["decisions.id"], name="fk_comments_decision_id_decisions"),
        sa.PrimaryKeyConstraint("id", name="pk_comments"),
    )
    op.create_index("ix_comments_decision", "comments", ["decision_id", "id"])

    dialect = op.get_bind().dialect.name
    for table in APPEND_ONLY:
        if dialect == "sqlite":
            for event in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{event.lower()} BEFORE {event} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{table} are append-only'); END"
                )
        elif dialect == "postgresql":
            op.execute(
                f"CREATE FUNCTION melo_{table}_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN RAISE EXCEPTION '{table} are append-only'; END $$"
            )
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION melo_{table}_append_only()"
            )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for table in APPEND_ONLY:
        if dialect == "sqlite":
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_update")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete")
        elif dialect == "postgresql":
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
            op.execute(f"DROP FUNCTION IF EXISTS melo_{table}_append_only()")
    op.drop_index("ix_comments_decision", table_name="comments")
    op.drop_table("comments")
    op.drop_index("ix_reviews_decision", table_name="reviews")
    op.drop_table("reviews")
    op.drop_table("accounts")
