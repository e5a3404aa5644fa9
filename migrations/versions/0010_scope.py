"""A bot's ``scope``: a metadata filter every search of the bot holds to.

NULL is no scope (the whole collection), so existing rows keep their behaviour.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("bots", sa.Column("scope", JSONB, nullable=True))
    # Its filter language is checked by the package on every write; the database keeps
    # at least its shape.
    op.create_check_constraint(
        "bots_scope_object", "bots", "scope IS NULL OR jsonb_typeof(scope) = 'object'"
    )


def downgrade() -> None:
    op.drop_constraint("bots_scope_object", "bots", type_="check")
    op.drop_column("bots", "scope")
