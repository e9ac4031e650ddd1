"""Provenance of imported decisions that a file cannot forge: an import signs its decisions as
whoever ran it (``imported_by``: the signed-in account, or ``import:<file name>`` on the command
line) at the time of import; the curator and date the file claims are kept apart as
``original_author`` and ``original_date``.

Existing decisions keep the three NULL (not known: decisions are append-only).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN, no table rebuilt: on SQLite a rebuild of decisions would drop its
    # append-only triggers.
    op.add_column("decisions", sa.Column("original_author", sa.String(200), nullable=True))
    op.add_column("decisions", sa.Column("original_date", sa.DateTime(timezone=True), nullable=True))
    op.add_column("decisions", sa.Column("imported_by", sa.String(200), nullable=True))


def downgrade() -> None:
    # Native DROP COLUMN on both backends (SQLite >= 3.35): the triggers stay.
    op.drop_column("decisions", "imported_by")
    op.drop_column("decisions", "original_date")
    op.drop_column("decisions", "original_author")
