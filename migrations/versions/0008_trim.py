"""A bot's ``trim``: sentence trimming of the hits under a context budget.

NULL follows the package default, so existing rows keep their behaviour.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("bots", sa.Column("trim", sa.Boolean, nullable=True))


def downgrade() -> None:
    op.drop_column("bots", "trim")
