"""A store's connections: the engine (writes, DDL) and the read pool (searches) of each
event loop it is used from (:mod:`~parrot_parents.stores.postgres.connections.per_loop`),
opened on first use there, and the statements compiled for them.

The pools of the loop that connected the store are its "home"; every other loop gets a
private engine of the home engine's URL and a read pool. A shared engine (one the caller
made) serves the home loop only and is never disposed of here.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, NamedTuple, TypeVar

from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine

from parrot_parents.errors import StoreError
from parrot_parents.stores.postgres.connections.engine import (
    connect_args,
    engine_for_url,
    make_engine,
)
from parrot_parents.stores.postgres.connections.per_loop import PerLoop, release_all, running_loop
from parrot_parents.stores.postgres.connections.prepared import Prepared
from parrot_parents.stores.postgres.connections.read_pool import ReadPool
from parrot_parents.stores.search_options import HNSWQueryOptions

__all__ = ["Connections", "Pools", "Statements", "start_up_settings"]

T = TypeVar("T")

#: SQLSTATE of an internal error of the server (``cache lookup failed``...).
_INTERNAL_ERROR = "XX000"

_NOT_CONNECTED = "the store is not connected"


class Pools(NamedTuple):
    """The connection pools of one event loop."""

    engine: AsyncEngine
    reads: ReadPool


def start_up_settings(opts: HNSWQueryOptions) -> dict[str, str]:
    """The read pool's session settings: those of an unfiltered search at the default
    depth, so that most searches set nothing."""
    return {
        "hnsw.ef_search": str(opts.ef_search),
        "hnsw.iterative_scan": opts.iterative_scan,
        "hnsw.max_scan_tuples": str(opts.max_scan_tuples),
        "enable_seqscan": "off",
    }


class Statements(OrderedDict[tuple[Any, ...], Prepared]):
    """Statements compiled once by their shape, by key: the :attr:`LIMIT` most recently
    used are remembered (a partition key's values have statements of their own)."""

    LIMIT = 1024

    def get(self, key: tuple[Any, ...], default: Any = None) -> Any:
        found = super().get(key, default)
        if found is not default:
            # Another thread's store may have let it go since (each call holds the GIL).
            with suppress(KeyError):
                self.move_to_end(key)
        return found

    def compiled(self, key: tuple[Any, ...], statement: Any, dialect: Dialect) -> Prepared:
        """``statement`` compiled for ``dialect``, remembered under ``key``."""
        return self.remember(key, Prepared.compile(statement, dialect))

    def remember(self, key: tuple[Any, ...], prepared: Prepared) -> Prepared:
        self[key] = prepared
        self.move_to_end(key)
        while len(self) > self.LIMIT:
            self.popitem(last=False)
        return prepared


class Connections:
    """The pools of every event loop a store is used from.

    Args:
        dsn: as :class:`~parrot_parents.stores.postgres.PgVectorStore`'s (ignored with
            ``shared``).
        engine_kwargs: for each engine made here; its ``connect_args`` reach the read pools.
        shared: the caller's engine, or None.
        settings: the read pools' start-up settings, asked when a pool is made.
    """

    def __init__(
        self,
        dsn: str | None,
        engine_kwargs: dict[str, Any],
        shared: AsyncEngine | None,
        settings: Callable[[], dict[str, str]],
    ) -> None:
        self.dsn = dsn
        self.engine_kwargs = engine_kwargs
        self.shared = shared
        self._settings = settings
        #: The pools of the loop that connected the store (None until then, and after close).
        self.home_engine: AsyncEngine | None = None
        self.home_reads: ReadPool | None = None
        self._home: asyncio.AbstractEventLoop | None = None
        self._elsewhere: PerLoop[Pools] = PerLoop(self._new_pools)
        self._lock = threading.Lock()
        #: Search statements without a filter, compiled once by their shape.
        self.statements = Statements()
        # An asyncio lock binds to one loop: each loop that connects has its own.
        self.connect_locks: PerLoop[asyncio.Lock] = PerLoop(asyncio.Lock)

    def pools(self) -> Pools:
        """The pools of the running event loop (those of the home loop when none runs).

        Raises:
            StoreError: not connected.
        """
        engine, reads = self.home_engine, self.home_reads
        if engine is None or reads is None:
            raise StoreError(_NOT_CONNECTED, hint="await store.connect() first")
        loop = running_loop()
        if loop is None or loop is self._home:
            return Pools(engine, reads)
        return self._elsewhere.get(loop)

    def _new_pools(self) -> Pools:
        """Pools for one more event loop: an engine of the home engine's URL (no I/O)."""
        home = self.home_engine
        if home is None:
            raise StoreError(_NOT_CONNECTED, hint="await store.connect() first")
        engine = engine_for_url(home.url, **self.engine_kwargs)
        return Pools(engine, self._read_pool(engine))

    def _read_pool(self, engine: AsyncEngine) -> ReadPool:
        """A read pool of the ``asyncpg.connect`` arguments of ``engine``'s URL and of the
        ``connect_args`` given in ``engine_kwargs``."""
        import asyncpg

        known = inspect.signature(asyncpg.connect).parameters
        merged = {**connect_args(engine), **dict(self.engine_kwargs.get("connect_args") or {})}
        return ReadPool({k: v for k, v in merged.items() if k in known}, self._settings())

    @asynccontextmanager
    async def opening(self, loop: asyncio.AbstractEventLoop) -> AsyncIterator[AsyncEngine]:
        """The engine to connect with (the shared one, else a new one of ``dsn``), which
        with a new read pool of it become the pools of ``loop`` when the block succeeds:
        the home ones when no loop has connected, else that loop's (another connected
        meanwhile). When the block fails, an engine made here is disposed of."""
        engine = self.shared or await make_engine(self.dsn, **self.engine_kwargs)
        try:
            yield engine
        except BaseException:
            if engine is not self.shared:
                await engine.dispose()
            raise
        reads = self._read_pool(engine)
        with self._lock:
            if self.home_engine is None:
                self.home_reads, self.home_engine, self._home = reads, engine, loop
                return
        self._elsewhere.put(loop, Pools(engine, reads))

    async def close(self) -> None:
        """Close the pools of every loop, each on its own loop (see
        :func:`~parrot_parents.stores.postgres.connections.per_loop.release_all`), and
        forget the statements. Safe to call twice."""
        with self._lock:
            engine, self.home_engine = self.home_engine, None
            reads, self.home_reads = self.home_reads, None
            home, self._home = self._home, None
        items: list[tuple[asyncio.AbstractEventLoop | None, Pools]] = []
        if engine is not None and reads is not None:
            items.append((home, Pools(engine, reads)))
        items.extend(self._elsewhere.take_all())
        self.statements.clear()
        if items:
            # One shielded step: a cancelled close still closes every pool.
            await asyncio.shield(release_all(items, self._release))

    async def _release(self, pools: Pools) -> None:
        """Close one loop's pools, on that loop (the engine only when the store made it)."""
        await pools.reads.close()
        if pools.engine is not self.shared:
            await pools.engine.dispose()


async def through_catalog_change(
    attempt: Callable[[], Awaitable[T]], close: Callable[[], Awaitable[None]]
) -> T:
    """``attempt()``, run once more after ``close()`` when the server reports an internal
    error (SQLSTATE XX000).

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
    await close()
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
