"""The scheme's shift a stored probability holds: the Link page shows each candidate's calibrated
probability shifted to the scheme's own decisions (``scheme_offset``) and stores what it showed;
the next shift must be fitted on the calibrator's own probabilities, so the shift is stored beside
it and taken out. Existing rows keep NULL: read as no shift (the second-order error they carry
fades as new terms are linked).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("suggestions", sa.Column("confidence_offset", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("suggestions", "confidence_offset")
