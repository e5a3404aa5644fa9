"""A collection's writes of documents: rows prepared and embedded, written per document
(or per batch) in one transaction under each document's advisory lock, and deleted.

:class:`DocumentWrites` is the write part of
:class:`~parrot_parents.stores.postgres.PgVectorStore`; it reads what it needs of the store
through :class:`WrittenStore`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Protocol

from langchain_core.documents import Document
from sqlalchemy import Table, Text, bindparam, delete, func, select, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncEngine

from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.identifiers import CollectionName
from parrot_parents.stores.partition_keys import keep_value, same_value
from parrot_parents.stores.postgres.collections.documents import DocumentsTable, DocumentState
from parrot_parents.stores.postgres.collections.filter_keys import LOOKUP_TTL_S, read_filter_keys
from parrot_parents.stores.postgres.collections.partitions import (
    ensure_partition_indexes,
    partition_values,
)
from parrot_parents.stores.postgres.collections.schema import HNSWIndex, meta_field
from parrot_parents.stores.postgres.collections.value_graphs import ensure_written_value_graphs
from parrot_parents.stores.postgres.connections.engine import store_errors
from parrot_parents.stores.postgres.connections.pools import through_catalog_change
from parrot_parents.stores.postgres.connections.reads import write
from parrot_parents.stores.postgres.search.bm25_guard import Bm25Guard
from parrot_parents.stores.postgres.writes.writer import DocumentWrite, write_batch
from parrot_parents.stores.protocols import DocumentWriteItem, Vectors
from parrot_parents.stores.records.markers import is_searchable
from parrot_parents.stores.records.rows import check_document_rows, embed_missing, prepare_rows

__all__ = ["DocumentWrites", "Opener", "WrittenStore", "lock_documents"]


class WrittenStore(Protocol):
    """What :class:`DocumentWrites` reads of its store."""

    name: CollectionName
    documents: DocumentsTable
    embedding: SentenceTransformerEmbeddings
    embed_batch_size: int

    #: The guard of the collection's ``bm25`` index, when it needs one (set on open).
    guard: Bm25Guard | None
    #: The collection's partition key, when it has one (set on open).
    partition_key: str | None
    hnsw: HNSWIndex

    @property
    def dimension(self) -> int: ...

    async def check_model(self, embedding: Any = None, *, writing: bool = False) -> None: ...

    async def close(self) -> None: ...


class Opener(Protocol):
    """How :class:`DocumentWrites` gets ``(engine, table)``: for a read (never creating
    the collection) or for a write (creating it when missing, as the store allows)."""

    async def ready(self) -> tuple[AsyncEngine, Table]: ...

    async def ready_to_write(self) -> tuple[AsyncEngine, Table]: ...


class DocumentWrites:
    """Writes a store's documents (the contracts are the store's methods of the same
    names)."""

    def __init__(self, store: WrittenStore, opener: Opener) -> None:
        self._store = store
        self._opener = opener
        # The collection's filter keys as last read, and when (another process may add
        # one: read again after ``LOOKUP_TTL_S``).
        self._keys: tuple[float, frozenset[str]] | None = None

    async def _filter_keys(self, conn: Any) -> frozenset[str]:
        """The collection's filter keys, read on the write's connection when stale."""
        now = time.monotonic()
        if self._keys is None or now - self._keys[0] >= LOOKUP_TTL_S:
            self._keys = (now, await conn.run_sync(read_filter_keys, self._store.name))
        return self._keys[1]

    async def _embed(self, rows: list[dict[str, Any]]) -> None:
        """Embed the children of ``rows`` without a vector, once the model passes the
        collection's check."""
        store = self._store
        if any(r["embedding"] is None and is_searchable(r["cmetadata"]) for r in rows):
            await store.check_model(writing=True)
        await embed_missing(rows, store.embedding, store.embed_batch_size)

    async def add_documents(
        self, documents: Sequence[Document], embeddings: Vectors | None
    ) -> list[str]:
        rows = prepare_rows(documents, embeddings, self._store.dimension)
        await self._embed(rows)
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            groups[row["cmetadata"]["document_id"]].append(row)
        for group in groups.values():
            await self._write([DocumentWrite(None, group)])
        return [r["id"] for r in rows]

    async def replace_documents(self, batch: Sequence[DocumentWriteItem]) -> list[list[str]]:
        dimension = self._store.dimension
        writes = []
        for document_id, documents, embeddings, record in batch:
            rows = check_document_rows(document_id, prepare_rows(documents, embeddings, dimension))
            writes.append(DocumentWrite(document_id, rows, record))
        await self._embed([r for w in writes for r in w.rows])
        await self._write(writes)
        return [[r["id"] for r in w.rows] for w in writes]

    async def _write(self, writes: Sequence[DocumentWrite]) -> None:
        """Write a batch of documents in one transaction; after a change of the server's
        catalog, once more on fresh connections."""
        await through_catalog_change(lambda: self._write_once(writes), self._store.close)

    async def _write_once(self, writes: Sequence[DocumentWrite]) -> None:
        store = self._store
        engine, table = await self._opener.ready_to_write()
        document_ids = {str(r["cmetadata"]["document_id"]) for w in writes for r in w.rows}
        document_ids |= {w.document_id for w in writes if w.document_id is not None}
        # ``= ANY`` keeps one prepared statement whatever the number of ids.
        delete_rows = delete(table).where(
            meta_field(table, "document_id")
            == func.any(bindparam("document_ids", type_=ARRAY(Text)))
        )

        guard = store.guard

        async def work(conn: Any) -> bool:
            due = await guard.lock(conn) if guard is not None else False
            key = store.partition_key
            if key is not None:
                # First in the write's transaction, before its rows take any lock on the
                # table: two writers of new values then queue on the builds' advisory
                # lock instead of deadlocking on the table (an index build waits for every
                # open write), and a value's rows are never searchable before its indexes.
                values = partition_values((r["cmetadata"] for w in writes for r in w.rows), key)
                m, ef = store.hnsw.m, store.hnsw.ef_construction
                await conn.run_sync(ensure_partition_indexes, table, key, values, m, ef)
            # A filter key's values that grow past the floor get graphs of their own,
            # built first for the same reason.
            keys = await self._filter_keys(conn)
            if keys:
                rows = [r for w in writes for r in w.rows]
                floor = store.hnsw.value_graph_floor
                await conn.run_sync(ensure_written_value_graphs, table, rows, floor, keys)
            await lock_documents(conn, store.name, document_ids)
            if key is not None:
                await keep_partition_values(conn, store.documents, writes, key)
                await keep_row_values(conn, table, writes, key)
            await write_batch(conn, table, store.documents, writes, delete_rows)
            return due

        if await write(engine, f"write to {store.name.qualified}", work):
            await self._maintain(engine, force=False)

    async def delete(self, document_id: str) -> int:
        store = self._store
        engine, table = await self._opener.ready()

        guard = store.guard

        async def work(conn: Any) -> tuple[int, bool]:
            due = await guard.lock(conn) if guard is not None else False
            await lock_documents(conn, store.name, [str(document_id)])
            result = await conn.execute(
                delete(table).where(meta_field(table, "document_id") == str(document_id))
            )
            await conn.execute(store.documents.delete(str(document_id)))
            return int(result.rowcount or 0), due

        removed, due = await write(engine, f"delete from {store.name.qualified}", work)
        if due:
            await self._maintain(engine, force=False)
        return removed

    async def vacuum(self) -> bool:
        """``VACUUM (ANALYZE)`` the collection's table now; a guarded ``bm25`` index is
        rebuilt first, under the guard's lock. Returns whether the guard's maintenance ran
        (False: a plain ``VACUUM``)."""
        engine, _ = await self._opener.ready()
        if self._store.guard is not None:
            return await self._maintain(engine, force=True)
        async with store_errors(f"vacuum {self._store.name.qualified}"), engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f"VACUUM (ANALYZE) {self._store.name.quoted()}"))
        return False

    async def _maintain(self, engine: AsyncEngine, *, force: bool) -> bool:
        """The guard's maintenance (rebuild, then vacuum, under its lock) when due."""
        guard = self._store.guard
        if guard is None:
            return False
        async with store_errors(f"maintain {self._store.name.qualified}"):
            return await guard.maintain(engine, force=force)


async def keep_partition_values(
    conn: Any, documents: DocumentsTable, writes: Sequence[DocumentWrite], key: str
) -> None:
    """Refuse the batch when a document written with a record (a loader's write) is
    stored under one value of the partition key ``key`` that the record changes
    (:func:`~parrot_parents.stores.partition_keys.keep_value`). Read under the
    documents' locks (:func:`lock_documents`), so of two writers of one new document
    under two values, the second sees the first's and is refused.

    Raises:
        ConfigurationError: the value would change (nothing of the batch is written).
    """
    given = {
        w.document_id: w.record.row_metadata
        for w in writes
        if w.document_id is not None and w.record is not None
    }
    if not given:
        return
    for row in await conn.execute(documents.states(sorted(given))):
        stored = DocumentState(*row[1:]).row_metadata
        new = given.get(row.document_id)
        if stored is not None and new is not None:
            keep_value(key, row.document_id, stored, new)


def _written_values(
    writes: Sequence[DocumentWrite], key: str
) -> dict[str, tuple[dict[str, Any], bool]]:
    """Per document written: the one value of ``key`` its new rows give it (``{key: v}``,
    or ``{}`` for none) and whether the write replaces it.

    Raises:
        ConfigurationError: the new rows of one document give it two values of ``key``.
    """
    out: dict[str, tuple[dict[str, Any], bool]] = {}
    for w in writes:
        given: dict[str, dict[str, Any]] = {}
        for row in w.rows:
            meta = row["cmetadata"]
            document_id = str(meta["document_id"])
            if key not in meta:
                given.setdefault(document_id, {})
                continue
            earlier = given.get(document_id)
            if earlier and not same_value(key, earlier, meta):
                raise ConfigurationError(
                    f"the rows of document {document_id!r} give it two values of {key}: "
                    f"{earlier[key]!r} and {meta[key]!r} (not written)",
                    hint="every row of a document holds one value of the partition key",
                )
            if not earlier:
                given[document_id] = {key: meta[key]}
        if w.document_id is not None:
            given.setdefault(str(w.document_id), {})
        for document_id, value in given.items():
            replaces = w.document_id is not None
            if value or document_id not in out:
                out[document_id] = (value, replaces)
    return out


async def keep_row_values(
    conn: Any, table: Table, writes: Sequence[DocumentWrite], key: str
) -> None:
    """Refuse the batch when it would move a document's rows to another value of the
    partition key ``key`` than its stored rows hold, on every write path (with a record
    or without, adding rows or replacing the document). One document id spanning two
    values would let a delete of one value's document remove another value's rows. Rows
    without a value may join a document (a document may be given a value), but a
    replace may not take its value away. Read under the documents' locks
    (:func:`lock_documents`).

    Raises:
        ConfigurationError: the value would change, or the new rows of one document give
            it two values (nothing of the batch is written).
    """
    written = _written_values(writes, key)
    if not written:
        return
    meta = table.c.cmetadata
    stored = await conn.execute(
        select(meta_field(table, "document_id"), meta[key])
        .where(
            meta_field(table, "document_id").in_(sorted(written)),
            meta.has_key(key),
        )
        .distinct()
    )
    for document_id, value in stored:
        given, replaces = written[document_id]
        if given or replaces:
            keep_value(key, document_id, {key: value}, given)


async def lock_documents(
    conn: Any, name: CollectionName, document_ids: Sequence[str] | set[str]
) -> None:
    """Serialise the writers of each document: a transaction-level advisory lock.

    Keyed on ``(hashtext(schema.table), hashtext(document_id))``; held until the transaction
    ends. Without it two concurrent ``replace_document`` calls each delete nothing the other
    has committed yet, and both versions stay. Ids are locked in sorted order (one
    statement, in the order of the array), so two writers of the same documents cannot
    deadlock. A hash collision only makes two writers wait for each other, never lose data.
    """
    ids = sorted({str(d) for d in document_ids})
    if not ids:
        return
    await conn.execute(
        text(
            "SELECT count(pg_advisory_xact_lock(hashtext(:t), hashtext(u.d))) FROM"
            " (SELECT d FROM unnest(CAST(:ids AS text[])) WITH ORDINALITY AS x(d, n)"
            " ORDER BY n) u"
        ),
        {"t": name.qualified, "ids": ids},
    )
