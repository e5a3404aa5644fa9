"""What a loader reports, and the keywords loaders and their ingest calls share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from parrot_parents.loaders.hierarchy import ProcessorOptions
from parrot_parents.loaders.indexing import RowIndexer

__all__ = ["IngestReport", "LoaderOptions", "ParentSizes"]


@dataclass
class IngestReport:
    """What an ingestion did: documents written, rows, failures and warnings per source.

    ``failed`` maps a document (its source, else its id, else ``documents[i]``) to the
    reason it was not stored; ``warnings`` lists what was cleaned or replaced;
    ``windowed_children`` counts children longer than the model's window that were
    embedded in overlapping windows (``late_chunking=False``) instead of being cut.
    ``indexed`` counts the indexed rows an ingestion strategy wrote, and ``strategy``
    is its report (:meth:`RowIndexer.report`: ``enriched`` of ``of``, model calls,
    tokens, failures by kind), None without a strategy.

    A loader keeps one report over all its calls (``loader.report``): the counts add up,
    a document that failed in an earlier call leaves ``failed`` when a later call writes
    it (or finds it unchanged), and one written leaves ``unchanged`` (each name is listed
    there once). ``documents``, ``parents`` and ``children`` count the writes (without a
    store, the documents chunked): two versions of one document written in one call
    count twice.
    """

    documents: int = 0
    parents: int = 0
    children: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, list[str]] = field(default_factory=dict)
    windowed_children: int = 0
    indexed: int = 0
    strategy: dict[str, Any] | None = None
    #: Documents not written because their content, source and chunk policy version are
    #: those already stored (see :mod:`parrot_parents.loaders.policy`).
    unchanged: list[str] = field(default_factory=list)
    #: Seconds spent building the vector index after a bulk load (None without one).
    index_build_seconds: float | None = None


class LoaderOptions(ProcessorOptions, total=False):
    """The keywords of :class:`AbstractLoader`, which its subclasses pass on."""

    indexer: RowIndexer | Literal["default"] | None


class ParentSizes(TypedDict, total=False):
    """The parent sizes of :meth:`AbstractLoader.chunk_documents` (characters; an absent
    one is its default)."""

    parent_chunk_threshold_tokens: int
    parent_chunk_size_tokens: int
    parent_chunk_overlap_tokens: int
