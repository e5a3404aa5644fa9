"""PostgreSQL + pgvector store (SQLAlchemy 2 async, asyncpg, pgvector-python)."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple, TypeVar

import numpy as np
from langchain_core.documents import Document
from sqlalchemy import (
    Float,
    Integer,
    MetaData,
    Table,
    Text,
    and_,
    bindparam,
    cast,
    delete,
    func,
    null,
    or_,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncEngine

from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import (
    CollectionNotFoundError,
    ConfigurationError,
    LexicalIndexMissingError,
    StoreError,
)
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.context import Context, ContextPlan
from parrot_parents.stores.filters import (
    compile_filter,
    estimated_part,
    filter_params,
    has_unestimated,
)
from parrot_parents.stores.identifiers import check_collection_name, validate_identifier
from parrot_parents.stores.postgres.collections.creation import (
    collection_state,
    drop_collection,
    missing_collection,
    move_lexical_backend,
    not_a_collection,
    prepare_collection,
)
from parrot_parents.stores.postgres.collections.documents import (
    DocumentRecord,
    DocumentsTable,
    DocumentState,
)
from parrot_parents.stores.postgres.collections.model_contract import ModelContract, fingerprint
from parrot_parents.stores.postgres.collections.schema import (
    HNSWIndex,
    collection_table,
    meta_field,
)
from parrot_parents.stores.postgres.collections.setup import (
    check_dimension,
    create_extension,
    dimension_mismatch,
    stored_dimension,
)
from parrot_parents.stores.postgres.connections.dsn import to_async_dsn
from parrot_parents.stores.postgres.connections.engine import (
    engine_for_url,
    make_engine,
    store_errors,
)
from parrot_parents.stores.postgres.connections.per_loop import PerLoop, release_all, running_loop
from parrot_parents.stores.postgres.connections.prepared import SAMPLE_PERCENT, Prepared
from parrot_parents.stores.postgres.connections.read_pool import ReadConnection, ReadPool
from parrot_parents.stores.postgres.connections.reads import Settings, read, write
from parrot_parents.stores.postgres.search.bm25_index import (
    LexicalBackend,
    LexicalChoice,
    bm25_index_name,
    check_lexical_choice,
    read_lexical_backend,
    validate_lexical_choice,
)
from parrot_parents.stores.postgres.search.context_sql import (
    Split,
    search_with_context,
    seeded_statement,
    split_rows,
)
from parrot_parents.stores.postgres.search.filter_plan import (
    FilterPlan,
    estimate_statement,
    estimated_rows,
    sample_percent,
    sample_statement,
    sampled_rows,
    scan_ceiling,
    threshold,
)
from parrot_parents.stores.postgres.search.hybrid import (
    CANDIDATES,
    EXACT_CANDIDATES,
    CandidateRule,
    query_vector,
    search_statement,
)
from parrot_parents.stores.postgres.search.kept import KEPT_LIMIT, kept_rows
from parrot_parents.stores.postgres.search.lexical import (
    DEFAULT_TEXT_SEARCH_CONFIG,
    LexicalTables,
    read_text_search_config,
    validate_text_search_config,
)
from parrot_parents.stores.postgres.search.request import (
    MAX_LIMIT,
    SearchRequest,
    check_limit_and_filter,
)
from parrot_parents.stores.postgres.search.target_filter import (
    reads_hierarchy,
    searched_filter,
    targets_kept,
)
from parrot_parents.stores.postgres.writes.writer import (
    DocumentWrite,
    VectorIndexDeferral,
    vector_index_exists,
    write_batch,
)
from parrot_parents.stores.protocols import (
    BulkLoad,
    ContentLookup,
    ContextSearch,
    DocumentRows,
    DocumentTable,
    IndexedRows,
    LexicalRanking,
    ModelChecked,
    SourceLookup,
)
from parrot_parents.stores.questions import check_question
from parrot_parents.stores.records.markers import (
    CHILD_PREDICATE,
    INDEXED_CONTAINMENT,
    NOT_INDEXED_PREDICATE,
    PARENT_PREDICATE,
    SEARCH_PREDICATE,
    is_searchable,
)
from parrot_parents.stores.records.rows import check_document_rows, embed_missing, prepare_rows
from parrot_parents.stores.resolve import resolve_indexed
from parrot_parents.stores.results import DocumentRow, SearchResult, SearchResults
from parrot_parents.stores.search_options import (
    Fusion,
    HNSWQueryOptions,
    SearchMode,
    check_search_mode,
)
from parrot_parents.sync import run_sync

__all__ = ["PgVectorStore", "to_async_dsn"]

T = TypeVar("T")

#: SQLSTATE of an internal error of the server (``cache lookup failed``...).
_INTERNAL_ERROR = "XX000"


class _Pools(NamedTuple):
    """The connection pools of one event loop
    (:mod:`parrot_parents.stores.postgres.connections.per_loop`)."""

    engine: AsyncEngine
    reads: ReadPool
    owns_engine: bool


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
):
    """A collection stored in one PostgreSQL table, searched with pgvector's HNSW index.

    Parents and children share the table; parents have ``embedding = NULL`` and so never
    enter the index. See :mod:`parrot_parents.stores.postgres.collections.schema` for the columns
    and indexes
    and :mod:`parrot_parents.stores.records.markers` for the metadata keys.

    Args:
        dsn: ``postgresql://`` DSN. ``None`` reads ``$PARROT_PARENTS_DSN`` and otherwise
            starts the embedded PostgreSQL (see :mod:`parrot_parents.embedded.server`).
        table: collection (table) name, default ``"documents"``; validated identifier.
        schema: PostgreSQL schema, default ``"public"``; validated identifier.
        embedding: the embedding model; default all-MiniLM-L6-v2 (384 dimensions).
        dimension: embedding length; when None, an existing collection's (read from its
            table, so that opening it and searching it lexically load no model; the
            model's own is compared with it before the model first embeds), else the
            model's.
        hnsw: index build parameters. search_options: query-time HNSW settings.
        embed_batch_size: children embedded per model call in :meth:`add_documents`.
        collection: alias of ``table``.
        create: create the table and indexes when missing (default True); False makes
            :meth:`connect` fail with :class:`StoreError` instead (for read-only callers).
        engine: an engine to share (from
        :func:`~parrot_parents.stores.postgres.connections.engine.make_engine`),
            so that several collections use one pool for writes and DDL; the store never
            disposes of it and never changes its sessions (its searches run on a private
            asyncpg pool opened with the engine's URL and ``engine_kwargs``'
            ``connect_args``, :mod:`parrot_parents.stores.postgres.connections.read_pool`). ``dsn``
            is ignored.
        text_search_config: the text-search configuration of the lexical (BM25) index of a
            new collection: ``english`` (default) or ``simple`` for text of unknown
            language; an existing collection keeps the one it was created with.
        lexical_backend: what ranks the lexical branch of a new collection
            (:mod:`parrot_parents.stores.postgres.search.bm25_index`): ``auto`` (default;
            pg_textsearch's
            ``bm25`` index where the server has a release of it that does not hang
            concurrent writers, 1.1.0 or newer, else ``sql``, BM25 in SQL),
            ``pg_textsearch`` or ``sql``. An existing collection keeps its own (move it with
            ``parrot-parents reindex --lexical``); ``sql`` ranks any collection in SQL (each
            keeps the SQL statistics), ``pg_textsearch`` fails at connect on a collection
            without its index.

    Nothing connects at construction; the first call (or ``await store.connect()``,
    or ``async with store``) creates the extension, the table and its indexes when
    missing, and checks an existing table's embedding dimension.

    A store may be used from several event loops, in any order: ``await`` in your loop,
    the ``*_sync`` twins (the package's loop thread, :mod:`parrot_parents.sync`), each
    ``asyncio.run``. Connection pools belong to the loop that opens them, so each loop
    gets its own pair (the engine's and the read pool), opened on its first use there
    (:mod:`parrot_parents.stores.postgres.connections.per_loop`); a shared ``engine`` serves the
    loop that
    connected the store, other loops get a private engine of its URL. :meth:`close`
    releases the pools of every loop.

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
    ) -> None:
        if table is not None and collection is not None and table != collection:
            raise ConfigurationError(f"table={table!r} and collection={collection!r} differ")
        chosen = table if table is not None else collection
        self.table = check_collection_name("documents" if chosen is None else chosen)
        self.schema = validate_identifier(schema, "schema")
        if embed_batch_size < 1:
            raise ConfigurationError(f"embed_batch_size must be >= 1, got {embed_batch_size!r}")
        self.embedding = embedding or SentenceTransformerEmbeddings()
        self._dimension = dimension
        # Whether the dimension was read from the table (a collection dropped and made
        # again takes the model's), and the models already compared with the column.
        self._from_table = False
        self._dimension_checked: weakref.WeakSet[Any] = weakref.WeakSet()
        self.hnsw = hnsw or HNSWIndex()
        self.search_options = search_options or HNSWQueryOptions()
        self.embed_batch_size = embed_batch_size
        self._dsn = dsn
        self._engine_kwargs = dict(engine_kwargs or {})
        self.create = create
        self._wanted_config = (
            None if text_search_config is None else validate_text_search_config(text_search_config)
        )
        #: The collection's text-search configuration; None until connected, or when the
        #: collection has no lexical index (a read-only store on an old collection).
        self.text_search_config: str | None = None
        self._wanted_backend = validate_lexical_choice(lexical_backend)
        #: The collection's lexical backend (``pg_textsearch`` or ``sql``); None until connected.
        self.lexical_backend: LexicalBackend | None = None
        self.lexical = LexicalTables(self.table, self.schema)
        #: Which query lexemes generate lexical candidates
        #: (:class:`~parrot_parents.stores.postgres.search.hybrid.CandidateRule`; exact below 5,000
        # children
        #: and under a metadata filter).
        self.lexical_candidates: CandidateRule = CANDIDATES
        #: The collection's documents table
        # (:mod:`parrot_parents.stores.postgres.collections.documents`).
        self.documents = DocumentsTable(self.table, self.schema)
        #: The collection's recorded embedding model
        # (:mod:`~parrot_parents.stores.postgres.collections.model_contract`).
        self.model_contract = ModelContract(self.schema, self.table)
        self._shared_engine = engine
        # The pools of the loop that connected the store (its "home")...
        self._engine: AsyncEngine | None = None
        self._reads: ReadPool | None = None
        self._home: asyncio.AbstractEventLoop | None = None
        # ... and those of every other loop it is used from, opened there on first use.
        self._elsewhere: PerLoop[_Pools] = PerLoop(self._new_pools)
        self._home_lock = threading.Lock()
        self._table: Table | None = None
        # Whether this connection has created (or completed) the collection.
        self._writable = False
        # Search statements without a filter, compiled once by their shape; bounded.
        self._statements: dict[tuple[Any, ...], Prepared] = {}
        self._indexed_rows_seen = False
        # An asyncio lock binds to one loop: each loop that connects has its own.
        self._connect_locks: PerLoop[asyncio.Lock] = PerLoop(asyncio.Lock)

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def collection(self) -> str:
        """Alias of :attr:`table`."""
        return self.table

    @property
    def dimension(self) -> int:
        """Embedding length: as given, else the existing collection's once connected, else
        the model's (which loads it)."""
        if self._dimension is None:
            self._dimension = self.embedding.dimension
        return self._dimension

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine of the running event loop (see the class docstring);
        only after :meth:`connect`."""
        return self._pools().engine

    def _pools(self) -> _Pools:
        """The pools of the running event loop (those that connected the store when no
        loop runs)."""
        engine, reads = self._engine, self._reads
        if engine is None or reads is None:
            raise StoreError("the store is not connected", hint="await store.connect() first")
        loop = running_loop()
        if loop is None or loop is self._home:
            return _Pools(engine, reads, engine is not self._shared_engine)
        return self._elsewhere.get(loop)

    def _new_pools(self) -> _Pools:
        """Pools for one more event loop: an engine of the home engine's URL (no I/O)."""
        home = self._engine
        if home is None:
            raise StoreError("the store is not connected", hint="await store.connect() first")
        engine = engine_for_url(home.url, **self._engine_kwargs)
        reads = ReadPool(self._connect_kwargs(engine), self._start_up_settings())
        return _Pools(engine, reads, owns_engine=True)

    @property
    def sa_table(self) -> Table:
        """The SQLAlchemy ``Table`` of the collection; only after :meth:`connect`."""
        if self._table is None:
            raise StoreError("the store is not connected", hint="await store.connect() first")
        return self._table

    @property
    def qualified_name(self) -> str:
        """``schema.table`` (both validated identifiers)."""
        return f"{self.schema}.{self.table}"

    async def connect(self) -> PgVectorStore:
        """Connect and check the collection, creating it when missing (unless ``create``
        is False): the explicit open of a writer.

        The first write connects this way too; a read that connects the store never
        creates anything (:meth:`ready`). Creation is atomic and safe under concurrency
        (:mod:`parrot_parents.stores.postgres.collections.creation`).

        Raises:
            CollectionNotFoundError: the collection is missing and ``create`` is False.
            SchemaMismatchError: the name is a table that is not a collection, another
                embedding dimension, or a name whose derived objects are taken.
            StoreError: the server cannot be reached or refused.
        """
        await self._open(create=self.create)
        return self

    async def _open(self, *, create: bool) -> None:
        """Connect when not connected; with ``create``, also create (or complete) the
        collection once for this connection."""
        if self._engine is not None and (self._writable or not create):
            return
        loop = asyncio.get_running_loop()
        async with self._connect_locks.get(loop):
            if self._engine is None:
                await self._connect(loop, create=create)
            elif create and not self._writable:
                await self._prepare(self.engine)

    async def _connect(self, loop: asyncio.AbstractEventLoop, *, create: bool) -> None:
        shared = self._shared_engine
        engine = shared or await make_engine(self._dsn, **self._engine_kwargs)
        try:
            # Before the model loads (the dimension may need it): an unknown collection,
            # or a table that is not one, is reported in a second, not after the load.
            async with store_errors(f"opening {self.qualified_name}"), engine.begin() as c:
                state = await c.run_sync(collection_state, self.schema, self.table)
                if state == "collection" and self._dimension is None:
                    stored = await stored_dimension(c, self.schema, self.table)
                    if stored is not None:
                        self._dimension, self._from_table = stored, True
            if state == "other":
                raise not_a_collection(self.schema, self.table)
            if state == "missing" and not create:
                raise missing_collection(self.schema, self.table)
            dimension = await asyncio.to_thread(lambda: self.dimension)
            self._table = collection_table(
                self.table,
                dimension,
                schema=self.schema,
                metadata=MetaData(),
                hnsw=self.hnsw,
                text_search_config=self._wanted_config or DEFAULT_TEXT_SEARCH_CONFIG,
            )
            if create or self.create:
                # A read on a store that may create completes an existing collection
                # (an older one gets its lexical index and documents table), as the
                # first write would; it never creates a missing one.
                await self._prepare(engine, must_exist=not create)
            else:
                await create_extension(engine, create=False)
                async with store_errors(f"opening {self.qualified_name}"), engine.begin() as c:
                    self.text_search_config = await c.run_sync(
                        read_text_search_config, self.table, self.schema
                    )
                    backend = await c.run_sync(read_lexical_backend, self.table, self.schema)
                    check_lexical_choice(self.table, backend, self._wanted_backend)
                    self.lexical_backend = backend
                    await check_dimension(c, self.schema, self.table, dimension)
                    await self.model_contract.read(c)
        except BaseException:
            self._writable = False
            if shared is None:
                await engine.dispose()
            raise
        reads = ReadPool(self._connect_kwargs(engine), self._start_up_settings())
        with self._home_lock:
            if self._engine is None:
                self._reads, self._engine, self._home = reads, engine, loop
                return
        # Another loop connected meanwhile: these pools serve this loop.
        self._elsewhere.put(loop, _Pools(engine, reads, engine is not shared))

    async def _prepare(self, engine: AsyncEngine, *, must_exist: bool = False) -> None:
        """Create the collection (extension, schema, table, indexes, lexical index,
        documents table) when missing, or complete an existing one; one transaction under
        the collection's creation lock, so concurrent first writers all succeed.
        ``must_exist``: complete only; a missing collection is an error."""
        await create_extension(engine, create=not must_exist)
        table = self.sa_table
        async with store_errors(f"preparing {self.qualified_name}"), engine.begin() as conn:
            setup = await conn.run_sync(
                prepare_collection,
                table,
                self._wanted_config,
                self.documents,
                must_exist,
                self._wanted_backend,
            )
            self.text_search_config, self.lexical_backend = setup
            await check_dimension(conn, self.schema, self.table, self.dimension)
            await self.model_contract.read(conn)
        self._writable = True

    def _connect_kwargs(self, engine: AsyncEngine) -> dict[str, Any]:
        """``asyncpg.connect`` arguments for the read pool: the engine's URL, as its dialect
        reads it, and the ``connect_args`` given in ``engine_kwargs``."""
        import inspect

        import asyncpg

        _, from_url = engine.dialect.create_connect_args(engine.url)
        known = inspect.signature(asyncpg.connect).parameters
        merged = {**from_url, **dict(self._engine_kwargs.get("connect_args") or {})}
        return {k: v for k, v in merged.items() if k in known}

    def _start_up_settings(self) -> dict[str, str]:
        """The read pool's session settings: those of an unfiltered search at the default
        depth (:meth:`_settings`), so that most searches set nothing."""
        opts = self.search_options
        return {
            "hnsw.ef_search": str(opts.ef_search),
            "hnsw.iterative_scan": opts.iterative_scan,
            "hnsw.max_scan_tuples": str(opts.max_scan_tuples),
            "enable_seqscan": "off",
        }

    async def close(self) -> None:
        """Dispose of the connection pools of every event loop the store was used from
        (not of a shared engine). Safe to call twice, from any loop.

        Each loop's pools are closed on that loop: awaited for the running loop and the
        package's loop thread, handed to any other loop without waiting (it may be the
        loop blocked in the ``*_sync`` call that closes); those of a closed loop are
        dropped (:mod:`parrot_parents.stores.postgres.connections.per_loop`).

        The statements built for this collection are forgotten too: after a reconnect
        they are built again from what the collection is then (it may have been
        recreated with another text-search configuration)."""
        with self._home_lock:
            engine, self._engine = self._engine, None
            reads, self._reads = self._reads, None
            home, self._home = self._home, None
            self._writable = False
        items: list[tuple[asyncio.AbstractEventLoop | None, _Pools]] = []
        if engine is not None and reads is not None:
            items.append((home, _Pools(engine, reads, engine is not self._shared_engine)))
        items.extend(self._elsewhere.take_all())
        self._statements.clear()
        self.model_contract.forget()
        if items:
            # One shielded step: a cancelled close still closes every pool.
            await asyncio.shield(release_all(items, _release))

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
        if self._engine is None:
            await self._open(create=False)
        return self.engine, self.sa_table

    async def _ready_to_write(self) -> tuple[AsyncEngine, Table]:
        """``(engine, table)`` for a write: the collection created first when missing
        (unless ``create`` is False)."""
        await self._open(create=self.create)
        return self.engine, self.sa_table

    # -- writes ------------------------------------------------------------------------

    def _rows(
        self,
        documents: Sequence[Document],
        embeddings: Sequence[Sequence[float] | np.ndarray | None] | np.ndarray | None,
    ) -> list[dict[str, Any]]:
        return prepare_rows(documents, embeddings, self.dimension)

    async def _embed_missing(self, rows: list[dict[str, Any]]) -> None:
        if any(r["embedding"] is None and is_searchable(r["cmetadata"]) for r in rows):
            await self.check_model(writing=True)
        await embed_missing(rows, self.embedding, self.embed_batch_size)

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
        model = embedding or self.embedding
        if not writing:
            # A read records nothing, so the record goes first: it names the collection's
            # model, whatever the dimension of the one refused.
            engine, _ = await self.ready()
            await self.model_contract.check(engine, model, writing=False)
            await self._check_model_dimension(model, writing=False)
            return
        # Before the collection is created and before the record: a first write must
        # neither make a column nor record a model that the other refuses.
        await self._check_model_dimension(model, writing=True)
        # A write creates the collection it checks against (a first add_documents).
        engine, _ = await self._ready_to_write()
        await self.model_contract.check(engine, model, writing=True)

    async def embed_question(self, question: str) -> list[float]:
        """``question`` embedded with the store's model, once :meth:`check_model` passes:
        the one way a question's vector for this collection is made (searches, sentence
        trimming).

        Raises:
            ModelMismatchError, SchemaMismatchError: as :meth:`check_model`.
        """
        await self.check_model()
        return await self.embedding.aembed_query(question)

    async def _check_model_dimension(self, model: Any, *, writing: bool) -> None:
        """Compare ``model``'s dimension with the collection's column: the ``dimension``
        given, the existing table's, or, for a collection a write is about to create, the
        store's model's (once per model; loads it).

        Raises:
            SchemaMismatchError: the model's vectors do not fit the column.
            CollectionNotFoundError: (not ``writing``) no such collection.
        """
        if model in self._dimension_checked:
            return
        exists = True
        if self._dimension is None:
            try:
                await self.ready()  # never creates: an existing table gives the dimension
            except CollectionNotFoundError:
                if not writing:
                    raise
                exists = False
        # The fingerprint's probe gives any embeddings object's length (only
        # ``embed_query`` is asked of it), and the record's check reuses it.
        given = (await asyncio.to_thread(fingerprint, model)).dimension
        column = int(await asyncio.to_thread(lambda: self.dimension))
        if given != column:
            raise dimension_mismatch(
                self.qualified_name, f"vector({column})", given, column, exists=exists
            )
        self._dimension_checked.add(model)

    async def add_documents(
        self,
        documents: Sequence[Document],
        *,
        embeddings: Sequence[Sequence[float] | np.ndarray | None] | np.ndarray | None = None,
    ) -> list[str]:
        """Insert or update rows, one transaction per source document.

        Markers are normalised (:func:`~parrot_parents.stores.records.markers.normalize_markers`);
        children without a given vector are embedded in batches; parents are stored
        without one. Ids come from ``Document.id`` or are derived deterministically from
        ``document_id`` and the span, so adding the same rows twice leaves one copy.

        Args:
            documents: LangChain ``Document``s (parents and/or children).
            embeddings: optional precomputed vectors aligned with ``documents``: lists of
                floats or numpy arrays of shape ``(dimension,)`` (or one
                ``(len(documents), dimension)`` array); ``None`` entries are embedded here.

        Returns:
            The row ids, in input order.

        Raises:
            ConfigurationError: a non-Document, or a vector of the wrong length.
            StoreError: the database refused the write (nothing of that document is kept).
        """
        rows = self._rows(documents, embeddings)
        await self._embed_missing(rows)
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            groups[row["cmetadata"]["document_id"]].append(row)
        for group in groups.values():
            await self._write([DocumentWrite(None, group)])
        return [r["id"] for r in rows]

    async def replace_document(
        self,
        document_id: str,
        documents: Sequence[Document],
        *,
        embeddings: Sequence[Sequence[float] | np.ndarray | None] | np.ndarray | None = None,
        record: DocumentRecord | None = None,
    ) -> list[str]:
        """Atomically replace every row of ``document_id`` by ``documents``.

        Used by the loaders: re-chunking a document with other sizes leaves no stale rows.
        Delete and insert run in one transaction, so readers never see a half-written
        document, and a failure keeps the previous version. ``record``, when given, is
        written to the documents table in the same transaction. ``embeddings`` as in
        :meth:`add_documents`.
        """
        return (await self.replace_documents([(document_id, documents, embeddings, record)]))[0]

    async def replace_documents(
        self,
        batch: Sequence[
            tuple[
                str,
                Sequence[Document],
                Sequence[Sequence[float] | np.ndarray | None] | np.ndarray | None,
                DocumentRecord | None,
            ]
        ],
    ) -> list[list[str]]:
        """Replace several documents in ONE transaction (one round trip of rows).

        Each item is ``(document_id, documents, embeddings, record)`` as the arguments of
        :meth:`replace_document`. The rows go through a binary COPY (straight into the
        collection, or into a temporary table and one upsert when a row id is held by
        another document; :mod:`parrot_parents.stores.postgres.writes.writer`), under the advisory
        locks
        of every document.
        The batch is atomic as a whole: when any document's write fails, no document of
        the batch is changed (each keeps its previous version); write one document per
        call to isolate failures.

        Returns:
            The row ids of each document, in input order.

        Raises:
            ConfigurationError: a row that belongs to another document, a bad value.
            StoreError: the database refused the write (nothing of the batch is kept).
        """
        writes = []
        for document_id, documents, embeddings, record in batch:
            rows = check_document_rows(document_id, self._rows(documents, embeddings))
            writes.append(DocumentWrite(document_id, rows, record))
        await self._embed_missing([r for w in writes for r in w.rows])
        await self._write(writes)
        return [[r["id"] for r in w.rows] for w in writes]

    def bulk_load(self, *, parallel_workers: int | None = None) -> VectorIndexDeferral:
        """Defer the HNSW index over a bulk load (for a new or empty collection).

        ``async with store.bulk_load() as load:`` drops the vector index, and builds it
        again when the block ends (also after an error), with the same name and parameters,
        ``maintenance_work_mem`` sized for the rows (see
        :class:`~parrot_parents.stores.postgres.writes.writer.VectorIndexDeferral`);
        ``load.build_seconds``
        is the build time. Building once is far cheaper than keeping the graph up to date
        row by row (docs/benchmarks.md, "scale_write"). Searches during the load scan the
        table. Connect first.

        Args:
            parallel_workers: ``max_parallel_maintenance_workers`` for the build; None
                keeps the server's setting.
        """
        return VectorIndexDeferral(
            self.engine, self.sa_table, self.dimension, self.hnsw.m, parallel_workers
        )

    async def vector_index_exists(self) -> bool:
        """Whether the collection's HNSW index exists (absent after a failed bulk build)."""
        engine, table = await self.ready()
        return await vector_index_exists(engine, table)

    async def _write(self, writes: Sequence[DocumentWrite]) -> None:
        """Write a batch of documents in one transaction (see replace_documents); after
        a change of the server's catalog, once more on fresh connections."""
        await self._through_catalog_change(lambda: self._write_once(writes))

    async def _write_once(self, writes: Sequence[DocumentWrite]) -> None:
        engine, table = await self._ready_to_write()
        document_ids = {str(r["cmetadata"]["document_id"]) for w in writes for r in w.rows}
        document_ids |= {w.document_id for w in writes if w.document_id is not None}

        async def work(conn: Any) -> None:
            await self._lock_documents(conn, sorted(document_ids))
            await write_batch(conn, table, self.documents, writes, self._delete_documents(table))

        await write(engine, f"write to {self.qualified_name}", work)

    @staticmethod
    def _delete_documents(table: Table) -> Any:
        """``DELETE`` of the rows of the documents in the bound text[] ``document_ids``;
        ``= ANY`` keeps one prepared statement whatever the number of ids."""
        return delete(table).where(
            meta_field(table, "document_id")
            == func.any(bindparam("document_ids", type_=ARRAY(Text)))
        )

    async def _lock_documents(self, conn: Any, document_ids: Sequence[str]) -> None:
        """Serialise the writers of each document: a transaction-level advisory lock.

        Keyed on ``(hashtext(schema.table), hashtext(document_id))``; held until the
        transaction ends. Without it two concurrent ``replace_document`` calls each delete
        nothing the other has committed yet, and both versions stay. Ids are locked in
        sorted order (one statement, in the order of the array), so two writers of the same
        documents cannot deadlock. A hash collision only makes two writers wait for each
        other, never lose data.
        """
        ids = sorted({str(d) for d in document_ids})
        if not ids:
            return
        await conn.execute(
            text(
                "SELECT count(pg_advisory_xact_lock(hashtext(:t), hashtext(u.d))) FROM"
                " (SELECT d FROM unnest(CAST(:ids AS text[])) WITH ORDINALITY AS x(d, n)"
                " ORDER BY n) u"
            ),
            {"t": self.qualified_name, "ids": ids},
        )

    async def delete(self, document_id: str) -> int:
        """Remove every row (parents and children) of a source document, in one statement.

        Raises:
            CollectionNotFoundError: the collection does not exist (nothing is created).
        """
        engine, table = await self.ready()

        async def work(conn: Any) -> int:
            await self._lock_documents(conn, [str(document_id)])
            result = await conn.execute(
                delete(table).where(meta_field(table, "document_id") == str(document_id))
            )
            await conn.execute(self.documents.delete(str(document_id)))
            return int(result.rowcount or 0)

        return await write(engine, f"delete from {self.qualified_name}", work)

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
        try:
            engine, table = await self.ready()
        except CollectionNotFoundError:
            return

        async def work(conn: Any) -> None:
            await conn.run_sync(drop_collection, table, self.lexical, self.documents)

        await write(engine, f"drop {self.qualified_name}", work, retry_lock_conflicts=True)
        self.model_contract.forget()
        if self._from_table:
            # The collection made again is the model's.
            self._dimension, self._from_table = None, False
            self._dimension_checked = weakref.WeakSet()
        await self.close()

    async def set_lexical_backend(self, backend: LexicalBackend) -> LexicalBackend:
        """Move the collection to the lexical ``backend`` (:mod:`~parrot_parents.stores.
        bm25_index`): build its ``bm25`` index over the rows there (``pg_textsearch``), or drop it
        (``sql``), in one transaction; searches of other sessions wait for it.
        Returns the backend the collection had.

        Moving to ``pg_textsearch`` adds a stored column, which rewrites the table and
        builds every index again, the HNSW graph with the memory a bulk load's build gets
        (:func:`~parrot_parents.stores.postgres.collections.creation.size_rebuild_memory`): minutes
        per
        hundred thousand children, not seconds.

        Raises:
            ConfigurationError: an unknown backend, or ``pg_textsearch`` on a server without
                pg_textsearch.
            CollectionNotFoundError: the collection does not exist (nothing is created).
        """
        if validate_lexical_choice(backend) == "auto":
            raise ConfigurationError("give a backend to move to: pg_textsearch or sql")
        engine, _ = await self.ready()

        async def work(conn: Any) -> LexicalBackend:
            before: LexicalBackend = await conn.run_sync(
                move_lexical_backend, self.schema, self.table, backend
            )
            return before

        before = await write(engine, f"move {self.qualified_name} to {backend}", work)
        self.lexical_backend = backend
        self._statements.clear()
        return before

    # -- reads -------------------------------------------------------------------------

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
                both search branches: plain values are JSON containment
                (``{"document_id": "handbook"}``, served by the GIN index), operators ``$eq
                $ne $lt $lte $gt $gte $in $nin $between $exists $like $ilike $and $or $not``
                (see :mod:`parrot_parents.stores.filters`).
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
        check_question(query)  # a bad question fails before the model loads
        mode = check_search_mode(search_mode)
        check_limit_and_filter(limit, filter)  # and so does a bad limit or filter
        await self.ready()  # and so does an unknown collection
        vector = None
        if mode != "lexical":
            vector = await self.embed_question(query)
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
        request = SearchRequest.build(
            mode=search_mode,
            limit=limit,
            dimension=self.dimension,
            vector=vector,
            text=query,
            filter=filter,
            fusion=fusion,
            include_parents=include_parents,
        )
        results, _ = await self._search(request)
        return results

    async def _search(self, request: SearchRequest) -> tuple[list[SearchResult], Context | None]:
        return await self._through_catalog_change(lambda: self._search_once(request))

    async def _through_catalog_change(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``, run once more on fresh connections after an internal error of
        the server (SQLSTATE XX000).

        The connections keep type OIDs: the vector codec and prepared statements. When the
        ``vector`` extension is dropped and created again under a running store, its type
        gets a new OID and every statement on those connections fails with "cache lookup
        failed for type". Closing the store drops them (the read pool, the statements, an
        engine of its own); the retry reconnects. A second failure is raised with the
        likely cause and the fix.
        """
        try:
            return await attempt()
        except StoreError as exc:
            if exc.sqlstate != _INTERNAL_ERROR:
                raise
        await self.close()
        try:
            return await attempt()
        except StoreError as exc:
            if exc.sqlstate != _INTERNAL_ERROR:
                raise
            raise StoreError(
                f"{exc.message}; the server's catalog may have changed under the store's "
                "connections (the vector extension dropped and created again)",
                hint="close the store and open it again (restart the service); an engine "
                "shared with the store keeps its own connections, dispose of it too",
                sqlstate=exc.sqlstate,
            ) from exc

    async def _search_once(
        self, request: SearchRequest
    ) -> tuple[list[SearchResult], Context | None]:
        engine, table = await self.ready()
        if request.mode != "dense" and self.text_search_config is None:
            raise LexicalIndexMissingError(
                f"collection {self.table!r} has no lexical index",
                hint=f"run `parrot-parents migrate --collection {self.table}`",
            )
        # A hit on an indexed row resolves to its retrievable row (read in the same
        # statement); several hits on one row keep the best. Dedup can leave fewer than
        # ``limit``: search deeper, then cut.
        fetch = request
        while True:
            split, plan = await self._ranked(engine, table, fetch)
            found = split.hits
            resolved = resolve_indexed(found, split.targets)
            exhausted = len(found) < fetch.limit or fetch.limit >= MAX_LIMIT
            if len(resolved) >= request.limit or exhausted:
                results = resolved[: request.limit]
                if plan is not None:
                    results = [replace(r, filter_plan=plan) for r in results]
                return SearchResults(results, filter_plan=plan), split.context
            fetch = fetch.deeper(min(MAX_LIMIT, fetch.limit * 4))

    def _settings(self, request: SearchRequest, index_only: bool = False) -> Settings:
        """The session settings a search's statement needs, every one that any search
        statement changes: they stay on the read pool's connection after it.

        Without a filter, sequential scans are disabled: on a small table with a large
        ``ef_search`` the planner costs the HNSW scan above a full scan and sort, and picks
        the full scan, several times slower (37 ms against 6.5 ms at 10k rows with
        ``ef_search`` 200). It pays at the default ``ef_search`` too: at 100k children the
        store's statements ran at p50 0.94 ms (dense) and 34 ms (hybrid) with it off,
        against 1.39 ms and 54 ms with it on (interleaved, 40 queries). With a filter the
        statement is planned for the filter's values (a custom plan each time: a generic
        one would not know how many children they keep), and the planner stays free,
        unless ``index_only``: a dense ranking kept on the HNSW index
        (:mod:`~parrot_parents.stores.postgres.search.filter_plan`).
        """
        hnsw: Settings = ()
        if request.mode != "lexical":
            opts = self.search_options
            hnsw = (
                ("hnsw.ef_search", str(max(opts.ef_search, min(request.depth, 1000)))),
                ("hnsw.iterative_scan", opts.iterative_scan),
                ("hnsw.max_scan_tuples", str(opts.max_scan_tuples)),
            )
        if not request.filter:
            seqscan: Settings = () if request.mode == "lexical" else (("enable_seqscan", "off"),)
            return (*hnsw, *seqscan, ("enable_bitmapscan", None), ("plan_cache_mode", None))
        scans = "off" if index_only else None
        return (
            *hnsw,
            ("enable_seqscan", scans),
            ("enable_bitmapscan", scans),
            ("plan_cache_mode", "force_custom_plan"),
        )

    async def _ranked(
        self, engine: AsyncEngine, table: Table, request: SearchRequest
    ) -> tuple[Split, FilterPlan | None]:
        """The ranked rows of one search statement, with the targets of indexed hits and
        the plan's reads; one round trip on the read pool. With a metadata filter, also
        how the search was planned (:mod:`~parrot_parents.stores.postgres.search.filter_plan`): the
        planner's estimate first, and an exact ranking after a dense or hybrid index
        search that came back short, on the same connection."""
        # The text-search configuration and candidate rule are written into a lexical
        # statement, so they are part of its shape.
        key = request.shape(self.lexical_candidates, self.text_search_config, self.lexical_backend)
        params: dict[str, Any] = {}
        if request.vector is not None:
            params["query_vector"] = request.vector
        if request.mode != "dense":
            params["lexical_query"] = request.text
        if request.plan is not None and request.plan.window is not None:
            params["window_n"] = request.plan.window
        action = f"search in {self.qualified_name}"
        dense = request.mode == "dense"
        if not request.filter:
            # Built once (building took longer than PostgreSQL took to plan and run it),
            # constants inline, run on the read pool.
            prepared = self._statements.get(key) or self._prepared(
                key,
                search_with_context(table, self._statement(table, request), request.plan),
                engine,
            )
            rows = await self._read_pool().fetch(action, prepared, params, self._settings(request))
            return split_rows(rows, request.plan, dense=dense), None
        # A filter's values are parameters under names its structure fixes, so its
        # statements are prepared once per structure: the filter's SQL is in their key.
        hierarchy = reads_hierarchy(request.filter)

        async def work(conn: ReadConnection) -> tuple[Split, FilterPlan]:
            targets = hierarchy and await self._has_indexed_rows(conn)
            where = self._where(table, request, targets=targets)
            shape = str(where[-1].compile(dialect=engine.dialect))
            params.update(filter_params(where[-1]))

            def ranking(exact: bool, capped: bool = False) -> Prepared:
                ranked_key = (*key, shape, exact, capped)
                known = self._statements.get(ranked_key)
                if known is not None:
                    return known
                if not exact:
                    scanned = self._where(table, request, targets, few=False)
                    ranked = self._statement(table, request, scanned)
                    return self._prepared(
                        ranked_key, search_with_context(table, ranked, request.plan), engine
                    )
                # The lexical branch alone is better served by the GIN index, the filter
                # checked on the children holding a query lexeme, than by reading every
                # child the filter keeps (measured: docs/performance.md).
                kept = (
                    None
                    if request.mode == "lexical"
                    else kept_rows(
                        table,
                        where,
                        lexical=request.mode != "dense",
                        vector=request.vector is not None,
                        capped=capped,
                    )
                )
                ranked = self._statement(table, request, where, exact=True, kept=kept)
                statement = search_with_context(
                    table, ranked, request.plan, kept if capped else None
                )
                return self._prepared(ranked_key, statement, engine)

            async def rank(exact: bool, index_only: bool = False, cap: int | None = None) -> Split:
                statement = ranking(exact, capped=cap is not None)
                settings = self._settings(request, index_only)
                run = params if cap is None else {**params, KEPT_LIMIT: cap + 1}
                rows: Sequence[Any] = await conn.fetch_with(
                    statement.sql, statement.args(run), settings
                )
                return split_rows(rows, request.plan, dense=dense)

            plan = await self._filter_plan(conn, table, request, where, shape, params, targets)
            if plan.exact:
                # At most the threshold's rows read: the estimate may be a guess. (The
                # lexical branch alone reads the children holding a query lexeme.)
                cap = None if request.mode == "lexical" else plan.exact_below
                split = await rank(exact=True, cap=cap)
                if not split.over_cap:
                    return split, plan
                plan = plan.then_index()
            # The index plan is ours, not the planner's: a dense statement is kept off
            # scans that would rank every child the filter keeps. (In hybrid mode the
            # lexical branch needs the GIN bitmap scans, so the planner stays free.)
            split = await rank(exact=False, index_only=dense)
            # Only a dense ranking can come back short of what the filter keeps: the
            # lexical branch's candidates are every child holding a query lexeme.
            if request.mode != "lexical" and len(split.hits) < request.limit:
                plan = plan.then_exact()
                split = await rank(exact=True)
            return split, plan

        return await self._read_pool().run(work, action=action)

    async def _filter_plan(
        self,
        conn: ReadConnection,
        table: Table,
        request: SearchRequest,
        where: list[Any],
        shape: str,
        params: Mapping[str, Any],
        targets: bool,
    ) -> FilterPlan:
        """How to rank a filtered search
        (:mod:`~parrot_parents.stores.postgres.search.filter_plan`): the
        planner's estimate of the children the filter keeps; for a range or a pattern it
        would rank exactly, a sample's count instead, unless the filter's other ANDed
        conditions bound it. ``where``: the search's predicates (the compiled filter
        last, ``shape`` its SQL); ``params``: their values; ``targets``: the filter is
        judged on indexed rows' targets (never sampled)."""
        flt = dict(request.filter or {})
        dialect = self.engine.dialect

        async def estimate(kept: list[Any], shape: str, args: Mapping[str, Any]) -> tuple[int, int]:
            """The planner's ``(kept, children)`` for the predicates ``kept`` (the last
            one's SQL ``shape``)."""
            key = ("estimate", request.include_parents, shape)
            statement = self._statements.get(key) or self._remember(
                key,
                estimate_statement(
                    table,
                    targets_kept(table, flt, request.include_parents) if targets else kept,
                    dialect,
                    with_vector=not targets,
                ),
            )
            return estimated_rows(await conn.fetch_with(statement.sql, statement.args(args), ()))

        below = self.search_options.filter_exact_below
        kept, children = await estimate(where, shape, params)
        most = threshold(below, children)
        if targets or not has_unestimated(flt) or kept > most:
            return FilterPlan.for_estimate(kept, children, below)
        # The planner's share for a range or a pattern is a constant: count a sample,
        # unless the conditions it does estimate keep few enough on their own.
        part = estimated_part(flt)
        if part:
            bound = compile_filter(table.c.cmetadata, part)
            bound_shape = str(bound.compile(dialect=dialect))
            bounded = await estimate([*where[:-1], bound], bound_shape, filter_params(bound))
            if bounded[0] <= most:
                return FilterPlan.for_estimate(kept, children, below)
        key = ("sample", request.include_parents, shape)
        sample = self._statements.get(key) or self._remember(
            key, sample_statement(table, where, dialect)
        )
        run = {**params, SAMPLE_PERCENT: sample_percent(children)}
        sampled = sampled_rows(await conn.fetch_with(sample.sql, sample.args(run), ()), children)
        if sampled is None:
            return FilterPlan.for_estimate(kept, children, below)
        # Nothing bounds the filter, so a dense or hybrid exact ranking would read the
        # whole table: in a table larger than the threshold, that pays only where the
        # HNSW scan would come back short. (Lexical search alone reads the children
        # holding a query lexeme, never the table: it keeps the threshold.)
        scanned = children > most and request.mode != "lexical"
        opts = self.search_options
        # The scan's bound: the tuples an iterative scan may visit, else the candidate list.
        visits = opts.max_scan_tuples if opts.iterative_scan != "off" else opts.ef_search
        ceiling = scan_ceiling(children, request.limit, visits) if scanned else None
        return FilterPlan.for_estimate(sampled, children, below, sampled=True, ceiling=ceiling)

    def _read_pool(self) -> ReadPool:
        return self.read_pool

    @property
    def read_pool(self) -> ReadPool:
        """The pool of the store's hot reads
        (:mod:`parrot_parents.stores.postgres.connections.read_pool`) of
        the running event loop; only after :meth:`connect`."""
        return self._pools().reads

    def _prepared(self, key: tuple[Any, ...], statement: Any, engine: AsyncEngine) -> Prepared:
        """``statement`` compiled once and remembered under ``key``."""
        return self._remember(key, Prepared.compile(statement, engine.dialect))

    def _remember(self, key: tuple[Any, ...], prepared: Prepared) -> Prepared:
        """``prepared``, remembered under ``key`` (at most 256 statements)."""
        if len(self._statements) >= 256:
            self._statements.clear()
        self._statements[key] = prepared
        return prepared

    @staticmethod
    def _where(
        table: Table, request: SearchRequest, targets: bool = False, few: bool = True
    ) -> list[Any]:
        """The search's predicates: the child predicate and the compiled filter.

        ``targets``: the filter reads hierarchy keys and the collection has indexed rows,
        so an indexed row is judged by its target's metadata, in the form for few kept
        rows or for an index scan (``few``;
        :func:`~parrot_parents.stores.postgres.search.target_filter.searched_filter`)."""
        where: list[Any] = []
        if not request.include_parents:
            where.append(text(SEARCH_PREDICATE))
        if request.filter:
            flt = dict(request.filter)
            if targets:
                where.append(searched_filter(table, flt, few=few))
            else:
                where.append(compile_filter(table.c.cmetadata, flt))
        return where

    async def _has_indexed_rows(self, conn: ReadConnection) -> bool:
        """Whether the collection holds indexed rows (an ingestion strategy's): asked
        until the answer is yes (one lookup on the metadata GIN index), which then stays,
        as indexed rows are written by ingestion and rarely all deleted."""
        if self._indexed_rows_seen:
            return True
        found = await conn.fetch_with(
            f"SELECT EXISTS (SELECT 1 FROM {self.qualified_name} WHERE {INDEXED_CONTAINMENT})",
            (),
            (),
        )
        self._indexed_rows_seen = bool(found[0][0])
        return self._indexed_rows_seen

    def _statement(
        self,
        table: Table,
        request: SearchRequest,
        where: list[Any] | None = None,
        exact: bool = False,
        kept: Any | None = None,
    ) -> Any:
        """The ranked search statement (columns :data:`HIT_COLUMNS`); binds
        ``query_vector`` and ``lexical_query``. ``where``: the search's predicates
        (:meth:`_where`), when the caller has them already. ``exact``: the ranking of a
        selective filter (:mod:`~parrot_parents.stores.postgres.search.filter_plan`), never through
        an
        index but the GIN index of the query's lexemes; in dense and hybrid mode over
        ``kept``, the :func:`~parrot_parents.stores.postgres.search.kept.kept_rows` of ``where``,
        every
        one compared with the query."""
        if where is None:
            where = self._where(table, request)
        if request.mode == "dense":
            distance = table.c.embedding.cosine_distance(query_vector(table)).label("distance")
            # The kNN in a subquery, numbered outside it: a window function beside the
            # ORDER BY ... LIMIT would read every row before the limit.
            assert kept is not None or not exact, "an exact dense ranking ranks the kept rows"
            if kept is None:
                knn = (
                    select(table.c.id, table.c.document, table.c.cmetadata, distance)
                    .where(table.c.embedding.is_not(None), *where)
                    .order_by(distance)
                    .limit(request.limit)
                    .subquery("knn")
                )
            else:
                top = (
                    select(kept.c.id, kept.c.distance)
                    .order_by(kept.c.distance, kept.c.id)
                    .limit(request.limit)
                    .subquery("kept_top")
                )
                knn = (
                    select(table.c.id, table.c.document, table.c.cmetadata, top.c.distance)
                    .join(top, top.c.id == table.c.id)
                    .subquery("knn")
                )
            return select(
                knn.c.id,
                knn.c.document,
                knn.c.cmetadata,
                knn.c.distance,
                cast(null(), Integer).label("dense_rank"),
                cast(null(), Integer).label("lexical_rank"),
                cast(null(), Float).label("lexical_score"),
                cast(null(), Float).label("fused_score"),
                cast(null(), ARRAY(Text)).label("lexical_expansion"),
                func.row_number().over(order_by=(knn.c.distance, knn.c.id)).label("ord"),
            )
        assert self.text_search_config is not None
        return search_statement(
            table,
            mode=request.mode,
            limit=request.limit,
            where=where,
            with_vector=request.vector is not None,
            lexical=self.lexical,
            text_search_config=self.text_search_config,
            fusion=request.fusion,
            # A selective filter may leave only children holding common query lexemes:
            # every query lexeme then brings candidates (few, as the filter keeps few).
            candidates=EXACT_CANDIDATES if request.filter and exact else self.lexical_candidates,
            bm25_index=self._bm25_index(request, exact),
            kept=kept,
        )

    def _bm25_index(self, request: SearchRequest, exact: bool) -> str | None:
        """The qualified name of the ``bm25`` index that ranks this search's lexical
        branch; None when BM25 in SQL ranks it."""
        if self.lexical_ranking(request.filter, request.fusion, exact)[0] != "pg_textsearch":
            return None
        return f'"{self.schema}"."{bm25_index_name(self.table)}"'

    def lexical_ranking(
        self,
        filter: Mapping[str, Any] | None,
        fusion: Fusion | None,
        exact_filter: bool = True,
    ) -> tuple[str, str | None]:
        """What ranks the lexical branch of a search with ``filter`` and ``fusion``:
        ``(backend, why)``, ``why`` None when it is the collection's own backend
        (:mod:`parrot_parents.stores.postgres.search.bm25_index`), else the reason it is not.
        ``exact_filter``: the filter's plan ranks exactly (a filter expected to keep few
        children, :mod:`~parrot_parents.stores.postgres.search.filter_plan`); False for a broad
        one."""
        backend = self.lexical_backend or "sql"
        if backend == "pg_textsearch" and self._wanted_backend == "sql":
            return "sql", "the store was opened with lexical_backend='sql'"
        if backend == "pg_textsearch" and filter and exact_filter:
            # The index ranks first and filters after: a selective filter would walk it.
            return "sql", "a metadata filter keeping few children is ranked exactly in SQL"
        if backend == "pg_textsearch" and fusion is not None and fusion.prf is not None:
            return "sql", "prf reads the SQL statistics"
        return backend, None

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
        """:meth:`similarity_search` over the children, and what ``plan`` names (parents,
        a window's neighbours, a parent's children) read in the same statement: one round
        trip for the search and the expansion after it.

        Args:
            query: the question (embedded unless ``vector`` is given, and matched lexically
                in ``lexical``/``hybrid`` mode).
            plan: the reads to join (:class:`~parrot_parents.stores.context.ContextPlan`).
            limit, filter, search_mode, fusion: as :meth:`similarity_search`.
            vector: the query embedding, when already computed.

        Returns:
            ``(results, context)``: the results exactly as :meth:`similarity_search` returns
            them, and a :class:`~parrot_parents.stores.context.Context` for
            :class:`~parrot_parents.stores.parents.prefetched.PrefetchedParentSearcher`.

        Raises:
            As :meth:`similarity_search`.
        """
        check_question(query)  # before the model loads or anything connects
        mode = check_search_mode(search_mode)
        check_limit_and_filter(limit, filter)
        await self.ready()
        if vector is None and mode != "lexical":
            vector = await self.embed_question(query)
        request = SearchRequest.build(
            mode=mode,
            limit=limit,
            dimension=self.dimension,
            vector=vector,
            text=query,
            filter=filter,
            fusion=fusion,
            plan=plan,
        )
        results, context = await self._search(request)
        assert context is not None
        return results, context

    async def fetch_context(
        self, rows: Sequence[tuple[str, dict[str, Any]]], plan: ContextPlan
    ) -> Context:
        """``plan``'s reads for rows already found (after a reranker), in one statement.

        Args:
            rows: ``(id, metadata)`` of the retrievable rows kept (children, or parents
                reached through a summary), as the search returned them.
            plan: what to read.
        """
        wanted = list(dict.fromkeys(str(i) for i, _ in rows))
        engine, table = await self.ready()
        if not wanted:
            return Context(plan=plan)
        key = ("seeded", plan)
        prepared = self._statements.get(key) or self._prepared(
            key, seeded_statement(table, plan), engine
        )
        params: dict[str, Any] = {"seed_ids": wanted}
        if plan.window is not None:
            params["window_n"] = plan.window

        found = await self._read_pool().fetch(f"read from {self.qualified_name}", prepared, params)
        split = split_rows(found, plan, dense=True, seeds=[dict(m) for _, m in rows])
        assert split.context is not None
        return split.context

    async def fetch_children(self, parent_ids: Sequence[str]) -> dict[str, list[SearchResult]]:
        """Children of each parent id, ordered by ``start_index``; one statement.

        Unknown parent ids are absent from the result; an empty input touches nothing.
        """
        ids = list(dict.fromkeys(str(p) for p in parent_ids))
        if not ids:
            return {}
        engine, table = await self.ready()
        parent_key = meta_field(table, "parent_document_id")
        stmt = (
            select(table.c.id, table.c.document, table.c.cmetadata)
            .where(parent_key.in_(ids))
            .order_by(parent_key, meta_field(table, "start_index").cast(Integer))
        )
        return await self._grouped(engine, stmt, "parent_document_id")

    async def fetch_chunk_ranges(
        self, ranges: Sequence[tuple[str, int, int]]
    ) -> dict[str, list[SearchResult]]:
        """Children of each ``(document_id, lo, hi)`` with ``lo <= chunk_index <= hi``.

        One statement for all ranges; results per document, ordered by ``chunk_index``.
        Used by the ``window:N`` expansion mode.
        """
        if not ranges:
            return {}
        engine, table = await self.ready()
        doc_key = meta_field(table, "document_id")
        index = meta_field(table, "chunk_index").cast(Integer)
        cond = or_(
            *[and_(doc_key == str(d), index.between(int(lo), int(hi))) for d, lo, hi in ranges]
        )
        stmt = (
            select(table.c.id, table.c.document, table.c.cmetadata)
            .where(text(CHILD_PREDICATE))
            .where(cond)
            .order_by(doc_key, index)
        )
        return await self._grouped(engine, stmt, "document_id")

    async def _grouped(
        self, engine: AsyncEngine, stmt: Any, key: str
    ) -> dict[str, list[SearchResult]]:
        """Run ``stmt`` (id, document, cmetadata) and group the rows by a metadata key."""

        rows = await read(engine, f"read from {self.qualified_name}", _all(stmt))
        out: dict[str, list[SearchResult]] = defaultdict(list)
        for r in rows:
            meta = dict(r.cmetadata or {})
            out[str(meta[key])].append(SearchResult(id=r.id, content=r.document, metadata=meta))
        return dict(out)

    async def document_sources(self, document_ids: Sequence[str]) -> dict[str, set[str]]:
        """``{document_id: {source, ...}}`` of the stored rows of those documents.

        One statement; documents not stored are absent. Loaders use it to warn before a
        document from another file replaces one with the same id.
        """
        ids = list(dict.fromkeys(str(d) for d in document_ids))
        if not ids:
            return {}
        engine, table = await self.ready()
        doc_key = meta_field(table, "document_id")
        stmt = (
            select(doc_key.label("doc"), table.c.cmetadata["source"].astext.label("source"))
            .where(doc_key.in_(ids))
            .distinct()
        )
        rows = await read(engine, f"read from {self.qualified_name}", _all(stmt))
        out: dict[str, set[str]] = {}
        for r in rows:
            out.setdefault(r.doc, set())
            if r.source is not None:
                out[r.doc].add(r.source)
        return out

    async def document_rows(self, document_id: str) -> list[DocumentRow]:
        """Every row of one document, parents first, then by ``start_index`` and id.

        One parameterised statement; the row texts stay in the database (only their
        length in characters is read). An unknown document gives an empty list.

        Raises:
            ConfigurationError: ``document_id`` is not a non-empty string.
        """
        if not isinstance(document_id, str) or not document_id:
            raise ConfigurationError(f"document_id must be a non-empty string, got {document_id!r}")
        engine, table = await self.ready()
        # NULL (a child without markers) must sort with the children, not first.
        parents_first = text(f"coalesce({PARENT_PREDICATE}, false) DESC")
        stmt = (
            select(
                table.c.id,
                table.c.cmetadata,
                func.char_length(table.c.document).label("length"),
            )
            .where(meta_field(table, "document_id") == document_id)
            # Indexed rows are not spans of the document: they are not listed.
            .where(text(NOT_INDEXED_PREDICATE))
            .order_by(
                parents_first,
                meta_field(table, "start_index").cast(Integer),
                table.c.id,
            )
        )
        rows = await read(engine, f"read from {self.qualified_name}", _all(stmt))
        return [DocumentRow.from_row(r.id, dict(r.cmetadata or {}), int(r.length)) for r in rows]

    async def ingestion_records(self) -> dict[str, dict[str, Any]]:
        """``{document_id: record}``: how each document was indexed by an ingestion
        strategy (``strategy``, ``enriched``, ``of``, ``indexed_rows``, ``model``), as
        recorded on its parent rows; documents ingested without one are absent. One
        statement."""
        engine, table = await self.ready()
        doc = meta_field(table, "document_id")
        record = table.c.cmetadata["ingestion"]
        stmt = (
            select(doc.label("doc"), record.label("record"))
            .where(text(PARENT_PREDICATE))
            .where(table.c.cmetadata.has_key("ingestion"))
            .distinct(doc)
            .order_by(doc)
        )
        rows = await read(engine, f"read from {self.qualified_name}", _all(stmt))
        return {r.doc: dict(r.record) for r in rows if isinstance(r.record, dict)}

    async def documents_with_content(self, digests: Sequence[str]) -> dict[str, set[str]]:
        """``{content_sha256: {document_id, ...}}`` of stored documents with that content.

        Parents carry the hash of their whole document (see the loaders); one statement,
        served by the GIN index. Loaders use it to warn when a file is already stored under
        another id (the same file reached by two spellings of its path).
        """
        wanted = list(dict.fromkeys(str(d) for d in digests))
        if not wanted:
            return {}
        engine, table = await self.ready()
        digest = table.c.cmetadata["content_sha256"].astext
        stmt = (
            select(digest.label("digest"), meta_field(table, "document_id").label("doc"))
            .where(or_(*[table.c.cmetadata.contains({"content_sha256": d}) for d in wanted]))
            .distinct()
        )
        rows = await read(engine, f"read from {self.qualified_name}", _all(stmt))
        out: dict[str, set[str]] = {}
        for r in rows:
            out.setdefault(r.digest, set()).add(r.doc)
        return out

    # -- the documents table (parrot_parents.stores.postgres.collections.documents)
    # ---------------------------

    async def document_states(self, document_ids: Sequence[str]) -> dict[str, DocumentState]:
        """The stored hash, policy version and source of each document id; one statement.

        Documents without a documents row are absent."""
        ids = list(dict.fromkeys(str(d) for d in document_ids))
        if not ids:
            return {}
        engine, _ = await self.ready()
        states = self.documents.states(ids)
        rows = await read(engine, f"read the documents of {self.qualified_name}", _all(states))
        return {
            r.document_id: DocumentState(r.content_sha256, r.policy_version, r.source) for r in rows
        }

    async def stale_documents(
        self, policy_versions: Sequence[str], *, after: str | None = None, limit: int = 100
    ) -> list[DocumentRecord]:
        """Up to ``limit`` documents stored under none of ``policy_versions``, by id, after
        the id ``after``; with their stored text and metadata (structure included)."""
        engine, _ = await self.ready()
        stmt = self.documents.stale(policy_versions, after, limit)
        rows = await read(engine, f"read the documents of {self.qualified_name}", _all(stmt))
        return [
            DocumentRecord(
                document_id=r.document_id,
                content_sha256=r.content_sha256,
                policy_version=r.policy_version,
                source_text=r.source_text,
                source=r.source,
                metadata=dict(r.metadata or {}),
            )
            for r in rows
        ]

    async def count(self, *, include_parents: bool = True) -> int:
        """Number of rows (children only when ``include_parents`` is False)."""
        engine, table = await self.ready()
        stmt = select(func.count()).select_from(table)
        if not include_parents:
            stmt = stmt.where(text(CHILD_PREDICATE))
        rows = await read(engine, f"count {self.qualified_name}", _all(stmt))
        return int(rows[0][0])


async def _release(pools: _Pools) -> None:
    """Close one loop's pools, on that loop (the engine only when the store made it)."""
    await pools.reads.close()
    if pools.owns_engine:
        await pools.engine.dispose()


def _all(statement: Any) -> Callable[[Any], Awaitable[list[Any]]]:
    """A read's work: every row of ``statement``."""

    async def work(conn: Any) -> list[Any]:
        return list((await conn.execute(statement)).all())

    return work
