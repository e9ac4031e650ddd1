"""Accent- and case-insensitive search on every backend: labels get a folded ``search_text``,
and the terms' ``search_text`` is folded the same way (it was case-folded only).

Revision ID: 0003
Revises: 0002
Create Date: 2025-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.formats import search_fold

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 5000


def _refold(table: str, columns: Sequence[str]) -> None:
    """Fill ``search_text`` with the folded ``columns``, joined by newlines."""
    bind = op.get_bind()
    rows = bind.execute(sa.text(f"SELECT id, {', '.join(columns)} FROM {table}")).all()
    update = sa.text(f"UPDATE {table} SET search_text = :folded WHERE id = :id")
    for start in range(0, len(rows), _BATCH):
        batch = rows[start : start + _BATCH]
        bind.execute(update, [{"id": r[0], "folded": search_fold("\n".join(c or "" for c in r[1:]))} for r in batch])


def upgrade() -> None:
    op.add_column("labels", sa.Column("search_text", sa.Text(), nullable=False, server_default=""))
    _refold("labels", ["text"])
    _refold("source_terms", ["code", "label", "description"])  # as db.store.search_text joins them


def downgrade() -> None:
    with op.batch_alter_table("labels") as batch:
        batch.drop_column("search_text")
