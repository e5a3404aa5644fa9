"""How the store reads (one round trip per statement, no transaction) and writes, each
retried once on a dead pooled connection.

A search used to cost seven round trips (``BEGIN; set_config; kNN; COMMIT; BEGIN;
parents; ROLLBACK``), plus a ping per checkout. A read here is just the statement:

* **no explicit transaction**: the connection runs in autocommit, so a lone ``SELECT``
  is sent as is (asyncpg's cached prepared statement: one round trip);
* **no checkout for the hot statements**: :func:`read_prepared` runs the store's
  prepared statements on a lease (:mod:`~parrot_parents.stores.leases`), a pooled
  connection kept checked out, instead of checking one out around every read;
* **session settings once per pooled connection**: the HNSW settings a search needs are
  applied with ``set_config(..., false)`` the first time a connection serves a search
  with those values, and remembered in the pooled connection's ``info``; later searches
  with the same values send nothing more;
* **nothing left behind on a shared engine**: on an engine the caller passed in
  (``PgVectorStore(engine=...)``), a connection whose session a read changed goes back to
  the pool with those settings at their defaults again (the server's, or the
  connection's start-up values; :func:`restore_on_return`), so the caller's own
  statements run as before. The names are recorded before the statement that changes
  them, so a read cancelled mid-way still leaves a trace. This costs one more statement
  at check-in, on the paths that check in: filtered searches, engines without leases,
  and each lease when the store closes. The store's own engine keeps its settings (no
  other code runs on it);
* **one retry on a dead connection**: without a pre-ping, a pooled connection that the
  server dropped (a restart) fails on first use; SQLAlchemy (or the leases, the same
  way) then invalidates the pool, and the read runs once more on a fresh connection.
  Reads are idempotent, so the retry is safe; a server that is really down fails the
  retry too and is reported as such;
* **a bounded wait for a recovering server**: after a backend crash PostgreSQL ends every
  connection and replays its log, refusing new ones meanwhile (SQLSTATE 57P02, 57P03).
  Reads and writes then retry with backoff for up to :data:`RECOVERY_WAIT_S` seconds,
  and go on once the server is back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import NullPool, PoolResetState
from sqlalchemy.util import await_only

from parrot_parents.errors import StoreError
from parrot_parents.stores.engine import store_errors
from parrot_parents.stores.leases import Lease, leases_for, make_room
from parrot_parents.stores.prepared import ConnectionDropped, Prepared, fetch_rows
from parrot_parents.stores.vector_codec import ensure_driver_codec

__all__ = [
    "RECOVERY_WAIT_S",
    "SETTINGS_KEY",
    "TOUCHED_KEY",
    "Settings",
    "is_recovering",
    "read",
    "read_prepared",
    "restore_on_return",
    "was_disconnect",
    "write",
]

T = TypeVar("T")

#: ``((name, value), ...)``: session settings a read needs, in a fixed order; a value of
#: None returns the setting to the session's default (its ``RESET`` value: the server's, or
#: what the connection asked for at start-up).
Settings = tuple[tuple[str, str | None], ...]

#: Key in a pooled connection's ``info``: the settings last applied to its session.
SETTINGS_KEY = "parrot_parents.session_settings"

#: Key in a pooled connection's ``info``: names of every setting a read may have changed
#: on its session (added before the statement runs; cleared when restored).
TOUCHED_KEY = "parrot_parents.session_touched"


def was_disconnect(exc: BaseException) -> bool:
    """True when ``exc`` (or what it wraps) is SQLAlchemy's "connection invalidated", or
    the driver path's :class:`~parrot_parents.stores.prepared.ConnectionDropped`."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionDropped):
            return True
        if isinstance(cur, DBAPIError) and cur.connection_invalidated:
            return True
        cur = cur.__cause__
    return False


async def _apply(driver: Any, info: dict[Any, Any], settings: Settings) -> None:
    """Set ``settings`` on the session of ``driver`` (an asyncpg connection) unless
    ``info`` (its pooled connection's) says it already has them."""
    if not settings or info.get(SETTINGS_KEY) == settings:
        return
    # Session-level (is_local=false): autocommit reads have no transaction to scope a
    # SET LOCAL; the values are remembered, so a connection is set once per change.
    info.pop(SETTINGS_KEY, None)
    # Before the round trip: a read cancelled after the server applied them still
    # leaves the names for restore_on_return.
    info[TOUCHED_KEY] = info.get(TOUCHED_KEY, frozenset()) | {name for name, _ in settings}
    calls = []
    args: list[str] = []
    for name, value in settings:
        args.append(name)
        n = len(args)
        if value is None:
            reset = f"(SELECT reset_val FROM pg_settings WHERE name = ${n})"
            calls.append(f"set_config(${n}, {reset}, false)")
        else:
            args.append(value)
            calls.append(f"set_config(${n}, ${n + 1}, false)")
    await driver.execute(f"SELECT {', '.join(calls)}", *args)
    info[SETTINGS_KEY] = settings


def restore_on_return(engine: AsyncEngine) -> None:
    """Have ``engine``'s pool set every session setting a read changed back to its
    default (``reset_val``: the server's, or the connection's start-up value) before the
    connection goes back to the pool; once per engine.

    For an engine shared with the caller's own code (see the module docstring). Nothing
    is installed on a pool that closes its connections at check-in (``NullPool``). A
    failing restore leaves SQLAlchemy to invalidate the connection, so no changed
    session is handed on.
    """
    target = engine.sync_engine
    if isinstance(target.pool, NullPool):
        return
    if not event.contains(target, "reset", _restore_settings):
        event.listen(target, "reset", _restore_settings)


def _restore_settings(dbapi_connection: Any, record: Any, state: PoolResetState) -> None:
    touched = record.info.get(TOUCHED_KEY)
    if not touched:
        return
    if state.terminate_only or not state.asyncio_safe:
        _forget(record.info)
        return  # the connection is being closed, not returned
    driver = dbapi_connection.driver_connection
    if driver.is_closed():
        _forget(record.info)
        return  # dead (a restart): nothing to restore, the pool replaces it
    if driver.is_in_transaction():
        # The rollback that follows would undo a change made now; the store's reads run
        # outside transactions, so the next check-in after one of them restores instead.
        return
    # Forget first: whatever happens next, the session no longer matches the record.
    _forget(record.info)
    # The pool's reset runs inside SQLAlchemy's greenlet (as its own rollback does).
    await_only(
        driver.execute(
            "SELECT set_config(name, reset_val, false) FROM pg_settings"
            " WHERE name = ANY($1::text[])",
            sorted(touched),
        )
    )


def _forget(info: dict[Any, Any]) -> None:
    info.pop(TOUCHED_KEY, None)
    info.pop(SETTINGS_KEY, None)


async def _ready(driver: Any, info: dict[Any, Any], settings: Settings) -> None:
    """The vector codec and ``settings`` in place on a connection."""
    await ensure_driver_codec(driver, info)
    await _apply(driver, info, settings)


#: Seconds a read or write waits, at most, for a server that says it is restarting after a
#: crash or replaying its log (SQLSTATE 57P02, 57P03), before it fails.
RECOVERY_WAIT_S = 30.0

#: SQLSTATEs of a server that will be back by itself shortly.
_RECOVERING = frozenset({"57P02", "57P03"})


def is_recovering(exc: BaseException) -> bool:
    """True when ``exc`` says the server is restarting after a crash or recovering."""
    return isinstance(exc, StoreError) and exc.sqlstate in _RECOVERING


async def _through_outages(attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt()``, run once more at once when its pooled connection was dead, and again
    with backoff (0.05 s doubling to 1 s) while the server is recovering, for at most
    :data:`RECOVERY_WAIT_S` seconds; then the last error is raised."""
    deadline: float | None = None
    delay = 0.05
    dead_retried = False
    while True:
        try:
            return await attempt()
        except StoreError as exc:
            if was_disconnect(exc) and not dead_retried:
                dead_retried = True
                continue
            # Only the server's own "recovering" answers are waited for: a statement cut
            # twice may be the one that crashes the server, and is not sent a third time.
            if not is_recovering(exc):
                raise
            now = time.monotonic()
            deadline = deadline if deadline is not None else now + RECOVERY_WAIT_S
            if now >= deadline:
                raise
            await asyncio.sleep(min(delay, deadline - now))
            delay = min(delay * 2, 1.0)


async def read(
    engine: AsyncEngine,
    action: str,
    work: Callable[[AsyncConnection], Awaitable[T]],
    settings: Settings = (),
) -> T:
    """Run ``work(conn)`` on an autocommit connection with ``settings`` and the vector
    codec in place; retried once when the pooled connection was dead.

    Args:
        engine: the store's engine.
        action: what is being done, for the error message ("search in public.docs").
        work: the statements; it must only read.
        settings: session settings it needs (``hnsw.ef_search`` ...).

    Raises:
        StoreError: the database failed or is unavailable (no SQL in the message).
    """

    async def attempt() -> T:
        async with store_errors(action):
            await make_room(engine)
        async with store_errors(action), engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            raw = await conn.get_raw_connection()
            await _ready(raw.driver_connection, conn.info, settings)
            return await work(conn)

    return await _through_outages(attempt)


async def read_prepared(
    engine: AsyncEngine,
    action: str,
    prepared: Prepared,
    params: Mapping[str, Any],
    settings: Settings = (),
) -> Sequence[Mapping[str, Any]]:
    """The rows of ``prepared`` for ``params``, read as :func:`read` does, on one of the
    engine's leases (:mod:`~parrot_parents.stores.leases`) when it has them: no
    checkout, no SQLAlchemy connection, only the statement (and the settings, the first
    time a connection serves them).

    Raises:
        StoreError: the database failed or is unavailable (no SQL in the message).
    """
    leases = leases_for(engine)
    if leases is None:
        return await read(engine, action, lambda conn: fetch_rows(conn, prepared, params), settings)
    args = prepared.args(params)

    async def work(lease: Lease) -> Sequence[Mapping[str, Any]]:
        await _ready(lease.driver, lease.info, settings)
        return await lease.driver.fetch(prepared.sql, *args)  # type: ignore[no-any-return]

    async def attempt() -> Sequence[Mapping[str, Any]]:
        async with store_errors(action):
            return await leases.run(work)

    return await _through_outages(attempt)


async def write(
    engine: AsyncEngine, action: str, work: Callable[[AsyncConnection], Awaitable[T]]
) -> T:
    """Run ``work(conn)`` in one transaction; retried once when the pooled connection was
    dead (no pre-ping, see the module docstring).

    Only for idempotent work (the store's writes are: a replace deletes and writes the
    same rows again, an upsert leaves one copy). A dead connection fails at ``BEGIN``,
    before anything is written; a transaction cut short later is rolled back by the
    server, so the retry starts from the state before it.

    Raises:
        StoreError: the database failed or is unavailable (no SQL in the message).
    """

    async def attempt() -> T:
        async with store_errors(action):
            await make_room(engine)
        async with store_errors(action), engine.begin() as conn:
            return await work(conn)

    return await _through_outages(attempt)
