"""The store's private asyncpg pool, for its hot reads: one statement each.

Searches (:class:`~parrot_parents.stores.postgres.connections.prepared.Prepared`; a
filtered one is two statements on one connection, :meth:`ReadPool.run`) run here, never on
the SQLAlchemy engine, so a caller's shared engine is never touched by a search. The
statement is prepared once per connection; the common HNSW settings are the connections'
``server_settings``, and a search needing others sets them on its connection, which
remembers them (:class:`ReadConnection`), so nothing is reset at release. A dead
connection makes the pool replace all of them and the read runs once more
(:func:`~parrot_parents.stores.postgres.connections.reads.through_outages`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import asyncpg

from parrot_parents.stores.postgres.connections.engine import store_errors
from parrot_parents.stores.postgres.connections.prepared import ConnectionDropped, Prepared
from parrot_parents.stores.postgres.connections.reads import (
    Settings,
    set_config_sql,
    through_outages,
)
from parrot_parents.stores.postgres.connections.vector_codec import register_vector_codec

__all__ = ["READ_POOL_SIZE", "READ_STATEMENT_CACHE", "ReadConnection", "ReadPool"]

T = TypeVar("T")

#: Connections the pool keeps open at most (it opens them as reads need them).
READ_POOL_SIZE = 5
#: Statements each connection keeps prepared (asyncpg's ``statement_cache_size``; its
#: default is 100), unless ``connect_args`` name another number. A partition key's value,
#: and a filter key's value with a graph of its own, has a statement of its own: searches
#: cycling through 200 such values took 10.3 ms p50 with 100, each statement prepared and
#: planned again, and 1.1 ms with 256, as through 50 values. Cycling through more values
#: than are kept prepares each again whatever the size (300 values: 9.4 ms with either).
#: The server keeps about 165 KB per such statement (``pg_backend_memory_contexts``): 42
#: MB a connection with 256 (benchmarks/reports/statement_cache.md).
READ_STATEMENT_CACHE = 256


class ReadConnection(asyncpg.Connection):
    """An asyncpg connection that remembers the session settings applied to it."""

    __slots__ = ("_session",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The settings the session has, by name; None after an interrupted change.
        self._session: dict[str, str | None] | None = {}

    async def fetch_with(
        self, sql: str, args: Sequence[Any], settings: Settings
    ) -> list[asyncpg.Record]:
        """``sql``'s rows, after setting on the session what ``settings`` names (once per
        change). A value of None means the start-up value (``reset_val``).

        Raises:
            ConnectionDropped: the connection was closed under it (asyncpg then detaches
                the pool's proxy, so only the connection itself can tell).
        """
        wanted = dict(settings)
        session = self._session
        try:
            if wanted and (session is None or any(session.get(k) != v for k, v in wanted.items())):
                # Unknown until the server has answered: a cancelled change is sent again.
                self._session = None
                change, values = set_config_sql(settings, local=False)
                await self.execute(change, *values)
                self._session = {**(session or {}), **wanted}
            return await self.fetch(sql, *args)
        except Exception as exc:
            if self.is_closed():
                raise ConnectionDropped(f"connection closed: {type(exc).__name__}") from exc
            raise


async def _reset(conn: asyncpg.Connection) -> None:
    # Only the store's own statements run here, outside transactions; the session's
    # settings stay, as the connection remembers them.
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


class ReadPool:
    """A lazily opened asyncpg pool for one store (see the module docstring).

    Args:
        connect_kwargs: keyword arguments of ``asyncpg.connect`` (host, port, user,
            password, database, ssl...), as SQLAlchemy's asyncpg dialect derives them from
            the engine's URL; ``statement_cache_size`` defaults to
            :data:`READ_STATEMENT_CACHE`.
        server_settings: the sessions' start-up settings (GUC name -> value).
    """

    def __init__(
        self, connect_kwargs: Mapping[str, Any], server_settings: Mapping[str, str]
    ) -> None:
        self._connect_kwargs = {"statement_cache_size": READ_STATEMENT_CACHE, **connect_kwargs}
        self._server_settings = {
            **dict(self._connect_kwargs.pop("server_settings", None) or {}),
            **server_settings,
        }
        self._pool: asyncpg.Pool[asyncpg.Record] | None = None
        self._loggers: list[Callable[[Any], None]] = []
        #: Connections opened so far (each a server process and its start-up round trips).
        self.opened = 0

    async def _init(self, conn: asyncpg.Connection) -> None:
        # asyncpg hands ``init`` the connection itself, of the pool's connection_class.
        assert isinstance(conn, ReadConnection)
        self.opened += 1
        await register_vector_codec(conn)
        for name in ("json", "jsonb"):
            await conn.set_type_codec(
                name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
            )
        conn._session = dict(self._server_settings)  # what the session starts with
        for logger in self._loggers:
            conn.add_query_logger(logger)

    async def add_query_logger(self, callback: Callable[[Any], None]) -> None:
        """Have asyncpg hand every statement of this pool to ``callback`` (an
        ``asyncpg.LoggedQuery``), on the connections it opens from now on; open ones are
        replaced at their next use. For measurements; it costs time on every read."""
        self._loggers.append(callback)
        if self._pool is not None:
            await self._pool.expire_connections()

    async def _open(self) -> asyncpg.Pool[asyncpg.Record]:
        if self._pool is None:
            self._pool = await asyncpg.create_pool(
                min_size=0,
                max_size=READ_POOL_SIZE,
                init=self._init,
                reset=_reset,
                connection_class=ReadConnection,
                server_settings=self._server_settings,
                **self._connect_kwargs,
            )
        return self._pool

    async def fetch(
        self,
        action: str,
        prepared: Prepared,
        params: Mapping[str, Any],
        settings: Settings = (),
    ) -> Sequence[Any]:
        """The rows of ``prepared`` for its runtime ``params`` (one round trip; see the
        module), as asyncpg ``Record``s: read by column name like mappings. ``action``
        names what is done in an error's message ("search in public.docs").

        Raises:
            StoreError: the database failed or is unavailable (no SQL in the message).
        """
        args = prepared.args(params)
        return await self.run(
            lambda conn: conn.fetch_with(prepared.sql, args, settings), action=action
        )

    async def run(
        self, work: Callable[[ReadConnection], Awaitable[T]], *, action: str = "read"
    ) -> T:
        """``work(conn)`` on a pooled connection: the most recently used one when it is idle
        (asyncpg's pool hands out live connections last in, first out). It must only read,
        and run its statements with :meth:`ReadConnection.fetch_with`: the whole of it runs
        again on a fresh connection when its connection is cut, and waits for a recovering
        server (:func:`~parrot_parents.stores.postgres.connections.reads.through_outages`).

        Raises:
            StoreError: the database failed or is unavailable (no SQL in the message).
        """

        async def attempt() -> T:
            async with store_errors(action):
                pool = await self._open()
                try:
                    async with pool.acquire() as proxy:
                        # asyncpg's proxy forwards every attribute to the ReadConnection.
                        return await work(cast(ReadConnection, proxy))
                except ConnectionDropped:
                    # A restart closes every connection of the pool, not just this one.
                    await pool.expire_connections()
                    raise

        return await through_outages(attempt, self._server_ready, lambda: self._connect_kwargs)

    async def _server_ready(self) -> bool | None:
        """Whether a new session can run a statement now (a probe after a cut connection,
        :func:`~parrot_parents.stores.postgres.connections.reads.through_outages`); None
        when nothing listens (the server is down, not restarting: a restarting one keeps
        its socket and answers that it cannot take sessions yet)."""
        try:
            conn = await asyncpg.connect(**{"timeout": 5, **self._connect_kwargs})
        except (ConnectionRefusedError, FileNotFoundError):
            return None
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return False
        try:
            await conn.fetchval("SELECT 1")
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return False
        finally:
            with contextlib.suppress(Exception):
                await conn.close(timeout=5)
        return True

    async def close(self) -> None:
        """Close the pool's connections (waits for reads in flight). Safe to call twice."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
