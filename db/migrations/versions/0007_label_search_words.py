"""Word-based concept search: a label's ``search_text`` becomes its folded words, each with one
space either side (``db.search.label_search_text``), so that a query word matches whole words
and word starts on every backend with plain ``LIKE``. No schema change: the rows are refilled.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

from db.formats import search_fold
from db.search import label_search_text

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 5000


def _refill(fold: Callable[[str], str]) -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, text FROM labels")).all()
    update = sa.text("UPDATE labels SET search_text = :folded WHERE id = :id")
    for start in range(0, len(rows), _BATCH):
        bind.execute(update, [{"id": id_, "folded": fold(text)} for id_, text in rows[start : start + _BATCH]])


def upgrade() -> None:
    _refill(label_search_text)


def downgrade() -> None:
    _refill(search_fold)  # as 0003 filled it
