"""Hybrid search: per-bot search settings, and a lexical index on the named collections.

The bot columns are nullable: NULL follows the package default. Collections named with
``--collection`` get their lexical column, GIN index and BM25 statistics; others get them
when a store with ``create=True`` opens them.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("bots", sa.Column("search_mode", sa.Text, nullable=True))
    op.add_column("bots", sa.Column("rrf_k", sa.Integer, nullable=True))
    op.add_column("bots", sa.Column("dense_weight", sa.Float, nullable=True))
    op.add_column("bots", sa.Column("lexical_weight", sa.Float, nullable=True))
    op.create_check_constraint(
        "bots_search_mode_value",
        "bots",
        "search_mode IS NULL OR search_mode IN ('dense', 'lexical', 'hybrid')",
    )
    op.create_check_constraint(
        "bots_rrf_k_range", "bots", "rrf_k IS NULL OR rrf_k BETWEEN 1 AND 1000"
    )
    op.create_check_constraint(
        "bots_fusion_weights_range",
        "bots",
        "(dense_weight IS NULL OR dense_weight BETWEEN 0 AND 10)"
        " AND (lexical_weight IS NULL OR lexical_weight BETWEEN 0 AND 10)",
    )


def downgrade() -> None:
    for column in ("lexical_weight", "dense_weight", "rrf_k", "search_mode"):
        op.drop_column("bots", column)
