"""A bot's ``rerank_candidates``: children searched before reranking.

NULL follows the package default, so existing rows keep their behaviour.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("bots", sa.Column("rerank_candidates", sa.Integer, nullable=True))
    op.create_check_constraint(
        "bots_rerank_candidates_range",
        "bots",
        "rerank_candidates IS NULL OR rerank_candidates BETWEEN 1 AND 1000",
    )


def downgrade() -> None:
    op.drop_column("bots", "rerank_candidates")
