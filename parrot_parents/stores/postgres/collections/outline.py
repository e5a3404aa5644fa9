"""A document's section tree with row counts, and the text its offsets index
(``parrot-parents show DOCUMENT_ID [--text]``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Integer, func, select, text

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.postgres.collections.reads import all_rows
from parrot_parents.stores.postgres.collections.schema import meta_field
from parrot_parents.stores.postgres.connections.reads import read
from parrot_parents.stores.records.markers import NOT_INDEXED_PREDICATE, PARENT_PREDICATE

__all__ = ["OutlineEntry", "document_outline", "document_text"]


@dataclass(frozen=True)
class OutlineEntry:
    """Rows of one ``(section_path, layer)`` of a document, at their first offset."""

    section_path: str
    layer: str
    parents: int
    children: int
    start_index: int
    section_ordinal: int | None


async def document_outline(store: Any, document_id: str) -> list[OutlineEntry]:
    """Counts of parents and children per section path and layer, in document order.

    One statement over the collection table of ``store`` (a connected or connectable
    :class:`~parrot_parents.stores.postgres.PgVectorStore`). Rows without a section path
    (plain text) form one entry with path ``""`` and layer ``""``.

    Raises:
        ConfigurationError: ``document_id`` is not a non-empty string.
    """
    if not isinstance(document_id, str) or not document_id:
        raise ConfigurationError(f"document_id must be a non-empty string, got {document_id!r}")
    engine, table = await store.ready()
    meta = table.c.cmetadata
    path = func.coalesce(meta["section_path"].astext, "").label("path")
    layer = func.coalesce(meta["layer"].astext, "").label("layer")
    is_parent = text(f"coalesce({PARENT_PREDICATE}, false)")
    is_child = text(f"NOT coalesce({PARENT_PREDICATE}, false)")
    stmt = (
        select(
            path,
            layer,
            func.count().filter(is_parent).label("parents"),
            func.count().filter(is_child).label("children"),
            func.min(meta_field(table, "start_index").cast(Integer)).label("start"),
            func.min(meta["section_ordinal"].astext.cast(Integer)).label("ordinal"),
        )
        .where(meta_field(table, "document_id") == document_id)
        # Indexed rows (ingestion strategies) stand for children; they are not rows of
        # the document's own hierarchy.
        .where(text(NOT_INDEXED_PREDICATE))
        .group_by(path, layer)
        .order_by(text("start"), path, layer)
    )
    rows = await read(engine, f"read from {store.qualified_name}", all_rows(stmt))
    return [
        OutlineEntry(r.path, r.layer, int(r.parents), int(r.children), int(r.start or 0), r.ordinal)
        for r in rows
    ]


async def document_text(store: Any, document_id: str) -> str | None:
    """The text a stored document's offsets index, or None for an unknown document.

    Every row's ``start_index``/``end_index`` are ``str`` indices into this text: a text
    or Markdown file as decoded (UTF-8, a leading BOM dropped, line breaks as in the
    file), the visible text of an HTML page, the text of a PDF's pages. It is the
    ``source_text`` of the collection's documents table.

    Raises:
        ConfigurationError: ``document_id`` is not a non-empty string.
        StoreError: the database failed (a collection without its documents table:
            ``parrot-parents migrate`` gives it one).
    """
    if not isinstance(document_id, str) or not document_id:
        raise ConfigurationError(f"document_id must be a non-empty string, got {document_id!r}")
    engine, _ = await store.ready()
    stmt = store.documents.read(document_id)
    rows = await read(engine, f"read the documents of {store.qualified_name}", all_rows(stmt))
    return str(rows[0].source_text) if rows else None
