"""A bot's ``prf``: pseudo-relevance feedback (RM3) in the lexical branch.

NULL follows the package default, so existing rows keep their behaviour.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("bots", sa.Column("prf", sa.Boolean, nullable=True))


def downgrade() -> None:
    op.drop_column("bots", "prf")
