"""Collections: the vector extension and the named collection tables with their indexes.

The collections are named by ``parrot-parents migrate --collection NAME`` (or alembic's
``-x collections=a,b``); see :mod:`parrot_parents.migrations.collection_tables`. The
downgrade drops the collections named for it, and only those.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import context, op

from parrot_parents.migrations.collection_tables import (
    drop_collections,
    ensure_collections,
    migration_options,
)

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    names, dimension, schema = migration_options()
    created = ensure_collections(op.get_bind(), names, dimension, schema)
    context.config.attributes.setdefault("created", []).extend(created)


def downgrade() -> None:
    names, _, schema = migration_options()
    drop_collections(op.get_bind(), names, schema)
