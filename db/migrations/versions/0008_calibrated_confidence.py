"""Calibrated confidence: beside a suggestion's and a decision's raw score, the calibrated
probability that a curator accepts the candidate (``melo_core.evaluation.calibration``), which SSSOM exports as
``confidence`` (the raw score stays in ``similarity_score``). Existing rows keep NULL: no
calibrator had scored them.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN, no table rebuilt: on SQLite a rebuild of decisions would drop its
    # append-only triggers.
    op.add_column("suggestions", sa.Column("confidence", sa.Float(), nullable=True))
    op.add_column("decisions", sa.Column("confidence", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("decisions", "confidence")
    op.drop_column("suggestions", "confidence")
