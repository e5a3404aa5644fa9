"""The hook through which an ingestion strategy adds indexed rows to a document's write.

A loader given a :class:`RowIndexer` calls it once per batch of documents, after their
hierarchies are built and embedded and before they are written. The indexer returns the
indexed rows of each document (``document_type: "indexed"``, see
:mod:`parrot_parents.stores.markers`); it may mark children ``searchable: false`` when
their text is indexed only through those rows. The rows are written in the same
transaction as the document's hierarchy, so a re-ingest replaces them too.

The strategies themselves (:mod:`parrot_parents.strategies`) live above the loaders:
they may call a model, which the loaders never do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.documents import Document

if TYPE_CHECKING:
    from parrot_parents.loaders.hierarchy import DocumentHierarchy

__all__ = ["RowIndexer"]


class RowIndexer(Protocol):
    """Writes indexed rows for hierarchies (see the module docstring)."""

    async def index_rows(
        self, hierarchies: Sequence[DocumentHierarchy]
    ) -> dict[str, list[Document]]:
        """``{document_id: indexed rows}``; must not raise on a failed model call."""
        ...

    def report(self) -> dict[str, Any]:
        """What the indexer did so far (counts, model calls, failures by kind)."""
        ...
