"""Documents and chunk policy: a documents table per named collection, backfilled.

For every collection named with ``--collection``: its lexical column is re-created when it
predates retrieval preambles
(:func:`parrot_parents.stores.postgres.search.lexical.ensure_lexical`), and
``<collection>_documents`` is created and filled from the stored parents, with a NULL
policy version, so that ``parrot-parents reindex --stale`` re-cuts those documents
(:func:`parrot_parents.stores.postgres.collections.documents.backfill_documents`). Other
collections get the table when a store opens them, and their rows as they are ingested
again.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect

from parrot_parents.migrations.collection_tables import migration_options
from parrot_parents.stores.identifiers import collection_name
from parrot_parents.stores.postgres.collections.documents import DocumentsTable, backfill_documents
from parrot_parents.stores.postgres.search.lexical import ensure_lexical

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    names, _, schema = migration_options()
    conn = op.get_bind()
    for name in names:
        if inspect(conn).has_table(name, schema=schema):
            ensure_lexical(conn, name, schema)
            backfill_documents(conn, name, schema)


def downgrade() -> None:
    names, _, schema = migration_options()
    conn = op.get_bind()
    for name in names:
        DocumentsTable(collection_name(name, schema, reserved=True)).drop(conn)
