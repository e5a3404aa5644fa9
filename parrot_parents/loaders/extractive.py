"""The default ingestion strategy, ``contextual:extractive``
(:data:`~.defaults.DEFAULT_STRATEGY`): each child indexed under its document's name and
heading path (docs/strategies.md). No model is called, so it lives with the loaders.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING

from langchain_core.documents import Document

from parrot_parents.loaders.headings import HeadingIndex
from parrot_parents.loaders.indexing import ChunkIndexer, table_lines

if TYPE_CHECKING:
    from parrot_parents.loaders.chunk_info import ChunkInfo
    from parrot_parents.loaders.hierarchy import DocumentHierarchy

__all__ = ["EXTRACTIVE_STRATEGY", "ExtractiveIndexer", "extractive_text"]

#: The canonical spec of this strategy, as :mod:`parrot_parents.strategies.spec` writes
#: ``contextual:extractive`` (rows, reports and the chunk policy carry it).
EXTRACTIVE_STRATEGY = "contextual:context=extractive"


class ExtractiveIndexer(ChunkIndexer):
    """The :class:`~parrot_parents.loaders.indexing.RowIndexer` of
    ``contextual:extractive`` (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(EXTRACTIVE_STRATEGY, "context")

    async def document_rows(self, h: DocumentHierarchy) -> tuple[int, int, list[Document]]:
        headings = HeadingIndex(h.text)
        rows = [
            row
            for child in h.children
            for row in self.child_rows(child, [extractive_text(h, child, headings)])
        ]
        return len(h.children), len(h.children), rows


def extractive_text(h: DocumentHierarchy, child: ChunkInfo, headings: HeadingIndex) -> str:
    """Title (or file name), heading path and, for a table row, the table's caption and
    column headers; a blank line; the child's text."""
    meta = child.metadata
    title = meta.get("title")
    if not isinstance(title, str) or not title.strip():
        source = meta.get("source")
        title = PurePath(source).name if isinstance(source, str) and source else h.document_id
    given = meta.get("section_path")
    if isinstance(given, list) and all(isinstance(s, str) for s in given):
        path = [s for s in given if s]
    elif isinstance(given, str) and given:
        path = [given]
    else:
        path = headings.path(child.start_index)
    lines = [f"Document: {title}"]
    if path:
        lines.append(f"Section: {' > '.join(path)}")
    lines.extend(table_lines(child))
    return "\n".join(lines) + "\n\n" + child.text
