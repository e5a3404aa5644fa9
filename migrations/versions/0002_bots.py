"""Bots: one row per database-driven bot, with CHECK constraints and an updated_at trigger.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

# The same ranges as parrot_parents.bots.config.BotSettings (tested to agree).
_MODE = r"^(parent|auto_merge:(0*\.[0-9]*[1-9][0-9]*|0*1(\.0*)?)|window:0*[1-9][0-9]{0,5})$"


def _is_object_with_type(column: str) -> str:
    # coalesce: a missing 'type' gives NULL, which a CHECK would let through.
    return (
        f"{column} IS NULL OR coalesce(jsonb_typeof({column}) = 'object'"
        f" AND jsonb_typeof({column} -> 'type') = 'string', false)"
    )


def upgrade() -> None:
    op.create_table(
        "bots",
        sa.Column("id", sa.BigInteger, sa.Identity(always=True), primary_key=True),
        sa.Column("name", sa.Text, nullable=False, unique=True),
        sa.Column("description", sa.Text, nullable=False, server_default=""),
        sa.Column("collection", sa.Text, nullable=False),
        sa.Column("expand_to_parent", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("expansion_mode", sa.Text, nullable=False, server_default="parent"),
        sa.Column("context_search_limit", sa.Integer, nullable=False, server_default="10"),
        sa.Column("context_budget", sa.Integer, nullable=True),
        sa.Column("reranker_config", JSONB, nullable=True),
        sa.Column(
            "parent_searcher_config",
            JSONB,
            nullable=True,
            server_default=sa.text("""'{"type": "in_table"}'::jsonb"""),
        ),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint(r"name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'", name="bots_name_format"),
        sa.CheckConstraint("char_length(description) <= 2000", name="bots_description_length"),
        sa.CheckConstraint(
            "collection ~ '^[A-Za-z_][A-Za-z0-9_]{0,62}$'", name="bots_collection_identifier"
        ),
        sa.CheckConstraint(f"expansion_mode ~ '{_MODE}'", name="bots_expansion_mode_format"),
        sa.CheckConstraint(
            "context_search_limit BETWEEN 1 AND 1000", name="bots_context_search_limit_range"
        ),
        sa.CheckConstraint(
            "context_budget IS NULL OR context_budget BETWEEN 1 AND 10000000",
            name="bots_context_budget_range",
        ),
        sa.CheckConstraint(
            _is_object_with_type("reranker_config"), name="bots_reranker_config_object"
        ),
        sa.CheckConstraint(
            _is_object_with_type("parent_searcher_config"),
            name="bots_parent_searcher_config_object",
        ),
        sa.CheckConstraint(
            "NOT expand_to_parent OR parent_searcher_config IS NOT NULL",
            name="bots_expansion_needs_searcher",
        ),
    )
    op.execute(
        """
        CREATE FUNCTION parrot_parents_touch_updated_at() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            NEW.updated_at := clock_timestamp();
            RETURN NEW;
        END
        $$
        """
    )
    op.execute(
        "CREATE TRIGGER bots_touch_updated_at BEFORE UPDATE ON bots"
        " FOR EACH ROW EXECUTE FUNCTION parrot_parents_touch_updated_at()"
    )


def downgrade() -> None:
    op.drop_table("bots")
    op.execute("DROP FUNCTION IF EXISTS parrot_parents_touch_updated_at()")
