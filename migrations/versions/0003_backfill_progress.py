"""Backfill checkpoints: where the marker backfill of each collection got to.

One row per collection, updated in each batch's transaction
(:mod:`parrot_parents.stores.postgres.collections.backfill`).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "parrot_parents_backfill",
        sa.Column("collection_schema", sa.Text, primary_key=True),
        sa.Column("collection", sa.Text, primary_key=True),
        sa.Column("last_id", sa.Text, nullable=True),
        sa.Column("scanned", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("updated", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("batches", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column(
            "started_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "scanned >= 0 AND updated >= 0 AND batches >= 0 AND updated <= scanned",
            name="parrot_parents_backfill_counts",
        ),
    )


def downgrade() -> None:
    op.drop_table("parrot_parents_backfill")
