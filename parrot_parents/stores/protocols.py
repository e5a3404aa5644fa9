"""What a store can do beyond :class:`~parrot_parents.stores.abstract.AbstractStore`.

Every store subclasses :class:`AbstractStore` (``connect``, ``add_documents``,
``similarity_search``, ``delete``, ``close``). Each further capability is one protocol
here, and a store that has it names the protocol among its bases, so that a missing
method is an error when the store is created, not when a caller first needs it::

    class PgVectorStore(AbstractStore, ContextSearch, DocumentTable, ...): ...

A caller checks a capability once, at the boundary, with ``isinstance(store, BulkLoad)``,
or requires it by type. Every protocol is ``runtime_checkable`` and has methods only, so
``issubclass(type(store), BulkLoad)`` gives the same answer from a per-class cache; a
check on a per-query path uses that (on Python 3.11 ``isinstance`` against a protocol
walks its members on every call, tens of microseconds). Who has what, and who asks:

* :class:`ReplaceDocument` (PostgreSQL, Milvus): the loaders, so that re-chunking a
  document leaves no stale rows;
* :class:`SourceLookup` (PostgreSQL, Milvus): the loaders, to warn when a document id
  stored from another file is replaced;
* :class:`RowCount` (PostgreSQL, Milvus): ``eval`` (a named collection must be empty)
  and :class:`BulkLoad` (a bulk load is for an empty collection);
* :class:`ContentLookup` (PostgreSQL): the loaders, to warn when a file is stored twice;
* :class:`DocumentTable` (PostgreSQL): the loaders (unchanged documents skipped, a batch
  written in one transaction) and ``reindex --stale``;
* :class:`BulkLoad` (PostgreSQL): the loaders, to build the vector index once after a load;
* :class:`ContextSearch` (PostgreSQL): the query pipeline, to search and read what
  expansion needs in one round trip;
* :class:`IndexedRows` (PostgreSQL; Milvus for one ``context`` row per child, folded
  into the child's searched text): the loaders and the default ingestion strategy;
* :class:`DocumentRows` (PostgreSQL): the HTTP document view;
* :class:`ModelChecked` (PostgreSQL): the loaders, to refuse writing vectors of another
  model than the collection's (:mod:`parrot_parents.stores.postgres.collections.model_contract`),
  and the
  query pipeline, to embed the question for sentence trimming through the same check;
* :class:`LexicalRanking` (PostgreSQL): the query pipeline, to say in ``meta`` what
  ranked the lexical branch (:mod:`parrot_parents.stores.postgres.search.bm25_index`).

A store without a capability still works everywhere: the caller takes the plain path
(one write per document, no warning, a separate read for expansion), except where the
capability is the whole point (``reindex --stale`` needs a documents table, an ingestion
strategy needs indexed rows), which refuses with a ``ConfigurationError`` naming the store.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings

    from parrot_parents.stores.context import Context, ContextPlan
    from parrot_parents.stores.postgres.collections.documents import DocumentRecord, DocumentState
    from parrot_parents.stores.postgres.writes.writer import VectorIndexDeferral
    from parrot_parents.stores.results import DocumentRow, SearchResult
    from parrot_parents.stores.search_options import Fusion, SearchMode

__all__ = [
    "BulkLoad",
    "ContentLookup",
    "ContextSearch",
    "DocumentRows",
    "DocumentTable",
    "DocumentWriteItem",
    "Embedded",
    "IndexedRows",
    "LexicalRanking",
    "ModelChecked",
    "ReplaceDocument",
    "RowCount",
    "SourceLookup",
    "Vectors",
]

#: Vectors aligned with a call's documents: per document a list of floats or a float32
#: array of shape ``(dimension,)``, or None where the store embeds the row (parents are
#: stored without one); or one ``(len(documents), dimension)`` array.
Vectors: TypeAlias = "Sequence[Sequence[float] | np.ndarray | None] | np.ndarray"

#: ``(document_id, documents, vectors, record)``: one document of
#: :meth:`DocumentTable.replace_documents`, as the arguments of ``replace_document``.
DocumentWriteItem: TypeAlias = (
    "tuple[str, Sequence[Document], Vectors | None, DocumentRecord | None]"
)


@runtime_checkable
class ReplaceDocument(Protocol):
    """Replaces every row of one document, so re-chunking leaves no stale rows."""

    @abstractmethod
    async def replace_document(
        self,
        document_id: str,
        documents: Sequence[Document],
        *,
        embeddings: Vectors | None = None,
    ) -> list[str]:
        """Replace every row of ``document_id`` by ``documents``; the new row ids, in
        input order. How atomic that is depends on the backend (its docstring says).

        Raises:
            ConfigurationError: a row of another document, or a bad value.
            StoreError: the backend refused the write.
        """


@runtime_checkable
class LexicalRanking(Protocol):
    """Says which lexical backend ranks a search (the collection's own, or another for
    this search's options)."""

    @abstractmethod
    def lexical_ranking(
        self,
        filter: Mapping[str, Any] | None,
        fusion: Fusion | None,
        exact_filter: bool = True,
    ) -> tuple[str, str | None]:
        """``(backend, why)`` for a search with ``filter`` and ``fusion``: ``why`` is None
        when the backend is the collection's own, else the reason it is not.
        ``exact_filter``: whether the search's filter plan ranked exactly
        (:class:`~parrot_parents.stores.postgres.search.filter_plan.FilterPlan`). No I/O (only
        after the
        store is connected)."""


@runtime_checkable
class SourceLookup(Protocol):
    """Which files the stored documents came from."""

    @abstractmethod
    async def document_sources(self, document_ids: Sequence[str]) -> dict[str, set[str]]:
        """``{document_id: {source, ...}}`` of the stored rows of those documents;
        documents not stored are absent, an empty input reads nothing."""


@runtime_checkable
class RowCount(Protocol):
    """The number of rows of the collection."""

    @abstractmethod
    async def count(self, *, include_parents: bool = True) -> int:
        """Rows stored (children only when ``include_parents`` is False)."""


@runtime_checkable
class ContentLookup(Protocol):
    """Which stored documents hold a given text (by its SHA-256)."""

    @abstractmethod
    async def documents_with_content(self, digests: Sequence[str]) -> dict[str, set[str]]:
        """``{content_sha256: {document_id, ...}}`` of the stored documents whose whole
        text has that hash (hex); digests nobody holds are absent."""


@runtime_checkable
class DocumentTable(ReplaceDocument, Protocol):
    """A documents table beside the collection: per document its text, hash, source and
    chunk-policy version (:mod:`parrot_parents.stores.postgres.collections.documents`), written in
    the same
    transaction as the document's rows."""

    @abstractmethod
    async def replace_document(
        self,
        document_id: str,
        documents: Sequence[Document],
        *,
        embeddings: Vectors | None = None,
        record: DocumentRecord | None = None,
    ) -> list[str]:
        """:meth:`ReplaceDocument.replace_document` in one transaction; ``record``, when
        given, is written to the documents table in it."""

    @abstractmethod
    async def replace_documents(self, batch: Sequence[DocumentWriteItem]) -> list[list[str]]:
        """Replace several documents in one transaction: all of them, or none (each
        then keeps its previous version). Returns each document's row ids, in input order.

        Raises:
            ConfigurationError, StoreError: as :meth:`replace_document`, for the batch.
        """

    @abstractmethod
    async def document_states(self, document_ids: Sequence[str]) -> dict[str, DocumentState]:
        """The stored hash, policy version and source of each id; ids without a
        documents row are absent."""

    @abstractmethod
    async def stale_documents(
        self, policy_versions: Sequence[str], *, after: str | None = None, limit: int = 100
    ) -> list[DocumentRecord]:
        """Up to ``limit`` documents stored under none of ``policy_versions``, in id
        order after the id ``after``, with their stored text and metadata."""


@runtime_checkable
class BulkLoad(RowCount, Protocol):
    """A vector index that can be dropped for a bulk load and built once after it."""

    @abstractmethod
    def bulk_load(self, *, parallel_workers: int | None = None) -> VectorIndexDeferral:
        """``async with store.bulk_load() as load:``: the vector index is dropped on
        entry and built again when the block ends (also after an error);
        ``load.build_seconds`` is the build time. Needs a connected store."""

    @abstractmethod
    async def vector_index_exists(self) -> bool:
        """Whether the collection's vector index exists (absent after a failed build)."""


@runtime_checkable
class ContextSearch(Protocol):
    """A search that reads, in the same round trip, what expansion needs around its hits
    (parents, a window's neighbours, a parent's children)."""

    @abstractmethod
    async def search_with_context(
        self,
        query: str,
        plan: ContextPlan,
        limit: int = 10,
        filter: dict[str, Any] | None = None,
        *,
        search_mode: SearchMode = "dense",
        fusion: Fusion | None = None,
        vector: Sequence[float] | None = None,
    ) -> tuple[list[SearchResult], Context]:
        """``similarity_search`` over the children, and ``plan``'s reads; the results are
        exactly those ``similarity_search`` returns.

        Raises:
            As ``similarity_search``.
        """

    @abstractmethod
    async def fetch_context(
        self, rows: Sequence[tuple[str, dict[str, Any]]], plan: ContextPlan
    ) -> Context:
        """``plan``'s reads for ``(id, metadata)`` rows already found (after a reranker)."""


@runtime_checkable
class IndexedRows(Protocol):
    """Indexed rows (written by an ingestion strategy) are searched, and a hit on one is
    resolved to the row it stands for (:mod:`parrot_parents.stores.resolve`) before the
    search returns; each document records how it was indexed."""

    @abstractmethod
    async def ingestion_records(self) -> dict[str, dict[str, Any]]:
        """``{document_id: record}``: the strategy's record of each document indexed by
        one (``strategy``, ``enriched``, ``of``, ``indexed_rows``, ``model``)."""


@runtime_checkable
class DocumentRows(Protocol):
    """The stored rows of one document, without their text."""

    @abstractmethod
    async def document_rows(self, document_id: str) -> list[DocumentRow]:
        """Every row of ``document_id``, parents first, then by ``start_index`` and id;
        an unknown document gives ``[]``.

        Raises:
            ConfigurationError: ``document_id`` is not a non-empty string.
        """


@runtime_checkable
class ModelChecked(Protocol):
    """A store that records its collection's embedding model and refuses another."""

    @abstractmethod
    async def check_model(self, embedding: Any = None, *, writing: bool = False) -> None:
        """Refuse ``embedding`` (default: the store's) unless the collection's vectors are
        its model's; record it on a collection without a record when ``writing``.

        Raises:
            ModelMismatchError: another model, or an unfinished re-embed.
        """

    @abstractmethod
    async def embed_question(self, question: str) -> list[float]:
        """``question``'s vector in the collection's space: embedded with the store's model
        once :meth:`check_model` passes, as every search that embeds does.

        Raises:
            ModelMismatchError: another model (of any dimension), or an unfinished re-embed.
        """


@runtime_checkable
class Embedded(Protocol):
    """A store that embeds its questions with a model of its own (``embedding``)."""

    @property
    def embedding(self) -> Embeddings:
        """The model that embeds the store's questions and rows."""
