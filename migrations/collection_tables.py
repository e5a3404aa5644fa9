"""Collection tables in the migrations: created and dropped with the store's own definition.

The table and its indexes come from
:func:`parrot_parents.stores.postgres.collections.schema.collection_table`,
so a collection created by ``parrot-parents migrate`` is identical to one the store creates
on first use.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import Connection, MetaData, inspect, text

from parrot_parents.stores.identifiers import collection_name, validate_identifier
from parrot_parents.stores.postgres.collections.documents import DocumentsTable, backfill_documents
from parrot_parents.stores.postgres.collections.layout import apply_layout
from parrot_parents.stores.postgres.collections.schema import collection_table
from parrot_parents.stores.postgres.search.bm25_index import auto_bm25, ensure_bm25
from parrot_parents.stores.postgres.search.lexical import drop_lexical, ensure_lexical

__all__ = ["drop_collections", "ensure_collections", "migration_options"]


log = logging.getLogger(__name__)

#: Embedding length of collections created by a migration run without ``dimension``
#: (all-MiniLM-L6-v2).
DEFAULT_DIMENSION = 384


def migration_options() -> tuple[list[str], int, str]:
    """``(collections, dimension, schema)`` of the running migration.

    Read from ``Config.attributes`` (set by :func:`parrot_parents.migrations.alembic_config`)
    or, when alembic runs from its own command line, from ``-x collections=a,b``,
    ``-x dimension=384`` and ``-x schema=public``.
    """
    from alembic import context

    attrs = context.config.attributes
    x = context.get_x_argument(as_dictionary=True)
    names = attrs.get("collections")
    if names is None:
        names = [n for n in x.get("collections", "").split(",") if n.strip()]
    dimension = int(attrs.get("dimension") or x.get("dimension") or DEFAULT_DIMENSION)
    schema = attrs.get("schema") or x.get("schema") or "public"
    return [validate_identifier(n.strip(), "collection") for n in names], dimension, schema


def ensure_collections(
    conn: Connection, names: Sequence[str], dimension: int, schema: str = "public"
) -> list[str]:
    """Create the missing collection tables (and the extension/schema); return those created.

    Existing tables keep their content; every named collection gets its lexical index and
    BM25 statistics when it lacks them
    (:func:`~parrot_parents.stores.postgres.search.lexical.ensure_lexical`), and its
    documents table, backfilled from its parents
    (:func:`~parrot_parents.stores.postgres.collections.documents.backfill_documents`). A
    collection created here gets the lexical backend a store would give it: pg_textsearch's
    ``bm25`` index where the server has it
    (:mod:`parrot_parents.stores.postgres.search.bm25_index`); an existing one keeps its
    own. Every named collection gets the row layout of
    :mod:`parrot_parents.stores.postgres.collections.layout` (existing rows keep theirs
    until the table is rewritten, e.g. by ``VACUUM FULL``).
    """
    validate_identifier(schema, "schema")
    conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    created = []
    for name in names:
        if not inspect(conn).has_table(name, schema=schema):
            table = collection_table(name, dimension, schema=schema, metadata=MetaData())
            table.metadata.create_all(conn, checkfirst=True)
            created.append(name)
        config = ensure_lexical(conn, name, schema)
        if apply_layout(conn, schema, name) and name not in created:
            log.warning(
                "collection %s.%s keeps its vectors, metadata and tsvector in the row from "
                "now on; VACUUM FULL on the table moves the rows already there (it locks "
                "the table while it rewrites it)",
                schema,
                name,
            )
        if name in created and auto_bm25(conn):
            ensure_bm25(conn, name, schema, config)
        backfill_documents(conn, name, schema)
    return created


def drop_collections(conn: Connection, names: Sequence[str], schema: str = "public") -> None:
    """Drop the named collection tables (with their indexes) when they exist."""
    validate_identifier(schema, "schema")
    for name in names:
        validate_identifier(name, "collection")
        conn.execute(text(f'DROP TABLE IF EXISTS "{schema}"."{name}"'))
        drop_lexical(conn, name, schema)
        DocumentsTable(collection_name(name, schema, reserved=True)).drop(conn)
