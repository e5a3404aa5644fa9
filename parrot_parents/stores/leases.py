"""Pooled connections kept checked out for the store's prepared reads (issue 11).

A search on 100k children runs in about a millisecond. Checking a connection out of
SQLAlchemy's pool and back in around it cost 0.4 ms more (``engine.connect()``: the
``Connection`` object, two greenlet hops, the reset on return); even a bare checkout
(``pool.connect()``) or an ``asyncpg.Pool`` acquire/release costs 0.1-0.2 ms (a probe
at 100k children, interleaved with the bare kNN; ``benchmarks/scale.py`` has the pooled
floor). So the store's prepared reads (:mod:`parrot_parents.stores.prepared`) run on
*leases*: connections checked out of the engine's own pool once, then kept and handed
from one read to the next at the cost of a list ``pop``/``append``.

What stays SQLAlchemy's: connecting (DSN, SSL, the ``connect`` events that install the
vector codec), the pool's limit, invalidation. What is ours is only the hand-over:

* **Bounded, and writes keep their share.** An engine's leases never exceed half its
  pool (:func:`leases_for`; an engine with a pool of 10 keeps at most 5). When every
  connection the pool may open is checked out (the caller's own code may hold the rest
  of a shared pool), a checkout outside the leases first checks an idle lease back in
  (:func:`make_room`), and a lease whose read ends goes back to the pool instead of
  waiting for the next read, so writes, filtered searches and the caller never wait
  behind connections kept idle for reads. An engine without a sized pool (``NullPool``),
  or one built with ``pool_pre_ping=True`` (a ping asked for at every checkout), gets no
  leases: its reads go through SQLAlchemy as before. One set of leases per engine, shared
  by every store on it.
* **What a checkout would check still holds**: an idle lease older than the pool's
  ``pool_recycle``, or opened before the pool was invalidated, is replaced, as
  SQLAlchemy replaces such a connection at checkout.
* **Queued when all are busy**: a read waits for the next lease returned (first come,
  first served) instead of opening more.
* **A connection in doubt is not handed on.** A read that failed on anything but a
  server error (PostgreSQL's own error leaves the connection usable), or was cancelled
  mid-statement, invalidates its connection; the slot opens a fresh one next time.
* **A server restart.** A lease found closed invalidates every idle lease and the
  pool's older connections (SQLAlchemy's own disconnect handling, ``Pool._invalidate``),
  and raises :class:`~parrot_parents.stores.prepared.ConnectionDropped`, which the read
  retries once on a fresh connection.
* **Returned on close.** :func:`release_idle` (``PgVectorStore.close``) checks idle
  leases back in; one in use is checked in when its read ends (unless a read asks for a
  lease in between: another store on the engine). ``engine.dispose()``
  (which leaves checked-out connections alone) invalidates the idle leases, and a lease
  in use when its pool was replaced is invalidated when its read ends.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import Pool
from sqlalchemy.util import greenlet_spawn

from parrot_parents.stores.prepared import ConnectionDropped

__all__ = ["Lease", "Leases", "leases_for", "make_room", "pool_exhausted", "release_idle"]

T = TypeVar("T")

_BY_ENGINE: weakref.WeakKeyDictionary[Engine, Leases] = weakref.WeakKeyDictionary()


@dataclass(eq=False)
class Lease:
    """One checked-out pooled connection.

    Attributes:
        fairy: SQLAlchemy's checked-out connection (``PoolProxiedConnection``).
        pool: the pool it came from.
        driver: the asyncpg connection under it.
        info: the pooled connection's ``info`` (lives as long as the connection; the
            codec and session-settings markers of :mod:`~parrot_parents.stores.reads`).
    """

    fairy: Any
    pool: Pool
    driver: Any
    info: dict[Any, Any]


class Leases:
    """At most ``size`` leases of ``engine``'s pool (see the module docstring)."""

    def __init__(self, engine: Engine, size: int) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        # Weak: the leases live in a table keyed by the engine, and must not keep it alive.
        self._engine_ref = weakref.ref(engine)
        self.size = size
        self._idle: list[Lease] = []
        self._open = 0  # leases checked out (idle or in use) plus slots being opened
        self._waiters: deque[asyncio.Future[Lease | None]] = deque()
        # Set by release_idle (a store closed): leases in use go back to the pool when
        # their read ends, until a read asks for a lease again.
        self._drain = False

    @property
    def _engine(self) -> Engine:
        engine = self._engine_ref()
        if engine is None:  # pragma: no cover - the engine's reads hold it
            raise RuntimeError("the engine of these leases is gone")
        return engine

    @property
    def idle(self) -> int:
        """Leases kept and free right now."""
        return len(self._idle)

    @property
    def checked_out(self) -> int:
        """Leases checked out of the pool (free or in use)."""
        return self._open

    async def run(self, work: Callable[[Lease], Awaitable[T]]) -> T:
        """``work(lease)`` on a lease, returned for the next read afterwards.

        Raises:
            ConnectionDropped: the connection was found closed (a server restart); the
                idle leases and the pool's older connections were invalidated.
            Exception: whatever ``work`` or connecting raised.
        """
        lease = await self._acquire()
        try:
            result = await work(lease)
        except BaseException as exc:
            closed = lease.driver.is_closed()
            if closed:
                self._invalidate_all(lease, exc)
            else:
                await self._give_back(lease, reusable=_is_server_error(exc))
            if closed and isinstance(exc, Exception):
                raise ConnectionDropped(f"connection closed: {type(exc).__name__}") from exc
            raise
        await self._give_back(lease, reusable=True)
        return result

    async def _give_back(self, lease: Lease, *, reusable: bool) -> None:
        """Keep ``lease`` for the next read, unless its connection is wanted back in the
        pool: the store closed while it was in use, or every connection the pool may open
        is checked out, so that a checkout outside the leases (a write, a filtered search,
        the caller's own code on a shared engine) would wait."""
        if reusable and not self._waiters and (self._drain or pool_exhausted(lease.pool)):
            await self._return(lease)
            return
        self._release(lease, reusable=reusable)

    async def _return(self, lease: Lease) -> None:
        """Give up ``lease`` and its slot: a live connection of the engine's current pool
        is checked back in (SQLAlchemy resets it there); one of a pool since replaced (its
        pool was disposed), or one the server dropped, is invalidated instead."""
        self._open -= 1
        try:
            if lease.fairy.dbapi_connection is None:
                return  # invalidated already
            engine = self._engine_ref()
            if engine is None or lease.pool is not engine.pool or lease.driver.is_closed():
                self._discard(lease)
                return
            try:
                await greenlet_spawn(lease.fairy.close)
            except BaseException:
                self._discard(lease)
                raise
        finally:
            self._wake()

    async def return_one_idle(self) -> bool:
        """Check one idle lease back into the pool; False when none is idle."""
        if not self._idle:
            return False
        await self._return(self._idle.pop())
        return True

    async def _acquire(self) -> Lease:
        self._drain = False
        pool = self._engine.pool
        while self._idle:
            lease = self._idle.pop()
            if lease.pool is pool and not lease.driver.is_closed() and not _expired(lease):
                return lease
            self._discard(lease)
            self._open -= 1
        if self._open >= self.size:
            waiter: asyncio.Future[Lease | None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                handed = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    # Handed over just as we were cancelled: pass it on.
                    handed = waiter.result()
                    if handed is None:
                        self._open -= 1
                        self._wake()
                    else:
                        self._release(handed, reusable=True)
                elif waiter in self._waiters:  # a release may have skipped it already
                    self._waiters.remove(waiter)
                raise
            if handed is not None:
                return handed
            # ``None``: a slot was freed and reserved for us; open it below.
        else:
            self._open += 1
        try:
            fairy = await greenlet_spawn(pool.connect)
        except BaseException as exc:
            self._open -= 1
            self._wake()
            dialect = self._engine.dialect
            if isinstance(exc, dialect.loaded_dbapi.Error):
                # Wrapped as ``engine.connect()`` wraps it (a bare checkout does not), so
                # it reads as any other database error (``StoreError``, SQLSTATE kept).
                raise DBAPIError.instance(
                    None, None, exc, dialect.loaded_dbapi.Error, dialect=dialect
                ) from exc
            raise
        return Lease(fairy, pool, fairy.driver_connection, fairy.info)

    def _release(self, lease: Lease, *, reusable: bool) -> None:
        if reusable and lease.pool is self._engine.pool and not lease.driver.is_closed():
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(lease)
                    return
            self._idle.append(lease)
            return
        self._discard(lease)
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        """Give a freed slot to the first waiter (it opens a connection)."""
        while self._waiters and self._open < self.size:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._open += 1
                waiter.set_result(None)
                return

    @staticmethod
    def _discard(lease: Lease) -> None:
        """Invalidate ``lease``: its connection is closed without waiting on the server,
        and SQLAlchemy opens a new one in its place at the next checkout. Used for a
        connection in doubt, a dead one, and one of a pool since replaced."""
        if lease.fairy.dbapi_connection is not None:
            lease.fairy.invalidate()

    def _invalidate_all(self, lease: Lease, exc: BaseException) -> None:
        """A restart: every connection opened before now is dead."""
        # SQLAlchemy's own disconnect handling: connections the pool opened before now are
        # recycled at their next checkout (private, stable since SQLAlchemy 1.x).
        invalidate_pool = getattr(lease.pool, "_invalidate", None)
        if invalidate_pool is not None:
            cause = exc if isinstance(exc, Exception) else None
            invalidate_pool(lease.fairy, cause, _checkin=False)
        self._discard(lease)
        self._open -= 1
        self._wake()
        self.discard_idle()

    async def release_idle(self) -> None:
        """Check every idle lease back into its pool (leases in use stay theirs); one of a
        pool since replaced (its pool was disposed), or found closed, is invalidated
        instead. Leases in use are checked in when their read ends, unless a read asks
        for a lease first."""
        self._drain = True
        idle, self._idle = self._idle, []
        for lease in idle:
            await self._return(lease)

    def discard_idle(self) -> None:
        """Invalidate every idle lease (the engine's pool was disposed: its checked-out
        connections would otherwise stay open). Leases in use are invalidated when their
        read ends, since their pool is no longer the engine's."""
        idle, self._idle = self._idle, []
        for lease in idle:
            self._discard(lease)
            self._open -= 1
        for _ in idle:
            self._wake()


def _expired(lease: Lease) -> bool:
    """What SQLAlchemy checks at a checkout, which a kept lease skips: the pool's
    ``pool_recycle`` age, and an invalidation of the pool since the connection opened
    (SQLAlchemy's private record attributes, read defensively)."""
    record = getattr(lease.fairy, "_connection_record", None)
    started = getattr(record, "starttime", None)
    if started is None:
        return False
    recycle = getattr(lease.pool, "_recycle", -1)
    if recycle > -1 and time.time() - started > recycle:
        return True
    return bool(getattr(lease.pool, "_invalidate_time", 0) > started)


def pool_exhausted(pool: Pool) -> bool:
    """Every connection ``pool`` may open is checked out (a sized pool with a bounded
    overflow), so the next checkout waits."""
    size, checkedout = getattr(pool, "size", None), getattr(pool, "checkedout", None)
    overflow = getattr(pool, "_max_overflow", None)
    if not callable(size) or not callable(checkedout) or not isinstance(overflow, int):
        return False
    return overflow >= 0 and checkedout() >= size() + overflow


async def make_room(engine: AsyncEngine) -> None:
    """Before a checkout outside the leases: when ``engine``'s pool has no connection
    left, check an idle lease back in, so that the checkout does not wait behind
    connections kept for reads (the caller's own code may hold the rest of a shared
    pool)."""
    found = _BY_ENGINE.get(engine.sync_engine)
    if found is not None and found.idle and pool_exhausted(engine.sync_engine.pool):
        await found.return_one_idle()


def _is_server_error(exc: BaseException) -> bool:
    """PostgreSQL answered with an error: the connection is idle and usable again."""
    try:
        import asyncpg
    except ImportError:  # pragma: no cover - a hard dependency
        return False
    return isinstance(exc, asyncpg.PostgresError)


def leases_for(engine: AsyncEngine) -> Leases | None:
    """The engine's leases: at most half its pool's ``size()``; None for an engine whose
    pool has no size (``NullPool``, ``StaticPool``) or a size below 2, or a driver other
    than asyncpg."""
    sync_engine = engine.sync_engine
    found = _BY_ENGINE.get(sync_engine)
    if found is not None:
        return found
    pool = sync_engine.pool
    size = getattr(pool, "size", None)
    if sync_engine.dialect.driver != "asyncpg" or not callable(size) or size() // 2 < 1:
        return None
    if getattr(pool, "_pre_ping", False):
        # The caller asked for a ping at every checkout: reads keep checking out.
        return None
    found = _BY_ENGINE[sync_engine] = Leases(sync_engine, size() // 2)
    # ``engine.dispose()`` leaves checked-out connections alone: drop the idle leases then.
    event.listen(sync_engine, "engine_disposed", lambda _engine: found.discard_idle())
    return found


async def release_idle(engine: AsyncEngine) -> None:
    """Check ``engine``'s idle leases back into its pool (before ``engine.dispose()``)."""
    found = _BY_ENGINE.get(engine.sync_engine)
    if found is not None:
        await found.release_idle()
