"""The hook through which an ingestion strategy adds indexed rows to a document's write.

A loader calls its :class:`RowIndexer` once per batch of documents, after their
hierarchies are embedded and before they are written (in the same transaction), for the
indexed rows of each document (:mod:`parrot_parents.stores.records.markers`).
:class:`ChunkIndexer` is what every indexer shares; the model-backed strategies
(:mod:`parrot_parents.strategies`) live above the loaders, which never call a model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from langchain_core.documents import Document

from parrot_parents.stores.records.markers import (
    DOCUMENT_ID,
    DOCUMENT_TYPE,
    INDEXED,
    INDEXES,
    IS_CHUNK,
    NOT_COPIED_TO_INDEXED,
    OFFSETS_EXACT,
    SEARCHABLE,
)
from parrot_parents.stores.resolve import INDEXED_KIND

if TYPE_CHECKING:
    from parrot_parents.loaders.chunk_info import ChunkInfo
    from parrot_parents.loaders.hierarchy import DocumentHierarchy

__all__ = [
    "INGESTION_KEY",
    "ChunkIndexer",
    "IndexedKind",
    "RowIndexer",
    "mark_row_prefixes",
    "row_vectors",
    "table_lines",
    "with_table",
]

#: Key of the per-document ingestion record on parent rows.
INGESTION_KEY = "ingestion"

#: What an indexed row holds: a context note (with its child), a question, a fact, or a
#: document summary.
IndexedKind = Literal["context", "question", "proposition", "summary"]

_TAGS: dict[IndexedKind, str] = {
    "context": "ctx",
    "question": "q",
    "proposition": "f",
    "summary": "sum",
}


def table_lines(child: ChunkInfo) -> list[str]:
    """The lines naming the table of a ``table_row`` child: ``"Table: <caption>"`` and
    ``"Columns: <a> | <b> | ..."``, each only when the table has it; ``[]`` for any other
    child.

    A group of body rows reads as bare cells ("| Ada | Lead |"): every strategy puts these
    lines in a table row's indexed rows, so both searches find it by subject or column.
    """
    lines = []
    if child.table_caption:
        lines.append(f"Table: {child.table_caption}")
    if child.table_columns:
        lines.append(f"Columns: {' | '.join(child.table_columns)}")
    return lines


def with_table(child: ChunkInfo, text: str) -> str:
    """``text`` under the :func:`table_lines` of ``child`` (a blank line between), or
    ``text`` unchanged for a child that is no table row."""
    lines = table_lines(child)
    return "\n".join(lines) + "\n\n" + text if lines else text


def mark_row_prefixes(h: DocumentHierarchy, rows: Sequence[Document]) -> None:
    """Set :attr:`ChunkInfo.row_prefix` on each child of ``h`` that an indexed row of
    ``rows`` holds whole after a header (``header + child text``: the contextual strategies'
    rows), so that the child's embedding step gives that row's vector
    (:meth:`~.hierarchy.LateChunkingProcessor.embed_hierarchies`). Other rows (questions,
    propositions, summaries) say something else: the store embeds them alone."""
    by_id = {c.chunk_id: c for c in h.children}
    for row in rows:
        child = by_id.get(str(row.metadata.get(INDEXES)))
        text = row.page_content
        if (
            child is not None
            and child.row_prefix is None
            and len(text) > len(child.text)
            and text.endswith(child.text)
        ):
            child.row_prefix = text[: len(text) - len(child.text)]


def row_vectors(h: DocumentHierarchy, rows: Sequence[Document]) -> list[Any]:
    """The vector of each row of ``rows`` that its child was embedded as (see
    :func:`mark_row_prefixes`), else None (the store embeds that row alone)."""
    by_id = {c.chunk_id: c for c in h.children}
    out: list[Any] = []
    for row in rows:
        child = by_id.get(str(row.metadata.get(INDEXES)))
        same = (
            child is not None
            and child.row_prefix is not None
            and child.embedding is not None
            and row.page_content == child.row_prefix + child.text
        )
        out.append(child.embedding if same and child is not None else None)
    return out


class RowIndexer(Protocol):
    """Writes indexed rows for hierarchies (see the module docstring)."""

    async def index_rows(
        self, hierarchies: Sequence[DocumentHierarchy]
    ) -> dict[str, list[Document]]:
        """``{document_id: indexed rows}``; must not raise on a failed model call."""
        ...

    def report(self) -> dict[str, Any]:
        """What the indexer did so far (counts, model calls, failures by kind); its
        ``strategy`` names the strategy (part of the chunk policy)."""
        ...


class ChunkIndexer:
    """Indexed rows, one set per child (or, for a per-document strategy, per parent).

    A subclass says what the rows of a document hold (:meth:`document_rows`). The markers
    of enriched children and indexed rows: docs/strategies.md ("Indexed rows"); a chunk
    that got no text (a failed model call) keeps no row and stays indexed as itself.

    Args:
        strategy: the strategy's canonical spec, recorded on every row, in the report and
            in the chunk policy (e.g. ``"contextual:context=extractive"``).
        kind: what the rows hold.
        model: the model name recorded per document; None without a model.
    """

    def __init__(self, strategy: str, kind: IndexedKind, model: str | None = None) -> None:
        self.strategy = strategy
        self.kind: IndexedKind = kind
        self.model_name = model
        self.enriched = 0
        self.of = 0
        self.rows = 0
        self.searchable_children = 0
        self.retrievable = 0

    # -- what a strategy says ------------------------------------------------------------

    async def document_rows(self, h: DocumentHierarchy) -> tuple[int, int, list[Document]]:
        """``(enriched, of, rows)`` of one document: the chunks (or documents) that got
        rows, of those tried, and the rows (see :meth:`child_rows` and :meth:`row`)."""
        raise NotImplementedError

    def usage(self) -> dict[str, Any]:
        """Model use for the report: ``calls``, ``cache_hits``, ``tokens``, ``failures``."""
        return {
            "calls": 0,
            "cache_hits": 0,
            "tokens": {"prompt": 0, "completion": 0},
            "failures": {},
        }

    async def close(self) -> None:
        """Release what the indexer holds (nothing here). Safe to call twice."""

    # -- the hook ------------------------------------------------------------------------

    async def index_rows(
        self, hierarchies: Sequence[DocumentHierarchy]
    ) -> dict[str, list[Document]]:
        """``{document_id: indexed rows}`` of a batch; children are marked in place."""
        results = await asyncio.gather(*(self._document(h) for h in hierarchies))
        return {h.document_id: rows for h, rows in zip(hierarchies, results, strict=True)}

    async def _document(self, h: DocumentHierarchy) -> list[Document]:
        enriched, of, rows = await self.document_rows(h)
        self.enriched += enriched
        self.of += of
        self.rows += len(rows)
        self.searchable_children += sum(
            1 for c in h.children if c.metadata.get(SEARCHABLE) is not False
        )
        self.retrievable += len({str(r.metadata[INDEXES]) for r in rows})
        record = {
            "strategy": self.strategy,
            "enriched": enriched,
            "of": of,
            "indexed_rows": len(rows),
            "model": self.model_name,
        }
        for parent in h.parents:
            parent.metadata[INGESTION_KEY] = record
        return rows

    def child_rows(self, child: ChunkInfo, texts: Sequence[str]) -> list[Document]:
        """The rows of ``child`` holding ``texts``; a child that gets any is marked
        ``searchable: false`` (found through its rows only)."""
        if texts:
            child.metadata[SEARCHABLE] = False
        return [self.row(child.chunk_id, child.metadata, text, i) for i, text in enumerate(texts)]

    def row(self, target: str, metadata: dict[str, Any], text: str, index: int) -> Document:
        """The ``index``-th indexed row of ``target`` (a child, or a parent for a summary),
        with ``target``'s metadata but its hierarchy keys."""
        meta = {k: v for k, v in metadata.items() if k not in NOT_COPIED_TO_INDEXED}
        meta.update(
            {
                DOCUMENT_ID: metadata[DOCUMENT_ID],
                DOCUMENT_TYPE: INDEXED,
                IS_CHUNK: False,
                INDEXES: target,
                INDEXED_KIND: self.kind,
                OFFSETS_EXACT: False,
                "strategy": self.strategy,
            }
        )
        return Document(id=f"{target}~{_TAGS[self.kind]}{index}", page_content=text, metadata=meta)

    # -- what it did ---------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """``strategy``, ``enriched`` of ``of`` (``partial`` when fewer), ``indexed_rows``,
        ``expansion`` (searched units per retrievable unit; None when nothing was written),
        and :meth:`usage`."""
        reachable = self.searchable_children + self.retrievable
        searched = self.searchable_children + self.rows
        return {
            "strategy": self.strategy,
            "enriched": self.enriched,
            "of": self.of,
            "partial": self.enriched < self.of,
            "indexed_rows": self.rows,
            "expansion": round(searched / reachable, 4) if reachable else None,
            **self.usage(),
        }
