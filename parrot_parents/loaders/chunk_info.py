"""Description of one child chunk produced by the hierarchy processor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ChunkInfo"]


@dataclass
class ChunkInfo:
    """A child chunk and its place in the hierarchy.

    Attributes:
        chunk_id: deterministic row id.
        parent_id: id of its parent row (whole document or parent_chunk).
        document_id: id of the source document.
        chunk_index: 0-based position among the document's children.
        start_index: character offset of the child in the source text (inclusive).
        end_index: character offset of the child's end in the source text (exclusive).
        text: ``source[start_index:end_index]``.
        metadata: the row's metadata (markers included).
        embedding: the child's vector once embedded (float32, shape ``(dimension,)``),
            else None.
        table_caption: of a ``table_row`` child, its table's caption; None when the table
            has none or the child is no table row.
        table_columns: of a ``table_row`` child, its table's column headers (empty when
            the table has no header row). With the caption, every ingestion strategy
            searches a table row under them (:func:`~.indexing.table_lines`); not stored.
        row_prefix: the text an indexed row puts before this child's text (its header,
            with the blank line), set from the ingestion strategy's rows before the child
            is embedded; then :attr:`embedding` is that row's vector (with late chunking,
            the child read in its parent plus the header read alone, normalised; without,
            the row read alone), and the row is stored with it. None: the child's own
            vector. Not stored.
    """

    chunk_id: str
    parent_id: str
    document_id: str
    chunk_index: int
    start_index: int
    end_index: int
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: np.ndarray | None = None
    table_caption: str | None = None
    table_columns: tuple[str, ...] = ()
    row_prefix: str | None = None
