"""A bot's ``context_search_limit`` may be NULL: it then follows the package default.

The default depends on the budget (10 children, or 20 when a budget is set; see
:mod:`parrot_parents.retrieval.options`), so a new row stores NULL rather than a number.
Existing rows keep the value they hold. The range check now matches the options' limit
(1..100); it is added ``NOT VALID``, so an old out-of-range row is not rewritten here
(loading that bot already reports it).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.alter_column("bots", "context_search_limit", nullable=True, server_default=None)
    op.drop_constraint("bots_context_search_limit_range", "bots", type_="check")
    op.execute(
        "ALTER TABLE bots ADD CONSTRAINT bots_context_search_limit_range CHECK"
        " (context_search_limit IS NULL OR context_search_limit BETWEEN 1 AND 100) NOT VALID"
    )


def downgrade() -> None:
    op.drop_constraint("bots_context_search_limit_range", "bots", type_="check")
    op.execute("UPDATE bots SET context_search_limit = 10 WHERE context_search_limit IS NULL")
    op.alter_column("bots", "context_search_limit", nullable=False, server_default="10")
    op.create_check_constraint(
        "bots_context_search_limit_range", "bots", "context_search_limit BETWEEN 1 AND 1000"
    )
