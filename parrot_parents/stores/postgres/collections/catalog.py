"""What a database holds: its collections, their documents, and removing either.

A collection is a table with the columns of
:func:`~parrot_parents.stores.postgres.collections.schema.collection_table`: ``embedding``
of type ``vector``, ``document`` (text) and ``cmetadata`` (jsonb). Its helper tables (the
documents table, the BM25 statistics), the bots table and the migrations'
``alembic_version`` lack those columns, so they are never listed. Everything is read from
the catalog and the rows; no model is loaded and nothing is created.

The edges (``parrot-parents collections|documents|delete|drop`` and the HTTP routes
under ``/api/v1/collections``) call these functions and only format what they return.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from parrot_parents.errors import CollectionNotFoundError
from parrot_parents.stores.identifiers import CollectionName, collection_name, validate_identifier
from parrot_parents.stores.postgres.collections.documents import DocumentsTable
from parrot_parents.stores.postgres.collections.filter_keys import read_filter_keys
from parrot_parents.stores.postgres.collections.model_contract import ModelContract
from parrot_parents.stores.postgres.collections.partitions import read_partition_key
from parrot_parents.stores.postgres.collections.setup import stored_dimension
from parrot_parents.stores.postgres.connections.engine import UNDEFINED_TABLE, sqlstate_of
from parrot_parents.stores.postgres.connections.reads import read
from parrot_parents.stores.postgres.search.bm25_index import read_lexical_backend
from parrot_parents.stores.postgres.search.lexical import read_text_search_config
from parrot_parents.stores.records.markers import (
    CHILD_PREDICATE,
    INDEXED_PREDICATE,
    PARENT_PREDICATE,
)

__all__ = [
    "CollectionInfo",
    "DeleteReport",
    "DocumentInfo",
    "collection_names",
    "delete_documents",
    "drop_collection",
    "list_collections",
    "list_documents",
]

_COLLECTIONS = text(
    "SELECT c.relname FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = :schema AND c.relkind IN ('r', 'p')"
    " AND (SELECT count(*) FROM pg_attribute a"
    "      LEFT JOIN pg_type t ON t.oid = a.atttypid"
    "      WHERE a.attrelid = c.oid AND NOT a.attisdropped AND a.attnum > 0"
    "      AND ((a.attname = 'embedding' AND t.typname = 'vector')"
    "        OR (a.attname = 'document' AND t.typname = 'text')"
    "        OR (a.attname = 'cmetadata' AND t.typname = 'jsonb'))) = 3"
    " ORDER BY c.relname"
)


@dataclass(frozen=True)
class CollectionInfo:
    """One collection, as :func:`list_collections` finds it.

    Attributes:
        name: the table name.
        schema: its PostgreSQL schema.
        children: child rows (the searched units).
        parents: parent rows (whole documents and parent chunks).
        indexed: rows an ingestion strategy wrote (searched in place of a child).
        documents: documents-table rows; None for a collection without that table.
        dimension: the ``vector(n)`` length of ``embedding``; None when untyped.
        embedding_model: the name of the embedding model the collection records
            (:mod:`parrot_parents.stores.postgres.collections.model_contract`); None when it
            records none.
        model_fingerprint: that model's fingerprint digest (12 hex characters), or None.
        reembedding: True while ``reindex --model`` has not finished (its vectors are of
            two models; embedding searches are refused until it has).
        strategies: the ingestion strategies its documents were indexed with
            (``plain`` for documents ingested without one), sorted.
        lexical_backend: what ranks its BM25, ``pg_textsearch`` or ``sql``
            (:mod:`parrot_parents.stores.postgres.search.bm25_index`); None without a lexical
            column.
        text_search_config: the lexical column's configuration (``english``...), or None.
        partition_key: the metadata key whose values each have an HNSW index
            (:mod:`~parrot_parents.stores.postgres.collections.partitions`), or None.
        filter_keys: the metadata keys with a B-tree index of their value and planner
            statistics (:mod:`~parrot_parents.stores.postgres.collections.filter_keys`),
            sorted.
    """

    name: str
    schema: str
    children: int
    parents: int
    indexed: int
    documents: int | None
    dimension: int | None
    embedding_model: str | None
    model_fingerprint: str | None = None
    reembedding: bool = False
    strategies: list[str] = field(default_factory=list)
    lexical_backend: str | None = None
    text_search_config: str | None = None
    partition_key: str | None = None
    filter_keys: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the attributes."""
        return asdict(self)


@dataclass(frozen=True)
class DocumentInfo:
    """One document of a collection, as :func:`list_documents` finds it.

    Attributes:
        document_id: the id its rows carry.
        source: the file it came from; None for documents given in code.
        characters: the length of its text in characters; None when the collection has
            no documents-table row for it.
        children: its child rows.
        parents: its parent rows.
        ingested_at: when it was last written; None without a documents-table row.
    """

    document_id: str
    source: str | None
    characters: int | None
    children: int
    parents: int
    ingested_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``ingested_at`` as ISO 8601 text, or None)."""
        data = asdict(self)
        data["ingested_at"] = None if self.ingested_at is None else self.ingested_at.isoformat()
        return data


@dataclass(frozen=True)
class DeleteReport:
    """What :func:`delete_documents` did.

    Attributes:
        deleted: ``{document_id: rows removed}`` of the documents that existed.
        unknown: the ids that name no document of the collection, in the order given.
    """

    deleted: dict[str, int]
    unknown: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"deleted": dict(self.deleted), "unknown": list(self.unknown)}


async def _names(conn: AsyncConnection, schema: str) -> list[str]:
    return [r[0] for r in (await conn.execute(_COLLECTIONS, {"schema": schema})).all()]


async def _exists(conn: AsyncConnection, schema: str, name: str) -> bool:
    found = await conn.execute(
        text("SELECT to_regclass(format('%I.%I', CAST(:s AS text), CAST(:t AS text)))"),
        {"s": schema, "t": name},
    )
    return found.scalar_one() is not None


async def _documents(conn: AsyncConnection, name: CollectionName) -> str:
    """The collection's documents table, or an empty relation of its columns for a
    collection without one."""
    docs = DocumentsTable(name)
    if await _exists(conn, name.schema, docs.name):
        return docs.q
    return (
        "(SELECT NULL::text AS document_id, NULL::text AS source, NULL::text AS source_text,"
        " NULL::timestamptz AS ingested_at WHERE false)"
    )


async def _require(conn: AsyncConnection, name: CollectionName) -> None:
    """Raise unless ``name`` is a collection table."""
    if name.table not in await _names(conn, name.schema):
        raise CollectionNotFoundError(
            f"collection {name.table!r} does not exist in schema {name.schema!r}",
            hint="`parrot-parents collections` lists them; names are case-sensitive",
        )


async def _info(conn: AsyncConnection, schema: str, name: str) -> CollectionInfo:
    # A name the server lists is a table's own: quoted, never validated again.
    collection = CollectionName(schema, name)
    row = (
        await conn.execute(
            text(
                f"SELECT count(*) FILTER (WHERE {CHILD_PREDICATE}) AS children,"
                f" count(*) FILTER (WHERE {PARENT_PREDICATE}) AS parents,"
                f" count(*) FILTER (WHERE {INDEXED_PREDICATE}) AS indexed,"
                " coalesce(array_agg(DISTINCT coalesce("
                "   cmetadata->'ingestion'->>'strategy', 'plain'))"
                f"   FILTER (WHERE {PARENT_PREDICATE}), ARRAY[]::text[]) AS strategies"
                f" FROM {collection.quoted()}"
            )
        )
    ).one()
    docs = DocumentsTable(collection)
    documents = None
    if await _exists(conn, schema, docs.name):
        documents = int((await conn.execute(text(f"SELECT count(*) FROM {docs.q}"))).scalar_one())
    config = await conn.run_sync(read_text_search_config, name, schema)
    record = await ModelContract(collection).read(conn)
    return CollectionInfo(
        name=name,
        schema=schema,
        children=int(row.children),
        parents=int(row.parents),
        indexed=int(row.indexed),
        documents=documents,
        dimension=await stored_dimension(conn, schema, name),
        embedding_model=None if record is None else record.model.name,
        model_fingerprint=None if record is None else record.model.digest,
        reembedding=record is not None and record.reembedding,
        strategies=sorted(row.strategies),
        lexical_backend=(
            None if config is None else await conn.run_sync(read_lexical_backend, name, schema)
        ),
        text_search_config=config,
        partition_key=await conn.run_sync(read_partition_key, name, schema),
        filter_keys=sorted(await conn.run_sync(read_filter_keys, CollectionName(schema, name))),
    )


async def _info_if_kept(conn: AsyncConnection, schema: str, name: str) -> CollectionInfo | None:
    """``name``'s :class:`CollectionInfo`, or None when another client dropped it after
    its name was read (its count waits for the drop's lock, then finds no table)."""
    try:
        return await _info(conn, schema, name)
    except DBAPIError as exc:
        if sqlstate_of(exc) == UNDEFINED_TABLE:
            return None
        raise


async def list_collections(engine: AsyncEngine, schema: str = "public") -> list[CollectionInfo]:
    """Every collection of ``schema``, by name, with its row counts and settings; each
    collection's rows are counted once. A collection dropped by another client while it
    is listed is left out.

    Raises:
        ConfigurationError: a bad schema name.
        StoreError: the database cannot be reached.
    """
    validate_identifier(schema, "schema")

    async def work(conn: AsyncConnection) -> list[CollectionInfo]:
        found = [await _info_if_kept(conn, schema, name) for name in await _names(conn, schema)]
        return [info for info in found if info is not None]

    return await read(engine, f"listing the collections of {schema!r}", work)


async def list_documents(
    engine: AsyncEngine, collection: str, schema: str = "public"
) -> list[DocumentInfo]:
    """The documents of a collection, by id: from its documents table and its rows.

    A document with rows but no documents-table row (written by ``add_documents``, or
    before the table existed) is listed with ``characters`` and ``ingested_at`` None.

    Raises:
        ConfigurationError: a bad collection or schema name.
        CollectionNotFoundError: no such collection.
        StoreError: the database cannot be reached.
    """
    name = collection_name(collection, schema, reserved=True)
    rows_sql = (
        "SELECT cmetadata->>'document_id' AS document_id,"
        f" count(*) FILTER (WHERE {CHILD_PREDICATE}) AS children,"
        f" count(*) FILTER (WHERE {PARENT_PREDICATE}) AS parents,"
        " max(cmetadata->>'source') AS source"
        f" FROM {name.quoted()} WHERE cmetadata ? 'document_id' GROUP BY 1"
    )

    async def work(conn: AsyncConnection) -> list[Any]:
        await _require(conn, name)
        sql = (
            f"WITH r AS ({rows_sql})"
            " SELECT coalesce(d.document_id, r.document_id) AS document_id,"
            " coalesce(d.source, r.source) AS source,"
            " length(d.source_text) AS characters, d.ingested_at,"
            " coalesce(r.children, 0) AS children, coalesce(r.parents, 0) AS parents"
            f" FROM {await _documents(conn, name)} d FULL JOIN r ON r.document_id = d.document_id"
            " ORDER BY 1"
        )
        return list((await conn.execute(text(sql))).all())

    rows = await read(engine, f"listing the documents of {name.qualified}", work)
    # The statements name their columns as DocumentInfo's fields.
    return [DocumentInfo(**r._mapping) for r in rows]


async def _open(engine: AsyncEngine, name: CollectionName) -> Any:
    """The collection's store on ``engine``, without its model (the table gives the
    dimension); a :class:`~parrot_parents.stores.postgres.PgVectorStore`."""
    from parrot_parents.stores.postgres import PgVectorStore

    await read(engine, f"opening {name.qualified}", lambda conn: _require(conn, name))
    return PgVectorStore(engine=engine, table=name.table, schema=name.schema, create=False)


async def _known(engine: AsyncEngine, name: CollectionName, document_ids: list[str]) -> set[str]:
    """Those of ``document_ids`` that have rows or a documents-table row."""

    async def work(conn: AsyncConnection) -> set[str]:
        sql = (
            f"SELECT DISTINCT cmetadata->>'document_id' FROM {name.quoted()}"
            " WHERE cmetadata->>'document_id' = ANY(CAST(:ids AS text[]))"
            f" UNION SELECT document_id FROM {await _documents(conn, name)} d"
            " WHERE document_id = ANY(CAST(:ids AS text[]))"
        )
        rows = (await conn.execute(text(sql), {"ids": document_ids})).all()
        return {r[0] for r in rows}

    return await read(engine, f"reading {name.qualified}", work)


async def delete_documents(
    engine: AsyncEngine,
    collection: str,
    document_ids: Sequence[str],
    schema: str = "public",
) -> DeleteReport:
    """Delete documents from a collection: their children, parents and indexed rows and
    their documents-table row, one document per transaction (the store's
    :meth:`~parrot_parents.stores.postgres.PgVectorStore.delete`; the BM25 statistics are
    kept exact by the collection's triggers).

    Args:
        document_ids: the ids to delete; repeats count once.

    Returns:
        The rows removed per known id, and the ids that name no document.

    Raises:
        ConfigurationError: a bad collection or schema name.
        CollectionNotFoundError: no such collection.
        StoreError: the database cannot be reached.
    """
    name = collection_name(collection, schema, reserved=True)
    wanted = list(dict.fromkeys(str(d) for d in document_ids))
    store = await _open(engine, name)
    try:
        known = await _known(engine, name, wanted)
        deleted = {d: await store.delete(d) for d in wanted if d in known}
    finally:
        await store.close()
    return DeleteReport(deleted=deleted, unknown=[d for d in wanted if d not in known])


async def drop_collection(engine: AsyncEngine, collection: str, schema: str = "public") -> None:
    """Drop a collection: its table, documents table and lexical statistics, at once.

    Raises:
        ConfigurationError: a bad collection or schema name.
        CollectionNotFoundError: no such collection.
        StoreError: the database cannot be reached.
    """
    async with await _open(engine, collection_name(collection, schema, reserved=True)) as store:
        await store.drop()


async def collection_names(engine: AsyncEngine, schema: str = "public") -> list[str]:
    """The names of the collections of ``schema``, sorted; nothing else is read.

    Raises:
        ConfigurationError: a bad schema name.
        StoreError: the database cannot be reached.
    """
    validate_identifier(schema, "schema")
    action = f"listing the collections of {schema!r}"
    return await read(engine, action, lambda conn: _names(conn, schema))
