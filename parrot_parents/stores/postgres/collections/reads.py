"""A collection's reads other than searches: rows by parent, by chunk range and by
document, sources, content hashes, ingestion records, the documents table and counts;
each one statement on the engine.

:class:`CollectionReads` is a part of :class:`~parrot_parents.stores.postgres.PgVectorStore`
(whose methods of the same names give the contracts).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import Integer, Table, and_, func, or_, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.identifiers import CollectionName
from parrot_parents.stores.postgres.collections.documents import (
    DocumentRecord,
    DocumentsTable,
    DocumentState,
)
from parrot_parents.stores.postgres.collections.schema import meta_field
from parrot_parents.stores.postgres.connections.reads import read
from parrot_parents.stores.records.markers import (
    CHILD_PREDICATE,
    NOT_INDEXED_PREDICATE,
    PARENT_PREDICATE,
)
from parrot_parents.stores.results import DocumentRow, SearchResult

__all__ = ["CollectionReads", "all_rows"]


def _unique(values: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(str(v) for v in values))


def _rows_of(table: Table) -> Any:
    """``SELECT id, document, cmetadata``: the rows :meth:`CollectionReads._grouped` groups."""
    return select(table.c.id, table.c.document, table.c.cmetadata)


class CollectionReads:
    """Reads the collection ``name``, whose documents table is ``documents``; ``ready``
    gives ``(engine, table)``, connecting first (the store's :meth:`ready`)."""

    def __init__(
        self,
        name: CollectionName,
        documents: DocumentsTable,
        ready: Callable[[], Awaitable[tuple[AsyncEngine, Table]]],
    ) -> None:
        self._name = name
        self._documents = documents
        self._ready = ready

    async def _rows(self, statement: Any, what: str = "read from") -> list[Any]:
        engine, _ = await self._ready()
        return await read(engine, f"{what} {self._name.qualified}", all_rows(statement))

    async def _table(self) -> Table:
        return (await self._ready())[1]

    async def fetch_children(self, parent_ids: Sequence[str]) -> dict[str, list[SearchResult]]:
        ids = _unique(parent_ids)
        if not ids:
            return {}
        table = await self._table()
        parent_key = meta_field(table, "parent_document_id")
        stmt = _rows_of(table).where(parent_key.in_(ids))
        order = meta_field(table, "start_index").cast(Integer)
        return await self._grouped(stmt.order_by(parent_key, order), "parent_document_id")

    async def fetch_chunk_ranges(
        self, ranges: Sequence[tuple[str, int, int]]
    ) -> dict[str, list[SearchResult]]:
        if not ranges:
            return {}
        table = await self._table()
        doc_key = meta_field(table, "document_id")
        index = meta_field(table, "chunk_index").cast(Integer)
        cond = or_(
            *[and_(doc_key == str(d), index.between(int(lo), int(hi))) for d, lo, hi in ranges]
        )
        stmt = _rows_of(table).where(text(CHILD_PREDICATE)).where(cond).order_by(doc_key, index)
        return await self._grouped(stmt, "document_id")

    async def _grouped(self, stmt: Any, key: str) -> dict[str, list[SearchResult]]:
        """Run ``stmt`` (id, document, cmetadata) and group the rows by a metadata key."""
        out: dict[str, list[SearchResult]] = defaultdict(list)
        for r in await self._rows(stmt):
            meta = dict(r.cmetadata or {})
            out[str(meta[key])].append(SearchResult(id=r.id, content=r.document, metadata=meta))
        return dict(out)

    async def document_sources(self, document_ids: Sequence[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        ids = _unique(document_ids)
        if ids:
            table = await self._table()
            doc = meta_field(table, "document_id")
            source = table.c.cmetadata["source"].astext
            stmt = select(doc.label("doc"), source.label("source")).where(doc.in_(ids)).distinct()
            for r in await self._rows(stmt):
                out.setdefault(r.doc, set())
                if r.source is not None:
                    out[r.doc].add(r.source)
        return out

    async def document_rows(self, document_id: str) -> list[DocumentRow]:
        if not isinstance(document_id, str) or not document_id:
            raise ConfigurationError(f"document_id must be a non-empty string, got {document_id!r}")
        table = await self._table()
        # NULL (a child without markers) must sort with the children, not first.
        parents_first = text(f"coalesce({PARENT_PREDICATE}, false) DESC")
        stmt = (
            select(
                table.c.id,
                table.c.cmetadata,
                func.char_length(table.c.document).label("length"),
            )
            .where(meta_field(table, "document_id") == document_id)
            # Indexed rows are not spans of the document: they are not listed.
            .where(text(NOT_INDEXED_PREDICATE))
            .order_by(
                parents_first,
                meta_field(table, "start_index").cast(Integer),
                table.c.id,
            )
        )
        rows = await self._rows(stmt)
        return [DocumentRow.from_row(r.id, dict(r.cmetadata or {}), int(r.length)) for r in rows]

    async def ingestion_records(self) -> dict[str, dict[str, Any]]:
        table = await self._table()
        doc = meta_field(table, "document_id")
        stmt = (
            select(doc.label("doc"), table.c.cmetadata["ingestion"].label("record"))
            .where(text(PARENT_PREDICATE))
            .where(table.c.cmetadata.has_key("ingestion"))
            .distinct(doc)
            .order_by(doc)
        )
        rows = await self._rows(stmt)
        return {r.doc: dict(r.record) for r in rows if isinstance(r.record, dict)}

    async def documents_with_content(self, digests: Sequence[str]) -> dict[str, set[str]]:
        wanted = _unique(digests)
        if not wanted:
            return {}
        table = await self._table()
        digest = table.c.cmetadata["content_sha256"].astext
        stmt = (
            select(digest.label("digest"), meta_field(table, "document_id").label("doc"))
            .where(or_(*[table.c.cmetadata.contains({"content_sha256": d}) for d in wanted]))
            .distinct()
        )
        out: dict[str, set[str]] = {}
        for r in await self._rows(stmt):
            out.setdefault(r.digest, set()).add(r.doc)
        return out

    async def document_states(self, document_ids: Sequence[str]) -> dict[str, DocumentState]:
        ids = _unique(document_ids)
        if not ids:
            return {}
        rows = await self._rows(self._documents.states(ids), "read the documents of")
        return {r.document_id: DocumentState(*r[1:]) for r in rows}

    async def stale_documents(
        self, policy_versions: Sequence[str], after: str | None, limit: int
    ) -> list[DocumentRecord]:
        stmt = self._documents.stale(policy_versions, after, limit)
        rows = await self._rows(stmt, "read the documents of")
        return [DocumentRecord(**r._mapping) for r in rows]

    async def count(self, include_parents: bool) -> int:
        stmt = select(func.count()).select_from(await self._table())
        if not include_parents:
            stmt = stmt.where(text(CHILD_PREDICATE))
        return int((await self._rows(stmt, "count"))[0][0])


def all_rows(statement: Any) -> Callable[[Any], Awaitable[list[Any]]]:
    """A read's work: every row of ``statement``."""

    async def work(conn: Any) -> list[Any]:
        return list((await conn.execute(statement)).all())

    return work
