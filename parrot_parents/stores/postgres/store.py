"""PostgreSQL + pgvector store (SQLAlchemy 2 async, asyncpg, pgvector-python): a thin
facade over its parts, each one concern (Django's ``DatabaseWrapper`` is the model):
``connections`` (the pools of each event loop, the compiled statements), ``lifecycle``
(the collection opened, created, checked, dropped), ``searcher`` (every search and the
context read with it), ``writes``, and ``reads`` (the collection's other reads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncEngine

from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.context import Context, ContextPlan
from parrot_parents.stores.identifiers import collection_name
from parrot_parents.stores.postgres.collections.documents import (
    DocumentRecord,
    DocumentsTable,
    DocumentState,
)
from parrot_parents.stores.postgres.collections.filter_keys import validate_filter_keys
from parrot_parents.stores.postgres.collections.lifecycle import CollectionLifecycle
from parrot_parents.stores.postgres.collections.model_contract import ModelContract
from parrot_parents.stores.postgres.collections.partitions import validate_partition_key
from parrot_parents.stores.postgres.collections.reads import CollectionReads
from parrot_parents.stores.postgres.collections.schema import HNSWIndex
from parrot_parents.stores.postgres.connections.dsn import to_async_dsn
from parrot_parents.stores.postgres.connections.pools import Connections, start_up_settings
from parrot_parents.stores.postgres.connections.read_pool import ReadPool
from parrot_parents.stores.postgres.search.bm25_guard import (
    Bm25Guard,
    GuardChoice,
    validate_guard_choice,
)
from parrot_parents.stores.postgres.search.bm25_index import (
    LexicalBackend,
    LexicalChoice,
    validate_lexical_choice,
)
from parrot_parents.stores.postgres.search.hybrid import CANDIDATES, CandidateRule
from parrot_parents.stores.postgres.search.lexical import (
    LexicalTables,
    validate_text_search_config,
)
from parrot_parents.stores.postgres.search.searcher import Searcher
from parrot_parents.stores.postgres.writes.documents import DocumentWrites
from parrot_parents.stores.postgres.writes.writer import VectorIndexDeferral, vector_index_exists
from parrot_parents.stores.protocols import (
    BulkLoad,
    ContentLookup,
    ContextSearch,
    DocumentRows,
    DocumentTable,
    DocumentWriteItem,
    IndexedRows,
    LexicalRanking,
    ModelChecked,
    Partitioned,
    ScopeCheck,
    SourceLookup,
    Vectors,
)
from parrot_parents.stores.questions import check_question
from parrot_parents.stores.results import DocumentRow, SearchResult
from parrot_parents.stores.search_options import (
    Fusion,
    HNSWQueryOptions,
    SearchMode,
)
from parrot_parents.sync import run_sync

__all__ = ["PgVectorStore", "to_async_dsn"]


class PgVectorStore(
    AbstractStore,
    DocumentTable,
    BulkLoad,
    ContextSearch,
    IndexedRows,
    SourceLookup,
    ContentLookup,
    DocumentRows,
    ModelChecked,
    LexicalRanking,
    Partitioned,
    ScopeCheck,
):
    """A collection stored in one PostgreSQL table, searched with pgvector's HNSW index.

    Parents and children share the table; parents have ``embedding = NULL`` and so never
    enter the index. See :mod:`parrot_parents.stores.postgres.collections.schema` for the
    columns and indexes and :mod:`parrot_parents.stores.records.markers` for the metadata keys.

    Args:
        dsn: ``postgresql://`` DSN. ``None`` reads ``$PARROT_PARENTS_DSN`` and otherwise
            starts the embedded PostgreSQL (see :mod:`parrot_parents.embedded.server`).
        table: collection (table) name, default ``"documents"``; validated identifier.
        schema: PostgreSQL schema, default ``"public"``; validated identifier.
        embedding: the embedding model; default all-MiniLM-L6-v2 (384 dimensions).
        dimension: embedding length; when None, an existing collection's (read from its
            table, so that opening it and searching it lexically load no model; the model's
            own is compared with it before the model first embeds), else the model's.
        hnsw: index build parameters. search_options: query-time HNSW settings.
        embed_batch_size: children embedded per model call in :meth:`add_documents`.
        collection: alias of ``table``.
        create: create the table and indexes when missing (default True); False makes
            :meth:`connect` fail with :class:`StoreError` instead (for read-only callers).
        engine: an engine to share (from
            :func:`~parrot_parents.stores.postgres.connections.engine.make_engine`), so that
            several collections use one pool for writes and DDL; the store never disposes of
            it and never changes its sessions (its searches run on a private asyncpg pool
            opened with the engine's URL and ``engine_kwargs``' ``connect_args``,
            :mod:`parrot_parents.stores.postgres.connections.read_pool`). ``dsn`` is ignored.
        text_search_config: the text-search configuration of the lexical (BM25) index of a
            new collection: ``english`` (default) or ``simple`` for text of unknown
            language; an existing collection keeps the one it was created with.
        lexical_backend: what ranks the lexical branch of a new collection: ``auto``
            (default), ``pg_textsearch`` or ``sql``
            (:mod:`~parrot_parents.stores.postgres.search.bm25_index`). An existing
            collection keeps its own; ``sql`` ranks any collection in SQL, ``pg_textsearch``
            fails at connect on a collection without its index.
        bm25_guard: ``auto`` (default): a collection's pg_textsearch ``bm25`` index on a
            release that can hang (older than 1.3.0) is guarded by the store: its writers
            serialised under an advisory lock and kept from spilling the index's memtable,
            autovacuum off for the table, and the index rebuilt before each ``VACUUM``
            (:mod:`~parrot_parents.stores.postgres.search.bm25_guard`; all but the lock need
            a superuser role, as the embedded server's is). ``writers``: the writers' lock
            alone. ``off``: none of it; for the ``bm25_stress`` benchmark, which shows what
            the guard prevents.
        partition_key: a metadata key (say ``"tenant"``) whose every value gets an HNSW
            index of its own, built by the write that first stores the value; a search whose
            filter or scope fixes the key to one value ranks through that index
            (:mod:`~parrot_parents.stores.postgres.collections.partitions`). Recorded with
            the collection; None (default) opens any collection with the key it has. A
            store that may create gives an existing collection without a key this one
            (building the indexes of the values it holds).
        filter_keys: metadata keys filters read (``["year"]``), each given a B-tree index
            and statistics at connect by a store that may create, required by one that may
            not (:mod:`~parrot_parents.stores.postgres.collections.filter_keys`).

    Nothing connects at construction; the first call (or :meth:`connect`, or ``async
    with store``) does. A store may be used from several event loops, in any order: each
    loop gets its own pools (:mod:`parrot_parents.stores.postgres.connections.pools`).

    Raises:
        ConfigurationError: bad identifiers or parameters (at construction).
        SchemaMismatchError: the table exists with another embedding dimension (the
            ``dimension`` given: at connect; the model's: when it would embed).
        ModelMismatchError: (when it would embed) the collection's vectors are another
            model's (:mod:`parrot_parents.stores.postgres.collections.model_contract`).
        StoreError: the server cannot be reached.
    """

    def __init__(
        self,
        dsn: str | None = None,
        table: str | None = None,
        *,
        schema: str = "public",
        embedding: SentenceTransformerEmbeddings | None = None,
        dimension: int | None = None,
        hnsw: HNSWIndex | None = None,
        search_options: HNSWQueryOptions | None = None,
        embed_batch_size: int = 64,
        collection: str | None = None,
        engine_kwargs: dict[str, Any] | None = None,
        create: bool = True,
        text_search_config: str | None = None,
        engine: AsyncEngine | None = None,
        lexical_backend: LexicalChoice = "auto",
        bm25_guard: GuardChoice = "auto",
        partition_key: str | None = None,
        filter_keys: Sequence[str] | None = None,
    ) -> None:
        if table is not None and collection is not None and table != collection:
            raise ConfigurationError(f"table={table!r} and collection={collection!r} differ")
        chosen = table if table is not None else collection
        #: The checked name: the parts take it and never check it again.
        self.name = collection_name("documents" if chosen is None else chosen, schema)
        self.table, self.schema = self.name.table, self.name.schema
        if embed_batch_size < 1:
            raise ConfigurationError(f"embed_batch_size must be >= 1, got {embed_batch_size!r}")
        self.embedding = embedding or SentenceTransformerEmbeddings()
        self.hnsw = hnsw or HNSWIndex()
        self.search_options = search_options or HNSWQueryOptions()
        self.embed_batch_size = embed_batch_size
        self.create = create
        wanted_config = (
            None if text_search_config is None else validate_text_search_config(text_search_config)
        )
        #: The collection's text-search configuration; None until connected, or when the
        #: collection has no lexical index (a read-only store on an old collection).
        self.text_search_config: str | None = None
        wanted_backend = validate_lexical_choice(lexical_backend)
        self.bm25_guard = validate_guard_choice(bm25_guard)
        #: The guard of the collection's ``bm25`` index (None: it has none, its release
        #: needs none, or ``bm25_guard="off"``); set on connect.
        self.guard: Bm25Guard | None = None
        #: The collection's lexical backend (``pg_textsearch`` or ``sql``); None until connected.
        self.lexical_backend: LexicalBackend | None = None
        self.lexical = LexicalTables(self.name)
        #: Which query lexemes generate lexical candidates
        #: (:class:`~parrot_parents.stores.postgres.search.hybrid.CandidateRule`).
        self.lexical_candidates: CandidateRule = CANDIDATES
        self.documents = DocumentsTable(self.name)
        self.model_contract = ModelContract(self.name)
        self.connections = Connections(
            dsn,
            dict(engine_kwargs or {}),
            engine,
            lambda: start_up_settings(self.search_options),
        )
        wanted_key = validate_partition_key(partition_key)
        #: The collection's partition key (None: it has none); set on connect.
        self.partition_key: str | None = None
        self.lifecycle = CollectionLifecycle(
            self, dimension, wanted_config, wanted_backend, wanted_key
        )
        self.lifecycle.wanted_filter_keys = validate_filter_keys(filter_keys)
        self.searcher = Searcher(self, self.connections.statements, wanted_backend)
        self.writes = DocumentWrites(self, self.lifecycle)
        self.reads = CollectionReads(self.name, self.documents, self.lifecycle.ready)

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def collection(self) -> str:
        """Alias of :attr:`table`."""
        return self.table

    def collection_partition_key(self) -> str | None:
        """:attr:`partition_key` (None until connected, or when the collection has none)."""
        return self.partition_key

    @property
    def dimension(self) -> int:
        """Embedding length: as given, else the existing collection's once connected, else
        the model's (which loads it)."""
        return self.lifecycle.dimension

    @property
    def engine(self) -> AsyncEngine:
        """The running event loop's SQLAlchemy engine; only after :meth:`connect`."""
        return self.connections.pools().engine

    @property
    def read_pool(self) -> ReadPool:
        """The running event loop's pool of hot reads
        (:mod:`~parrot_parents.stores.postgres.connections.read_pool`); after :meth:`connect`."""
        return self.connections.pools().reads

    @property
    def sa_table(self) -> Table:
        """The SQLAlchemy ``Table`` of the collection; only after :meth:`connect`."""
        return self.lifecycle.sa_table()

    @property
    def qualified_name(self) -> str:
        """``schema.table`` (both validated identifiers)."""
        return self.name.qualified

    async def connect(self) -> PgVectorStore:
        """Connect and check the collection, creating it when missing (unless ``create``
        is False): the explicit open of a writer.

        The first write connects this way too; a read that connects the store never
        creates a missing collection (:meth:`ready`), though on a store that may create
        it completes an existing one as the first write would: an older collection's
        lexical index and documents table, and the ``partition_key`` asked for with the
        indexes of the values already stored. Creation is atomic and safe under
        concurrency (:mod:`parrot_parents.stores.postgres.collections.creation`).

        Raises:
            CollectionNotFoundError: the collection is missing and ``create`` is False.
            SchemaMismatchError: the name is a table that is not a collection, another
                embedding dimension, or a name whose derived objects are taken.
            StoreError: the server cannot be reached or refused.
        """
        await self.lifecycle.open(create=self.create)
        return self

    async def close(self) -> None:
        """Dispose of the connection pools of every event loop the store was used from
        (not of a shared engine), each on its own loop. Safe to call twice, from any loop.

        The statements built for this collection are forgotten too: after a reconnect
        they are built again from what the collection is then (it may have been
        recreated with another text-search configuration)."""
        self.lifecycle.writable = False
        self.model_contract.forget()
        await self.connections.close()

    def close_sync(self) -> None:
        """:meth:`close` for a store used through the ``*_sync`` calls (no event loop)."""
        run_sync(self.close())

    async def __aenter__(self) -> PgVectorStore:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def ready(self) -> tuple[AsyncEngine, Table]:
        """``(engine, table)`` for a read, connecting first when needed (for parent
        searchers); a read never creates the collection.

        Raises:
            CollectionNotFoundError: the store is not connected and the collection does
                not exist.
        """
        return await self.lifecycle.ready()

    async def check_model(self, embedding: Any = None, *, writing: bool = False) -> None:
        await self.lifecycle.check_model(embedding or self.embedding, writing=writing)

    async def embed_question(self, question: str) -> list[float]:
        await self.check_model()
        return await self.embedding.aembed_query(question)

    # -- writes ------------------------------------------------------------------------

    async def add_documents(
        self, documents: Sequence[Document], *, embeddings: Vectors | None = None
    ) -> list[str]:
        """Insert or update rows (parents and/or children), one transaction per source
        document; returns the row ids, in input order.

        Markers are normalised (:func:`~parrot_parents.stores.records.markers.normalize_markers`);
        children without a given vector (``embeddings``:
        :data:`~parrot_parents.stores.protocols.Vectors`) are embedded in batches; parents
        are stored without one. Ids come from ``Document.id`` or are derived
        deterministically from ``document_id`` and the span, so adding the same rows twice
        leaves one copy.

        Raises:
            ConfigurationError: a non-Document, or a vector of the wrong length.
            StoreError: the database refused the write (nothing of that document is kept).
        """
        return await self.writes.add_documents(documents, embeddings)

    async def replace_document(
        self,
        document_id: str,
        documents: Sequence[Document],
        *,
        embeddings: Vectors | None = None,
        record: DocumentRecord | None = None,
    ) -> list[str]:
        return (await self.replace_documents([(document_id, documents, embeddings, record)]))[0]

    async def replace_documents(self, batch: Sequence[DocumentWriteItem]) -> list[list[str]]:
        return await self.writes.replace_documents(batch)

    def bulk_load(self, *, parallel_workers: int | None = None) -> VectorIndexDeferral:
        return VectorIndexDeferral(
            self.engine, self.sa_table, self.dimension, self.hnsw, parallel_workers
        )

    async def vector_index_exists(self) -> bool:
        return await vector_index_exists(*await self.ready())

    async def vacuum(self) -> bool:
        """``VACUUM (ANALYZE)`` the collection now. A guarded ``bm25`` index (see
        ``bm25_guard``) is rebuilt first, under the lock its writers take, so writes wait
        for it (about 30 s at 100k children on two shared cores, the ``VACUUM`` the most);
        the store also does this by itself after a write that finds it due, by
        autovacuum's default rule.

        Returns:
            True when the guard's rebuild ran, False for a plain ``VACUUM``.

        Raises:
            CollectionNotFoundError: no such collection.
            StoreError: the database failed or is unavailable.
        """
        return await self.writes.vacuum()

    async def delete(self, document_id: str) -> int:
        """:meth:`AbstractStore.delete` in one statement, under the document's advisory lock.

        Raises:
            CollectionNotFoundError: the collection does not exist (nothing is created).
        """
        return await self.writes.delete(document_id)

    async def drop(self) -> None:
        """Drop the collection: its table and every object it owns, in one transaction;
        then close the store, so that a later read raises
        :class:`~parrot_parents.errors.CollectionNotFoundError` and a later write creates
        the collection again. A missing collection is left as it is.

        Its locks are all taken first, waiting briefly; when a search holds one, the drop
        lets go and tries again, so it never deadlocks with searches
        (:func:`~parrot_parents.stores.postgres.collections.creation.drop_collection`).

        Raises:
            SchemaMismatchError: the name is a table that is not a collection (never
                dropped).
            StoreError: the database refused.
        """
        await self.lifecycle.drop()

    async def set_lexical_backend(self, backend: LexicalBackend) -> LexicalBackend:
        """Move the collection to the lexical ``backend``
        (:mod:`~parrot_parents.stores.postgres.search.bm25_index`): build its ``bm25`` index
        over the rows there (``pg_textsearch``), or drop it (``sql``), in one transaction;
        searches of other sessions wait for it. Returns the backend the collection had.

        Moving to ``pg_textsearch`` adds a stored column, which rewrites the table and
        builds every index again, the HNSW graph with the memory a bulk load's build gets
        (:func:`~parrot_parents.stores.postgres.collections.creation.size_rebuild_memory`):
        minutes per hundred thousand children, not seconds.

        Raises:
            ConfigurationError: an unknown backend, or ``pg_textsearch`` on a server without
                pg_textsearch.
            CollectionNotFoundError: the collection does not exist (nothing is created).
        """
        if validate_lexical_choice(backend) == "auto":
            raise ConfigurationError("give a backend to move to: pg_textsearch or sql")
        return await self.lifecycle.set_lexical_backend(backend)

    # -- searches ----------------------------------------------------------------------

    async def similarity_search(
        self,
        query: str,
        limit: int = 10,
        include_parents: bool = False,
        filter: dict[str, Any] | None = None,
        *,
        search_mode: SearchMode = "dense",
        fusion: Fusion | None = None,
    ) -> list[SearchResult]:
        """The ``limit`` rows best matching ``query``, best first.

        Args:
            query: question text; embedded with the store's model (not for ``lexical``).
            limit: rows wanted, 1..10000, default 10. When at least ``limit`` rows match,
                exactly ``limit`` come back, even under a selective ``filter``
                (pgvector iterative index scans, see :class:`HNSWQueryOptions`).
            include_parents: also return rows marked as parents (legacy behaviour).
                Default False applies the spec's legacy-compatible predicate: marked
                children and rows without any marker are returned, parents are not.
                Indexed rows (ingestion strategies) are ranked too, but never returned:
                each hit on one becomes the row it stands for (``via`` names it), once,
                at its best rank (:mod:`parrot_parents.stores.resolve`).
            filter: metadata filter in the langchain-postgres language, applied in SQL to
                both search branches (``{"document_id": "handbook"}``, operators ``$eq $ne $lt
                $lte $gt $gte $in $nin $between $exists $like $ilike $and $or $not``:
                :mod:`parrot_parents.stores.filters`).
            search_mode: ``dense`` (default: cosine kNN), ``lexical`` (BM25 over the
                children) or ``hybrid`` (both in one statement, fused by weighted RRF);
                see :mod:`parrot_parents.stores.postgres.search.hybrid`.
            fusion: RRF constant, branch weights and depth for ``hybrid``.

        Returns:
            :class:`SearchResult` rows with ``score`` (cosine similarity, higher is better;
            None in ``lexical`` mode), ``distance``, and each row's ``dense_rank`` and
            ``lexical_rank``.

        Raises:
            ConfigurationError: a bad ``query`` (empty, blank, over 4000 characters, a
                NUL or a lone surrogate: :mod:`parrot_parents.stores.questions`), ``limit``
                out of range, an unknown ``search_mode``, or a bad ``filter`` (an unknown
                operator, NaN/Infinity, a NUL character: the key is named); all before the
                model loads.
            LexicalIndexMissingError: ``lexical``/``hybrid`` on a collection without a
                lexical index (``parrot-parents migrate`` adds it).
            StoreError: the database failed or is unavailable (``unavailable=True``).
        """
        mode, vector = await self.searcher.question(query, search_mode, limit, filter, None)
        return await self.similarity_search_by_vector(
            vector, limit, include_parents, filter, search_mode=mode, query=query, fusion=fusion
        )

    async def similarity_search_by_vector(
        self,
        vector: Sequence[float] | None,
        limit: int = 10,
        include_parents: bool = False,
        filter: dict[str, Any] | None = None,
        *,
        search_mode: SearchMode = "dense",
        query: str | None = None,
        fusion: Fusion | None = None,
    ) -> list[SearchResult]:
        """:meth:`similarity_search` with a precomputed query vector (None only in
        ``lexical`` mode; ``hybrid`` also needs the ``query`` text, checked as a question)."""
        if query is not None:
            check_question(query)
        results, _ = await self.searcher.run(
            search_mode, limit, vector, query, filter, fusion, include_parents
        )
        return results

    def lexical_ranking(
        self,
        filter: Mapping[str, Any] | None,
        fusion: Fusion | None,
        exact_filter: bool = True,
    ) -> tuple[str, str | None]:
        return self.searcher.lexical_ranking(filter, fusion, exact_filter)

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
        mode, vector = await self.searcher.question(query, search_mode, limit, filter, vector)
        results, context = await self.searcher.run(
            mode, limit, vector, query, filter, fusion, plan=plan
        )
        assert context is not None
        return results, context

    async def fetch_context(
        self, rows: Sequence[tuple[str, dict[str, Any]]], plan: ContextPlan
    ) -> Context:
        return await self.searcher.fetch_context(rows, plan)

    # -- reads -------------------------------------------------------------------------

    async def fetch_children(self, parent_ids: Sequence[str]) -> dict[str, list[SearchResult]]:
        """As :meth:`AbstractParentSearcher.fetch_children`; one statement."""
        return await self.reads.fetch_children(parent_ids)

    async def fetch_chunk_ranges(
        self, ranges: Sequence[tuple[str, int, int]]
    ) -> dict[str, list[SearchResult]]:
        """As :meth:`AbstractParentSearcher.fetch_neighbours`; one statement."""
        return await self.reads.fetch_chunk_ranges(ranges)

    async def document_sources(self, document_ids: Sequence[str]) -> dict[str, set[str]]:
        return await self.reads.document_sources(document_ids)

    async def document_rows(self, document_id: str) -> list[DocumentRow]:
        return await self.reads.document_rows(document_id)

    async def ids_matching(self, ids: Sequence[str], filter: Mapping[str, Any]) -> set[str]:
        return await self.searcher.ids_matching(ids, filter)

    async def ingestion_records(self) -> dict[str, dict[str, Any]]:
        return await self.reads.ingestion_records()

    async def documents_with_content(self, digests: Sequence[str]) -> dict[str, set[str]]:
        return await self.reads.documents_with_content(digests)

    async def document_states(self, document_ids: Sequence[str]) -> dict[str, DocumentState]:
        return await self.reads.document_states(document_ids)

    async def stored_row_metadata(
        self, document_ids: Sequence[str]
    ) -> dict[str, Mapping[str, Any]]:
        """As :meth:`~parrot_parents.stores.protocols.Partitioned.stored_row_metadata`,
        from the documents table (one read): a document written without its record, by
        :meth:`add_documents` say, is absent."""
        states = await self.reads.document_states(document_ids) if document_ids else {}
        return {d: s.row_metadata for d, s in states.items() if s.row_metadata is not None}

    async def stale_documents(
        self, policy_versions: Sequence[str], *, after: str | None = None, limit: int = 100
    ) -> list[DocumentRecord]:
        return await self.reads.stale_documents(policy_versions, after, limit)

    async def count(self, *, include_parents: bool = True) -> int:
        return await self.reads.count(include_parents)
