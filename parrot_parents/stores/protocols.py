"""What a store can do beyond :class:`~parrot_parents.stores.abstract.AbstractStore`.

Each capability is one protocol, and a store that has it names the protocol among its
bases, so that a missing method is an error when the store is created::

    class PgVectorStore(AbstractStore, ContextSearch, DocumentTable, ...): ...

A caller checks a capability once, at the boundary. Every protocol is ``runtime_checkable``
with methods only, so on a per-query path ``issubclass(type(store), BulkLoad)`` answers from
a per-class cache (on Python 3.11 ``isinstance`` walks the members on every call). Without a
capability the caller takes the plain path, or refuses with a ``ConfigurationError`` naming
the store where the capability is the whole point. Who has what: docs/architecture.md,
"Backends and framework adapters".
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
    "Partitioned",
    "ReplaceDocument",
    "RowCount",
    "ScopeCheck",
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
        when the backend is the collection's own
        (:mod:`parrot_parents.stores.postgres.search.bm25_index`), else the reason it is not.
        ``exact_filter``: whether the search's filter plan ranks exactly (a filter expected
        to keep few children,
        :class:`~parrot_parents.stores.postgres.search.filter_plan.FilterPlan`); False for a
        broad one. No I/O (only after the store is connected)."""


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
        text has that hash (hex); digests nobody holds are absent.

        Parents carry the hash of their whole document (see the loaders); one statement,
        served by the GIN index. Loaders use it to warn when a file is already stored under
        another id (the same file reached by two spellings of its path)."""


@runtime_checkable
class DocumentTable(ReplaceDocument, Protocol):
    """A documents table beside the collection: per document its text, hash, source and
    chunk-policy version (:mod:`parrot_parents.stores.postgres.collections.documents`),
    written in the same transaction as the document's rows."""

    @abstractmethod
    async def replace_document(
        self,
        document_id: str,
        documents: Sequence[Document],
        *,
        embeddings: Vectors | None = None,
        record: DocumentRecord | None = None,
    ) -> list[str]:
        """Atomically replace every row of ``document_id`` by ``documents``.

        Used by the loaders: re-chunking a document with other sizes leaves no stale rows.
        Delete and insert run in one transaction, so readers never see a half-written
        document, and a failure keeps the previous version. ``record``, when given, is
        written to the documents table in the same transaction. ``embeddings`` as in
        ``add_documents``.
        """

    @abstractmethod
    async def replace_documents(self, batch: Sequence[DocumentWriteItem]) -> list[list[str]]:
        """Replace several documents in ONE transaction (one round trip of rows).

        Each item is ``(document_id, documents, embeddings, record)`` as the arguments of
        :meth:`replace_document`. The rows go through a binary COPY (straight into the
        collection, or into a temporary table and one upsert when a row id is held by
        another document; :mod:`parrot_parents.stores.postgres.writes.writer`), under the
        advisory locks of every document. The batch is atomic as a whole: when any
        document's write fails, no document of the batch is changed (each keeps its
        previous version); write one document per call to isolate failures.

        Returns:
            The row ids of each document, in input order.

        Raises:
            ConfigurationError: a row that belongs to another document, a bad value.
            StoreError: the database refused the write (nothing of the batch is kept).
        """

    @abstractmethod
    async def document_states(self, document_ids: Sequence[str]) -> dict[str, DocumentState]:
        """The stored hash, policy version and source of each id; one statement. Ids
        without a documents row are absent."""

    @abstractmethod
    async def stale_documents(
        self, policy_versions: Sequence[str], *, after: str | None = None, limit: int = 100
    ) -> list[DocumentRecord]:
        """Up to ``limit`` documents stored under none of ``policy_versions``, in id
        order after the id ``after``, with their stored text and metadata (structure
        included)."""


@runtime_checkable
class BulkLoad(RowCount, Protocol):
    """A vector index that can be dropped for a bulk load and built once after it."""

    @abstractmethod
    def bulk_load(self, *, parallel_workers: int | None = None) -> VectorIndexDeferral:
        """Defer the HNSW index over a bulk load (for a new or empty collection).

        ``async with store.bulk_load() as load:`` drops the vector index, and builds it
        again when the block ends (also after an error), with the same name and parameters,
        ``maintenance_work_mem`` sized for the rows (see
        :class:`~parrot_parents.stores.postgres.writes.writer.VectorIndexDeferral`);
        ``load.build_seconds`` is the build time. Building once is far cheaper than keeping
        the graph up to date row by row (docs/benchmarks.md, "scale_write"). Searches during
        the load scan the table. Connect first.

        Args:
            parallel_workers: ``max_parallel_maintenance_workers`` for the build; None
                keeps the server's setting.
        """

    @abstractmethod
    async def vector_index_exists(self) -> bool:
        """Whether the collection's HNSW index exists (absent after a failed bulk build)."""


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
        """``similarity_search`` over the children, and what ``plan`` names (parents, a
        window's neighbours, a parent's children) read in the same statement: one round
        trip for the search and the expansion after it.

        Args:
            query: the question (embedded unless ``vector`` is given, and matched lexically
                in ``lexical``/``hybrid`` mode).
            plan: the reads to join (:class:`~parrot_parents.stores.context.ContextPlan`).
            limit, filter, search_mode, fusion: as ``similarity_search``.
            vector: the query embedding, when already computed.

        Returns:
            ``(results, context)``: the results exactly as ``similarity_search`` returns
            them, and a :class:`~parrot_parents.stores.context.Context` for
            :class:`~parrot_parents.stores.parents.prefetched.PrefetchedParentSearcher`.

        Raises:
            As ``similarity_search``.
        """

    @abstractmethod
    async def fetch_context(
        self, rows: Sequence[tuple[str, dict[str, Any]]], plan: ContextPlan
    ) -> Context:
        """``plan``'s reads for rows already found (after a reranker), in one statement.

        Args:
            rows: ``(id, metadata)`` of the retrievable rows kept (children, or parents
                reached through a summary), as the search returned them.
            plan: what to read.
        """


@runtime_checkable
class IndexedRows(Protocol):
    """Indexed rows (written by an ingestion strategy) are searched, and a hit on one is
    resolved to the row it stands for (:mod:`parrot_parents.stores.resolve`) before the
    search returns; each document records how it was indexed."""

    @abstractmethod
    async def ingestion_records(self) -> dict[str, dict[str, Any]]:
        """``{document_id: record}``: the strategy's record of each document indexed by
        one (``strategy``, ``enriched``, ``of``, ``indexed_rows``, ``model``), as recorded
        on its parent rows; documents ingested without one are absent."""


@runtime_checkable
class DocumentRows(Protocol):
    """The stored rows of one document, without their text."""

    @abstractmethod
    async def document_rows(self, document_id: str) -> list[DocumentRow]:
        """Every row of ``document_id``, parents first, then by ``start_index`` and id;
        an unknown document gives ``[]``. One parameterised statement; the row texts stay in
        the database (only their length in characters is read).

        Raises:
            ConfigurationError: ``document_id`` is not a non-empty string.
        """


@runtime_checkable
class ModelChecked(Protocol):
    """A store that records its collection's embedding model and refuses another."""

    @abstractmethod
    async def check_model(self, embedding: Any = None, *, writing: bool = False) -> None:
        """Refuse to embed with a model other than the collection's.

        ``embedding`` (default: the store's) is compared with the model recorded with the
        collection's vectors
        (:class:`~parrot_parents.stores.postgres.collections.model_contract.ModelContract`);
        a collection without a record gets this model recorded when ``writing``. Searches
        and writes that embed call it; a loader calls it with its own model before writing
        the vectors it made. Loads the model (once per embeddings object).

        Raises:
            ModelMismatchError: another model (of any dimension, when the collection
                records its model), or a collection in the middle of a re-embed.
            SchemaMismatchError: the model's vectors have another length than the
                collection's column (or the column a write would make).
            StoreError: the database failed.
        """

    @abstractmethod
    async def embed_question(self, question: str) -> list[float]:
        """``question``'s vector in the collection's space: embedded with the store's model
        once :meth:`check_model` passes, the one way a question's vector for this
        collection is made (searches, sentence trimming).

        Raises:
            ModelMismatchError, SchemaMismatchError: as :meth:`check_model`.
        """


@runtime_checkable
class Embedded(Protocol):
    """A store that embeds its questions with a model of its own (``embedding``)."""

    @property
    def embedding(self) -> Embeddings:
        """The model that embeds the store's questions and rows."""


@runtime_checkable
class Partitioned(Protocol):
    """A store whose collection may have a partition key: a metadata key whose values
    each get indexes (or a partition) of their own
    (:mod:`parrot_parents.stores.partition_keys`)."""

    @abstractmethod
    def collection_partition_key(self) -> str | None:
        """The collection's partition key, None when it has none (or before the store
        has connected)."""

    @abstractmethod
    async def stored_row_metadata(
        self, document_ids: Sequence[str]
    ) -> dict[str, Mapping[str, Any]]:
        """The metadata that each stored document among ``document_ids`` carries on its
        rows (the caller's, which holds its value of the partition key), by document id;
        documents not stored, or stored without it, are absent. The loaders compare a new
        version's value with it. An empty ``document_ids`` reads nothing.

        Raises:
            StoreError: the database failed.
        """


@runtime_checkable
class ScopeCheck(Protocol):
    """A store that says which of its rows a metadata filter keeps (a bot's scope, judged
    on rows that expansion read)."""

    @abstractmethod
    async def ids_matching(self, ids: Sequence[str], filter: Mapping[str, Any]) -> set[str]:
        """The ids among ``ids`` of rows that ``filter`` (:mod:`parrot_parents.stores.filters`)
        keeps, each judged on its own metadata, as a search's filter judges a row; ids of no
        row are absent. An empty ``ids`` reads nothing.

        Raises:
            ConfigurationError: a bad filter.
            StoreError: the database failed.
        """
