"""Opening a collection for reading, and creating it for writing, safely under concurrency.

A read never creates anything (:func:`collection_state`, :func:`missing_collection`).
:func:`prepare_collection` creates in one transaction under an advisory lock on
``schema.table`` (:func:`lock_creation`), so two first writers never race on the catalog;
a new collection's derived names must all be free (never adopted from another); and a table
without the collection's columns is refused with :class:`SchemaMismatchError` before any DDL.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, NamedTuple

from sqlalchemy import Connection, Table, text

from parrot_parents.errors import CollectionNotFoundError, ConfigurationError, SchemaMismatchError
from parrot_parents.stores.identifiers import SHORT_NAME_BYTES, derived_name
from parrot_parents.stores.postgres.collections.documents import DocumentsTable
from parrot_parents.stores.postgres.collections.layout import apply_layout
from parrot_parents.stores.postgres.collections.schema import HNSWIndex
from parrot_parents.stores.postgres.search.bm25_index import (
    LexicalBackend,
    LexicalChoice,
    auto_bm25,
    check_lexical_choice,
    drop_bm25,
    ensure_bm25,
    read_lexical_backend,
)
from parrot_parents.stores.postgres.search.lexical import (
    LexicalTables,
    drop_lexical,
    ensure_lexical,
    read_text_search_config,
)
from parrot_parents.stores.postgres.writes.writer import SERVER_MEMORY_SQL, build_memory_kb

__all__ = [
    "COLLECTION_COLUMNS",
    "DERIVED_RELATIONS",
    "DROP_LOCK_TIMEOUT",
    "CollectionState",
    "collection_state",
    "derived_names",
    "drop_collection",
    "missing_collection",
    "move_lexical_backend",
    "not_a_collection",
    "prepare_collection",
    "size_rebuild_memory",
]

#: The columns every collection table has
# (:mod:`parrot_parents.stores.postgres.collections.schema`).
COLLECTION_COLUMNS = frozenset({"id", "embedding", "document", "cmetadata"})

#: Suffixes of the relations (tables and indexes) a collection owns beside its table,
#: which share the schema's namespace with every other table and index.
DERIVED_RELATIONS = (
    "documents",
    "documents_sha",
    "lexicon",
    "lexstats",
    "embedding_hnsw",
    "parent_id_idx",
    "document_id_idx",
    "cmetadata_gin",
    "lexical_gin",
    "bm25",
)

_HELPER_TABLES = frozenset({"documents", "lexicon", "lexstats"})

#: Suffixes of a collection's other derived objects (a function, triggers on its table).
_OTHER_DERIVED = ("lexstats_fn", "lex_insert", "lex_delete", "lex_update")

#: How long a drop waits for its locks before it lets go of them and tries again.
DROP_LOCK_TIMEOUT = "200ms"

#: First key of every creation lock (``hashtext``), the second is the qualified name.
_CREATE_LOCK = "parrot_parents.create_collection"

CollectionState = Literal["missing", "collection", "other"]


class CollectionSetup(NamedTuple):
    """What a prepared collection's lexical index is."""

    text_search_config: str
    lexical_backend: LexicalBackend


def prepare_collection(
    conn: Connection,
    table: Table,
    config: str | None,
    documents: DocumentsTable,
    must_exist: bool = False,
    lexical: LexicalChoice = "auto",
) -> CollectionSetup:
    """Create the collection ``table`` when missing, or complete an existing one (schema,
    table, indexes, lexical column and statistics, row layout, ``bm25`` index, documents
    table), inside the caller's transaction, which holds the creation lock. ``config`` and
    ``lexical`` are a new collection's (an existing one keeps its own); ``must_exist``
    (a read) makes a missing collection :func:`missing_collection`.

    Returns:
        The collection's text-search configuration and lexical backend.

    Raises:
        CollectionNotFoundError: ``must_exist`` and the collection is missing.
        SchemaMismatchError: the name is a table that is not a collection, or the names
            of a new collection's objects are taken.
        ConfigurationError: ``config`` differs from the existing collection's, or
            ``lexical="pg_textsearch"`` on a server without pg_textsearch or on an existing
            collection without its index.
    """
    schema, name = str(table.schema), table.name
    if conn.execute(text("SELECT to_regnamespace(:s) IS NULL"), {"s": f'"{schema}"'}).scalar_one():
        if must_exist:
            raise missing_collection(schema, name)
        # Two first collections of a new schema would race on it: one lock per schema,
        # always taken before any collection's lock, so two creators never wait in a cycle.
        lock_creation(conn, schema, "")
        conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    lock_creation(conn, schema, name)
    state = collection_state(conn, schema, name)
    if state == "other":
        raise not_a_collection(schema, name)
    if state == "missing" and must_exist:
        raise missing_collection(schema, name)
    if state == "missing":
        check_names_free(conn, schema, name)
        table.metadata.create_all(conn, tables=[table], checkfirst=False)
    else:
        adopt_legacy_names(conn, schema, name)
    found = ensure_lexical(conn, name, schema, config)
    if state == "missing":
        # An existing collection is left as it is: the ALTER would lock its table against
        # every open writer (``parrot-parents migrate`` applies it on purpose).
        apply_layout(conn, schema, name)
    if state == "missing" and (
        lexical == "pg_textsearch" or (lexical == "auto" and auto_bm25(conn))
    ):
        ensure_bm25(conn, name, schema, found)
    backend = read_lexical_backend(conn, name, schema)
    check_lexical_choice(name, backend, lexical)
    documents.create(conn)
    return CollectionSetup(found, backend)


def move_lexical_backend(
    conn: Connection, schema: str, table: str, backend: LexicalBackend
) -> LexicalBackend:
    """Give an existing collection the lexical ``backend`` (building or dropping its
    ``bm25`` index) under its creation lock, in the caller's transaction; returns the
    backend it had.

    Raises:
        CollectionNotFoundError: no such collection.
        SchemaMismatchError: the name is a table that is not a collection.
        ConfigurationError: ``pg_textsearch`` on a server without pg_textsearch.
    """
    lock_creation(conn, schema, table)
    state = collection_state(conn, schema, table)
    if state == "other":
        raise not_a_collection(schema, table)
    if state == "missing":
        raise missing_collection(schema, table)
    before = read_lexical_backend(conn, table, schema)
    if backend == "pg_textsearch":
        config = read_text_search_config(conn, table, schema)
        if config is None:
            raise ConfigurationError(
                f"collection {table!r} has no lexical index",
                hint=f"run `parrot-parents migrate --collection {table}` first",
            )
        if before != "pg_textsearch":
            size_rebuild_memory(conn, schema, table)
        ensure_bm25(conn, table, schema, config)
    else:
        drop_bm25(conn, table, schema)
    return before


def size_rebuild_memory(conn: Connection, schema: str, table: str) -> int:
    """Give the rest of the transaction (``SET LOCAL``) the ``maintenance_work_mem`` an
    HNSW build of the collection needs (:func:`~parrot_parents.stores.postgres.writes.writer.
    build_memory_kb`, from the planner's row count, the vectors' dimension, the index's
    ``m`` and the server's memory settings); returns it in kB.

    Adding ``lexical_text`` rewrites the table and builds each of its indexes again, the
    HNSW graph too. With the server's default (64 MB) that graph stops fitting in memory
    after a few tens of thousands of children, and pgvector inserts the rest one by one
    on disk: hours at a million children instead of the minutes of a bulk load's build.
    """
    row = conn.execute(
        text(
            "SELECT greatest(c.reltuples, 0)::bigint, a.atttypmod,"
            " (SELECT o.option_value::int FROM pg_index i"
            "  JOIN pg_class ic ON ic.oid = i.indexrelid"
            "  JOIN pg_am am ON am.oid = ic.relam AND am.amname = 'hnsw',"
            "  pg_options_to_table(ic.reloptions) o"
            "  WHERE i.indrelid = c.oid AND o.option_name = 'm' LIMIT 1)"
            " FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
            " AND a.attname = 'embedding' WHERE c.oid = to_regclass(:name)"
        ),
        {"name": f'"{schema}"."{table}"'},
    ).one()
    rows, dimension, m = row
    server_kb, shared_kb = conn.execute(text(SERVER_MEMORY_SQL)).one()
    memory = build_memory_kb(
        int(rows),
        max(int(dimension), 1),
        int(m or HNSWIndex.m),
        server_kb=int(server_kb),
        shared_buffers_kb=int(shared_kb),
    )
    conn.execute(
        text("SELECT set_config('maintenance_work_mem', :mem, true)"), {"mem": f"{memory}kB"}
    )
    return memory


def lock_creation(conn: Connection, schema: str, table: str) -> None:
    """Take the creation lock of ``schema.table`` until the transaction ends.

    ``pg_advisory_xact_lock(hashtext(<key>), hashtext('schema.table'))``: exact for one
    name; a hash collision only makes two creations wait for each other.
    """
    conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtext(:k), hashtext(:n))"),
        {"k": _CREATE_LOCK, "n": f"{schema}.{table}"},
    )


def collection_state(conn: Connection, schema: str, table: str) -> CollectionState:
    """``missing`` (no relation of that name), ``collection`` (a table with
    :data:`COLLECTION_COLUMNS`) or ``other`` (a view, an index, another table)."""
    rows = conn.execute(
        text(
            "SELECT c.relkind::text, a.attname FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0"
            "   AND NOT a.attisdropped"
            " WHERE n.nspname = :schema AND c.relname = :table"
        ),
        {"schema": schema, "table": table},
    ).all()
    if not rows:
        return "missing"
    kinds = {r[0] for r in rows}
    columns = {r[1] for r in rows if r[1] is not None}
    if kinds <= {"r", "p"} and columns >= COLLECTION_COLUMNS:
        return "collection"
    return "other"


def missing_collection(schema: str, table: str) -> CollectionNotFoundError:
    """The error of a read on a collection that does not exist."""
    return CollectionNotFoundError(
        f"collection {table!r} does not exist in schema {schema!r}",
        hint="ingest into it first; names are case-sensitive",
    )


def not_a_collection(schema: str, table: str) -> SchemaMismatchError:
    """The error of a name that is a table (or view...) but not a collection."""
    columns = ", ".join(sorted(COLLECTION_COLUMNS))
    return SchemaMismatchError(
        f"{schema}.{table} exists but is not a collection (a collection's table has the "
        f"columns {columns}); nothing was read or changed",
        hint="choose another collection name",
    )


def taken_names(conn: Connection, schema: str, names: Iterable[str]) -> list[str]:
    """Those of ``names`` already held by a relation in ``schema``, sorted."""
    wanted = sorted(set(names))
    found = conn.execute(
        text(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = :schema AND c.relname = ANY(:names)"
        ),
        {"schema": schema, "names": wanted},
    ).all()
    return sorted(r[0] for r in found)


def check_names_free(conn: Connection, schema: str, table: str) -> None:
    """Refuse a new collection whose derived relations' names are held already.

    Raises:
        SchemaMismatchError: naming the objects found (another collection's, or
            leftovers), so nothing of theirs is adopted by the new collection.
    """
    taken = taken_names(conn, schema, (derived_name(table, s) for s in DERIVED_RELATIONS))
    if taken:
        raise SchemaMismatchError(
            f"cannot create collection {schema}.{table}: the names of its objects are "
            f"taken by existing relations ({', '.join(taken)}), which belong to another "
            "collection or were left behind",
            hint="choose another collection name; or, if they are what is left of a "
            "collection of this name whose table was dropped by hand, drop them first",
        )


def adopt_legacy_names(conn: Connection, schema: str, table: str) -> None:
    """Rename the objects of a collection made when derived names were the first 40
    characters of the table name, for a table name longer than that (a shorter one keeps
    its names). Idempotent; sync (``run_sync``), inside the creation lock.

    Those objects were made in one transaction with the table, so an old-style index of
    that prefix on this very table proves that every old-style object of the prefix is
    this collection's. Old triggers and the old function are dropped (the lexical set-up
    makes them again under the new names); tables and indexes are renamed.
    """
    if len(table.encode("utf-8")) <= SHORT_NAME_BYTES:
        return
    old = table[:SHORT_NAME_BYTES]
    owned = conn.execute(
        text(
            "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = to_regclass(:t) AND c.relname = :idx"
        ),
        {"t": f'"{schema}"."{table}"', "idx": f"{old}_document_id_idx"},
    ).scalar_one()
    if not owned:
        return
    qt = f'"{schema}"."{table}"'
    for suffix in ("lex_insert", "lex_delete", "lex_update"):
        conn.execute(text(f'DROP TRIGGER IF EXISTS "{old}_{suffix}" ON {qt}'))
    conn.execute(text(f'DROP FUNCTION IF EXISTS "{schema}"."{old}_lexstats_fn"() CASCADE'))
    present = set(taken_names(conn, schema, (f"{old}_{s}" for s in DERIVED_RELATIONS)))
    for suffix in DERIVED_RELATIONS:
        before, after = f"{old}_{suffix}", derived_name(table, suffix)
        if before in present and before != after:
            kind = "TABLE" if suffix in _HELPER_TABLES else "INDEX"
            conn.execute(text(f'ALTER {kind} "{schema}"."{before}" RENAME TO "{after}"'))


def derived_names(table: str) -> list[str]:
    """Every name derived from ``table`` (relations, the function and the triggers)."""
    return [derived_name(table, s) for s in (*DERIVED_RELATIONS, *_OTHER_DERIVED)]


def drop_collection(
    conn: Connection, table: Table, lexical: LexicalTables, documents: DocumentsTable
) -> None:
    """Drop a collection's table and the objects it owns (sync; in one transaction).

    Searches take their locks in different orders (a hybrid search the table, then the
    BM25 statistics; a lexical one the statistics, then the table), so no fixed order of
    the drop's locks is safe from both. The drop therefore takes every lock first, in one
    statement, waiting at most :data:`DROP_LOCK_TIMEOUT` (well under the server's
    ``deadlock_timeout``, 1 s by default): when a search holds one of them, the drop gives
    up its locks (SQLSTATE 55P03) before a deadlock could be detected, the search goes on,
    and the caller runs the drop again (``write(retry_lock_conflicts=True)``).
    """
    q = lexical.q
    present = [
        name
        for name in (q(lexical.table), q(lexical.stats_name), q(lexical.lexicon_name), documents.q)
        if conn.execute(text("SELECT to_regclass(:n) IS NOT NULL"), {"n": name}).scalar_one()
    ]
    if present:
        conn.execute(text("SELECT set_config('lock_timeout', :t, true)"), {"t": DROP_LOCK_TIMEOUT})
        conn.execute(text(f"LOCK TABLE {', '.join(present)} IN ACCESS EXCLUSIVE MODE"))
        conn.execute(text("SELECT set_config('lock_timeout', '0', true)"))
    table.drop(conn, checkfirst=True)
    drop_lexical(conn, table.name, str(table.schema))
    documents.drop(conn)
