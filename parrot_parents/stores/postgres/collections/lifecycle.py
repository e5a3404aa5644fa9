"""A store's collection from open to drop: connecting and checking it (creating or
completing it for a writer, :mod:`~parrot_parents.stores.postgres.collections.creation`),
its embedding dimension and model check, the move of its lexical backend, and its drop.

:class:`CollectionLifecycle` is a part of
:class:`~parrot_parents.stores.postgres.PgVectorStore` (whose methods give the contracts);
it reads and sets what it needs of the store through :class:`OpenedStore`.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Protocol

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncEngine

from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import CollectionNotFoundError, ConfigurationError, StoreError
from parrot_parents.stores.identifiers import CollectionName
from parrot_parents.stores.postgres.collections.creation import (
    collection_state,
    drop_collection,
    missing_collection,
    move_lexical_backend,
    not_a_collection,
    prepare_collection,
)
from parrot_parents.stores.postgres.collections.documents import DocumentsTable
from parrot_parents.stores.postgres.collections.filter_keys import (
    ensure_filter_keys,
    missing_filter_keys,
)
from parrot_parents.stores.postgres.collections.model_contract import ModelContract, fingerprint
from parrot_parents.stores.postgres.collections.partitions import (
    ensure_partition_indexes,
    existing_values,
    read_partition_key,
    record_partition_key,
)
from parrot_parents.stores.postgres.collections.schema import HNSWIndex, collection_table
from parrot_parents.stores.postgres.collections.setup import (
    check_dimension,
    create_extension,
    dimension_mismatch,
    stored_dimension,
)
from parrot_parents.stores.postgres.collections.value_graphs import ensure_value_graphs
from parrot_parents.stores.postgres.connections.engine import store_errors
from parrot_parents.stores.postgres.connections.pools import Connections
from parrot_parents.stores.postgres.connections.reads import write
from parrot_parents.stores.postgres.search.bm25_guard import (
    Bm25Guard,
    GuardChoice,
    needs_guard,
    read_bm25_version,
    read_superuser,
)
from parrot_parents.stores.postgres.search.bm25_index import (
    LexicalBackend,
    LexicalChoice,
    check_lexical_choice,
    read_lexical_backend,
    refuse_copied_index,
    reset_autovacuum,
)
from parrot_parents.stores.postgres.search.lexical import (
    DEFAULT_TEXT_SEARCH_CONFIG,
    LexicalTables,
    read_text_search_config,
)

__all__ = ["CollectionLifecycle", "OpenedStore"]


class OpenedStore(Protocol):
    """What :class:`CollectionLifecycle` reads of its store, and sets
    (``text_search_config``, ``lexical_backend``) once the collection is open."""

    name: CollectionName
    connections: Connections
    create: bool
    hnsw: HNSWIndex
    embedding: SentenceTransformerEmbeddings
    documents: DocumentsTable
    lexical: LexicalTables
    model_contract: ModelContract
    text_search_config: str | None
    lexical_backend: LexicalBackend | None
    bm25_guard: GuardChoice
    guard: Bm25Guard | None
    partition_key: str | None

    async def close(self) -> None: ...


class CollectionLifecycle:
    """Opens, checks and drops a store's collection. ``dimension``, ``wanted_config`` and
    ``wanted_backend`` are the store's ``dimension``, ``text_search_config`` and
    ``lexical_backend`` as given (checked)."""

    def __init__(
        self,
        store: OpenedStore,
        dimension: int | None,
        wanted_config: str | None,
        wanted_backend: LexicalChoice,
        wanted_partition_key: str | None = None,
    ) -> None:
        self._store = store
        self.wanted_partition_key = wanted_partition_key
        #: Whether this store recorded :attr:`wanted_partition_key` on its collection (new,
        #: or existing without a key): a change for good, which its caller may want to say.
        self.gave_partition_key = False
        #: The filter keys a writer gives the collection (checked: the store's
        #: ``filter_keys``); those it lacked are built by :meth:`_prepare`.
        self.wanted_filter_keys: tuple[str, ...] = ()
        self._connections = store.connections
        self._dimension = dimension
        self.wanted_config = wanted_config
        self.wanted_backend = wanted_backend
        # Whether the dimension was read from the table (a collection dropped and made
        # again takes the model's), and the models already compared with the column.
        self._from_table = False
        self._dimension_checked: weakref.WeakSet[Any] = weakref.WeakSet()
        self.table: Table | None = None
        # Whether this connection has created (or completed) the collection.
        self.writable = False

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = self._store.embedding.dimension
        return self._dimension

    def sa_table(self) -> Table:
        if self.table is None:
            raise StoreError("the store is not connected", hint="await store.connect() first")
        return self.table

    async def ready(self) -> tuple[AsyncEngine, Table]:
        """``(engine, table)`` for a read; connects first, never creates."""
        if self._connections.home_engine is None:
            await self.open(create=False)
        return self._connections.pools().engine, self.sa_table()

    async def ready_to_write(self) -> tuple[AsyncEngine, Table]:
        """``(engine, table)`` for a write: the collection created first when missing
        (unless the store's ``create`` is False)."""
        await self.open(create=self._store.create)
        return self._connections.pools().engine, self.sa_table()

    async def open(self, *, create: bool) -> None:
        """Connect when not connected; with ``create``, also create (or complete) the
        collection once for this connection."""
        connections = self._connections
        if connections.home_engine is not None and (self.writable or not create):
            return
        loop = asyncio.get_running_loop()
        async with connections.connect_locks.get(loop):
            if connections.home_engine is None:
                # Not connected, so not writable (a close forgets both): a failure here
                # leaves it so.
                async with connections.opening(loop) as engine:
                    await self._connect(engine, create=create)
            elif create and not self.writable:
                await self._prepare(connections.pools().engine)

    async def _connect(self, engine: AsyncEngine, *, create: bool) -> None:
        store, name = self._store, self._store.name
        schema, table = name.schema, name.table
        # Before the model loads (the dimension may need it): an unknown collection,
        # or a table that is not one, is reported in a second, not after the load.
        async with store_errors(f"opening {name.qualified}"), engine.begin() as c:
            state = await c.run_sync(collection_state, schema, table)
            if state == "collection" and self._dimension is None:
                stored = await stored_dimension(c, schema, table)
                if stored is not None:
                    self._dimension, self._from_table = stored, True
        if state == "other":
            raise not_a_collection(schema, table)
        if state == "missing" and not create:
            raise missing_collection(schema, table)
        dimension = await asyncio.to_thread(lambda: self.dimension)
        self.table = collection_table(
            table,
            dimension,
            schema=schema,
            hnsw=store.hnsw,
            text_search_config=self.wanted_config or DEFAULT_TEXT_SEARCH_CONFIG,
        )
        if create or store.create:
            # A read on a store that may create completes an existing collection
            # (an older one gets its lexical index and documents table), as the
            # first write would; it never creates a missing one.
            await self._prepare(engine, must_exist=not create)
            return
        await create_extension(engine, create=False)
        async with store_errors(f"opening {name.qualified}"), engine.begin() as c:
            store.text_search_config = await c.run_sync(read_text_search_config, table, schema)
            backend = await c.run_sync(read_lexical_backend, table, schema)
            check_lexical_choice(table, backend, self.wanted_backend)
            store.lexical_backend = backend
            store.guard = await c.run_sync(self._guard, backend, False)
            await check_dimension(c, schema, table, dimension)
            await store.model_contract.read(c)
            store.partition_key = await c.run_sync(self._partition_key, False)
            if self.wanted_filter_keys:
                await c.run_sync(missing_filter_keys, name, self.wanted_filter_keys)

    async def _prepare(self, engine: AsyncEngine, *, must_exist: bool = False) -> None:
        """Create the collection (extension, schema, table, indexes, lexical index,
        documents table) when missing, or complete an existing one; one transaction under
        the collection's creation lock, so concurrent first writers all succeed.
        ``must_exist``: complete only; a missing collection is an error."""
        store, name = self._store, self._store.name
        await create_extension(engine, create=not must_exist)
        table = self.sa_table()
        async with store_errors(f"preparing {name.qualified}"), engine.begin() as conn:
            setup = await conn.run_sync(
                prepare_collection,
                table,
                self.wanted_config,
                store.documents,
                must_exist,
                self.wanted_backend,
            )
            store.text_search_config, store.lexical_backend = setup
            store.guard = await conn.run_sync(self._guard, store.lexical_backend, True)
            await check_dimension(conn, name.schema, name.table, self.dimension)
            await store.model_contract.read(conn)
            store.partition_key = await conn.run_sync(self._partition_key, True)
            if self.wanted_filter_keys:
                await conn.run_sync(ensure_filter_keys, name, self.wanted_filter_keys)
                floor = store.hnsw.value_graph_floor
                await conn.run_sync(ensure_value_graphs, table, floor)
        self.writable = True

    def _partition_key(self, conn: Any, writer: bool) -> str | None:
        """The collection's partition key
        (:mod:`~parrot_parents.stores.postgres.collections.partitions`). A ``writer`` records
        the key asked for on a collection without one, and builds the indexes of the
        values its rows already hold.

        Raises:
            ConfigurationError: the collection has another key, or (``writer`` False) none
                while one is asked for.
        """
        name = self._store.name
        recorded = read_partition_key(conn, name.table, name.schema)
        wanted = self.wanted_partition_key
        if wanted is None or wanted == recorded:
            return recorded
        if recorded is not None:
            raise ConfigurationError(
                f"collection {name.table!r} is partitioned by {recorded!r}, not {wanted!r}",
                hint="open it without partition_key, or with the key it has",
            )
        if not writer:
            raise ConfigurationError(
                f"collection {name.table!r} has no partition key",
                hint=f"open it with create=True to give it {wanted!r}",
            )
        record_partition_key(conn, name.table, name.schema, wanted)
        self.gave_partition_key = True
        hnsw = self._store.hnsw
        ensure_partition_indexes(
            conn,
            self.sa_table(),
            wanted,
            existing_values(conn, name.table, name.schema, wanted),
            hnsw.m,
            hnsw.ef_construction,
        )
        return wanted

    def _guard(self, conn: Any, backend: LexicalBackend, writer: bool) -> Bm25Guard | None:
        """The guard of the collection's ``bm25`` index when its release needs one and the
        store's ``bm25_guard`` is ``auto``, else None; for a ``writer``, with autovacuum
        turned off for the table
        (:mod:`~parrot_parents.stores.postgres.search.bm25_guard`).

        Raises:
            ConfigurationError: the ``bm25`` index was copied with its database
                (:func:`~parrot_parents.stores.postgres.search.bm25_index.refuse_copied_index`).
        """
        store, name = self._store, self._store.name
        if backend != "pg_textsearch":
            return None
        refuse_copied_index(conn, name.table, name.schema)
        if store.bm25_guard == "off":
            return None
        if not needs_guard(read_bm25_version(conn)):
            return None
        config = read_text_search_config(conn, name.table, name.schema)
        full = store.bm25_guard == "auto" and read_superuser(conn)
        guard = Bm25Guard(name, config or DEFAULT_TEXT_SEARCH_CONFIG, full)
        if writer:
            guard.configure(conn)
        return guard

    async def check_model(self, model: Any, *, writing: bool) -> None:
        contract = self._store.model_contract
        if not writing:
            # A read records nothing, so the record goes first: it names the collection's
            # model, whatever the dimension of the one refused.
            engine, _ = await self.ready()
            await contract.check(engine, model, writing=False)
            await self._check_model_dimension(model, writing=False)
            return
        # Before the collection is created and before the record: a first write must
        # neither make a column nor record a model that the other refuses.
        await self._check_model_dimension(model, writing=True)
        # A write creates the collection it checks against (a first add_documents).
        engine, _ = await self.ready_to_write()
        await contract.check(engine, model, writing=True)

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
                self._store.name.qualified, f"vector({column})", given, column, exists=exists
            )
        self._dimension_checked.add(model)

    async def drop(self) -> None:
        store = self._store
        try:
            engine, table = await self.ready()
        except CollectionNotFoundError:
            return
        await write(
            engine,
            f"drop {store.name.qualified}",
            lambda conn: conn.run_sync(drop_collection, table, store.lexical, store.documents),
            retry_lock_conflicts=True,
        )
        if self._from_table:
            # The collection made again is the model's.
            self._dimension, self._from_table = None, False
            self._dimension_checked = weakref.WeakSet()
        await store.close()

    async def set_lexical_backend(self, backend: LexicalBackend) -> LexicalBackend:
        store, name = self._store, self._store.name
        engine, _ = await self.ready()

        async def work(conn: Any) -> LexicalBackend:
            before: LexicalBackend = await conn.run_sync(
                move_lexical_backend, name.schema, name.table, backend
            )
            if backend == "sql" and before == "pg_textsearch":
                await conn.run_sync(reset_autovacuum, name.schema, name.table)
            store.guard = await conn.run_sync(self._guard, backend, True)
            return before

        before = await write(engine, f"move {name.qualified} to {backend}", work)
        store.lexical_backend = backend
        self._connections.statements.clear()
        return before
