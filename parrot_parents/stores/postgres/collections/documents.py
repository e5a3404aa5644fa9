"""The documents table of a collection: one row per source document.

``<collection>_documents`` (:func:`~parrot_parents.stores.identifiers.derived_name`) holds
each document's ``source``, ``content_sha256``, ``policy_version`` (the chunk policy),
``ingested_at``, ``metadata`` (reader, structure, caller's metadata) and ``source_text``
(what the rows' offsets point into). It is written in the transaction of the document's
rows, and answers whether a file is unchanged (``ingest`` skips it), which documents were
cut with another policy (``reindex --stale`` rebuilds them from ``source_text``) and
whether a text is stored under another id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Index,
    MetaData,
    Table,
    Text,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert

from parrot_parents.stores.identifiers import CollectionName, collection_name, derived_name

__all__ = ["DocumentRecord", "DocumentState", "DocumentsTable", "backfill_documents"]


@dataclass(frozen=True)
class DocumentRecord:
    """One row of the documents table (see the module docstring)."""

    document_id: str
    content_sha256: str
    policy_version: str | None
    source_text: str
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def same_as(self, state: DocumentState | None) -> bool:
        """True when ``state`` (what is stored) has this text hash, policy, source and
        metadata (the caller's metadata is on every row, so a change of it alone is a
        change of the rows)."""
        # As the documents table gives it back: JSON's types (a tuple reads as a list).
        metadata = json.loads(json.dumps(self.metadata))
        return state == DocumentState(
            self.content_sha256, self.policy_version, self.source, metadata
        )

    @property
    def row_metadata(self) -> Mapping[str, Any] | None:
        """The caller's metadata that every row of the document carries (None when the
        record holds none)."""
        return _row_metadata(self.metadata)


def _row_metadata(metadata: Mapping[str, Any]) -> Mapping[str, Any] | None:
    value = metadata.get("row_metadata")
    return value if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class DocumentState:
    """What ``ingest`` compares: the stored hash, policy version, source and metadata."""

    content_sha256: str
    policy_version: str | None
    source: str | None
    metadata: dict[str, Any]

    @property
    def row_metadata(self) -> Mapping[str, Any] | None:
        """The caller's metadata that every row of the document carries (None when the
        record holds none)."""
        return _row_metadata(self.metadata)


class DocumentsTable:
    """The SQLAlchemy table and statements of one collection's documents table."""

    def __init__(self, name: CollectionName) -> None:
        table, self.schema = name.table, name.schema
        self.name = derived_name(table, "documents")
        md = MetaData()
        self.table = Table(
            self.name,
            md,
            Column("document_id", Text, primary_key=True),
            Column("source", Text, nullable=True),
            Column("content_sha256", Text, nullable=False),
            Column("policy_version", Text, nullable=True),
            Column(
                "ingested_at", DateTime(timezone=True), nullable=False, server_default=func.now()
            ),
            Column("metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
            Column("source_text", Text, nullable=False),
            schema=self.schema,
        )
        Index(derived_name(table, "documents_sha"), self.table.c.content_sha256)

    @property
    def q(self) -> str:
        """The quoted qualified name (validated identifiers)."""
        return f'"{self.schema}"."{self.name}"'

    def create(self, conn: Connection) -> None:
        """Create the table and its index when missing (sync; use ``run_sync``)."""
        self.table.metadata.create_all(conn, checkfirst=True)

    def drop(self, conn: Connection) -> None:
        self.table.drop(conn, checkfirst=True)

    def upsert(self, records: Sequence[DocumentRecord]) -> Any:
        """One statement writing ``records`` (insert, or replace the stored rows); of two
        records with one id the last wins (``ON CONFLICT`` touches a row once)."""
        by_id = {r.document_id: r for r in records}
        stmt = pg_insert(self.table).values(
            [{**asdict(r), "ingested_at": func.now()} for r in by_id.values()]
        )
        return stmt.on_conflict_do_update(
            index_elements=[self.table.c.document_id],
            set_={c.name: stmt.excluded[c.name] for c in self.table.c if not c.primary_key},
        )

    def delete(self, document_id: str) -> Any:
        return self.table.delete().where(self.table.c.document_id == document_id)

    def states(self, document_ids: Sequence[str]) -> Any:
        """``document_id`` and the :class:`DocumentState` columns of ``document_ids``."""
        t = self.table.c
        state = [t[f.name] for f in fields(DocumentState)]
        return select(t.document_id, *state).where(t.document_id.in_(list(document_ids)))

    def stale(self, policy_versions: Sequence[str], after: str | None, limit: int) -> Any:
        """The :class:`DocumentRecord` columns of the documents whose policy version is
        none of ``policy_versions``, by id."""
        t = self.table.c
        stmt = (
            select(*[t[f.name] for f in fields(DocumentRecord)])
            .where(t.policy_version.is_(None) | t.policy_version.not_in(list(policy_versions)))
            .order_by(t.document_id)
            .limit(limit)
        )
        return stmt if after is None else stmt.where(t.document_id > after)

    def read(self, document_id: str) -> Any:
        t = self.table.c
        return select(self.table).where(t.document_id == document_id)


def backfill_documents(conn: Connection, table: str, schema: str = "public") -> int:
    """Give every document of an existing collection its documents row (sync; idempotent).

    The text is rebuilt from the stored parents: a whole-document parent is the text; the
    parent_chunks of a long document are laid at their offsets, and the few characters no
    parent holds (whitespace the splitter trimmed between chunks) become spaces, so every
    offset stays right. ``policy_version`` is NULL (unknown), so ``reindex --stale`` re-cuts
    them; the hash is the one the parents carry. Returns the documents added.
    """
    name = collection_name(table, schema, what="table", reserved=True)
    docs = DocumentsTable(name)
    docs.create(conn)
    qt = name.quoted()
    rows = conn.execute(
        text(
            f"SELECT r.cmetadata->>'document_id' AS doc, r.document AS body,"
            f" (r.cmetadata->>'start_index')::int AS s, r.cmetadata->>'source' AS source,"
            f" r.cmetadata->>'content_sha256' AS sha FROM {qt} r"
            " WHERE ((r.cmetadata->>'is_full_document')::boolean = true"
            "   OR r.cmetadata->>'document_type' = 'parent_chunk')"
            f" AND NOT EXISTS (SELECT 1 FROM {docs.q} d"
            "   WHERE d.document_id = r.cmetadata->>'document_id')"
            " ORDER BY 1, 3"
        )
    ).all()
    by_doc: dict[str, list[Any]] = {}
    for r in rows:
        by_doc.setdefault(r.doc, []).append(r)
    from parrot_parents.stores.records.ids import content_sha256

    records = []
    for doc_id, parts in by_doc.items():
        chars: list[str] = []
        for r in parts:
            start = r.s or 0
            if len(chars) < start:
                chars.extend(" " * (start - len(chars)))
            chars[start : start + len(r.body)] = list(r.body)
        body = "".join(chars)
        sha = next((r.sha for r in parts if r.sha), None) or content_sha256(body)
        source = next((r.source for r in parts if r.source), None)
        records.append(DocumentRecord(doc_id, sha, None, body, source, {"backfilled": True}))
    if records:
        conn.execute(pg_insert(docs.table).on_conflict_do_nothing(), [asdict(r) for r in records])
    return len(records)
