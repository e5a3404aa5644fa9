"""How the store reads and writes through its SQLAlchemy engine, with one error mapping and
one retry policy for every path (:func:`through_outages`; the read pool uses it too).

A read runs in autocommit (one round trip); one that needs settings sets them with
``set_config(..., true)`` in its transaction, so a shared engine's connections go back as
they came.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import asyncpg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from parrot_parents.embedded.revival import revive
from parrot_parents.errors import StoreError
from parrot_parents.stores.postgres.connections.engine import causes, connect_args, store_errors
from parrot_parents.stores.postgres.connections.prepared import ConnectionDropped
from parrot_parents.stores.postgres.connections.vector_codec import ensure_codec

__all__ = [
    "RECOVERY_WAIT_S",
    "Settings",
    "read",
    "set_config_sql",
    "through_outages",
    "write",
]

T = TypeVar("T")

#: ``((name, value), ...)``: session settings a read needs, in a fixed order; a value of
#: None means the session's default (its ``RESET`` value).
Settings = tuple[tuple[str, str | None], ...]

#: Seconds a read or write waits, at most, for a server that says it is restarting after a
#: crash or replaying its log (SQLSTATE 57P02, 57P03), before it fails.
RECOVERY_WAIT_S = 30.0

#: Retries of a statement whose connection was cut, and the pause before the second.
_CUT_RETRIES = 2
_CUT_PAUSE_S = 0.5

#: How a new connection fails when the server ends it during its start-up, as a server
#: ending every session after a backend crashed does for a moment. Nothing ran on it, so
#: it is retried as a cut. A refused connection (nothing listening) is not among them.
_CLOSED_AT_START: tuple[type[BaseException], ...] = (
    asyncpg.ConnectionDoesNotExistError,
    ConnectionResetError,
)

#: SQLSTATEs of a server that will be back by itself shortly: restarting after a crash,
#: recovering.
_RECOVERING = frozenset({"57P02", "57P03"})


def was_disconnect(exc: BaseException) -> bool:
    """True when ``exc`` (or what it wraps) is SQLAlchemy's "connection invalidated", the
    read pool's :class:`~parrot_parents.stores.postgres.connections.prepared.ConnectionDropped`,
    or a connection the server closed as it opened (:data:`_CLOSED_AT_START`)."""
    return any(
        isinstance(cur, (ConnectionDropped, *_CLOSED_AT_START))
        or (isinstance(cur, DBAPIError) and cur.connection_invalidated)
        for cur in causes(exc)
    )


def nothing_listens(exc: BaseException) -> bool:
    """True when ``exc`` (or what it wraps) is a refused connection or a missing socket
    file: no server runs there, as opposed to one that ended a session."""
    return any(isinstance(cur, ConnectionRefusedError | FileNotFoundError) for cur in causes(exc))


async def through_outages(
    attempt: Callable[[], Awaitable[T]],
    ready: Callable[[], Awaitable[bool | None]] | None = None,
    target: Callable[[], Mapping[str, Any]] | None = None,
) -> T:
    """``attempt()``, run once more at once when its pooled connection was dead, and again
    with backoff (0.05 s doubling to 1 s) while the server says it is recovering (SQLSTATE
    57P02, 57P03), for at most :data:`RECOVERY_WAIT_S` seconds; then the last error is
    raised.

    When nothing listens at ``target()`` (``asyncpg.connect`` arguments) and it is the
    embedded server this process uses, the server is started again and ``attempt()`` runs
    once more (:func:`~parrot_parents.embedded.revival.revive`); a server given by DSN is
    only reported down.

    A statement whose connection is cut is sent at most :data:`_CUT_RETRIES` more times:
    it may be the one that crashes the server. Only the server's own "recovering" answers
    are waited for beyond that. Before the second such retry, ``ready()`` (when given) is
    awaited: a probe that returns True once a new session can run a statement, so that a
    retry is not spent on a server still ending its sessions after a crash (how long that
    takes depends on the machine's load, not on a fixed pause), and None when nothing
    listens at all: a server that is down, not restarting, is not waited for.
    """
    deadline: float | None = None
    delay = 0.05
    cuts = 0
    revived = False
    while True:
        try:
            return await attempt()
        except StoreError as exc:
            if target is not None and not revived and nothing_listens(exc):
                revived = True
                if await revive(target()):
                    continue
                raise
            if was_disconnect(exc) and cuts < _CUT_RETRIES:
                # The first retry at once (a connection a restart left dead); the second
                # after a pause, since a connection opened just as a backend crashed is
                # ended with the others before the server starts refusing new ones.
                if cuts:
                    await _wait_ready(ready)
                cuts += 1
                continue
            if exc.sqlstate not in _RECOVERING:
                raise
            now = time.monotonic()
            deadline = deadline if deadline is not None else now + RECOVERY_WAIT_S
            if now >= deadline:
                raise
            await asyncio.sleep(min(delay, deadline - now))
            delay = min(delay * 2, 1.0)


async def _wait_ready(ready: Callable[[], Awaitable[bool | None]] | None) -> None:
    """A pause after a cut: until ``ready()`` says the server takes sessions again, or
    that nothing listens (with backoff, at most :data:`RECOVERY_WAIT_S` seconds), or
    :data:`_CUT_PAUSE_S` without a probe."""
    await asyncio.sleep(_CUT_PAUSE_S)
    if ready is None:
        return
    deadline = time.monotonic() + RECOVERY_WAIT_S
    delay = 0.05
    while await ready() is False and time.monotonic() < deadline:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


def set_config_sql(settings: Settings, *, local: bool) -> tuple[str, list[str]]:
    """One ``SELECT set_config($1, $2, local), ...`` of ``settings`` (a value of None: the
    setting's ``reset_val``), and its positional arguments."""
    calls, values = [], []
    for name, value in settings:
        values.append(name)
        n = len(values)
        if value is None:
            new = f"(SELECT reset_val FROM pg_settings WHERE name = ${n})"
        else:
            values.append(value)
            new = f"${n + 1}"
        calls.append(f"set_config(${n}, {new}, {str(local).lower()})")
    return f"SELECT {', '.join(calls)}", values


async def read(
    engine: AsyncEngine,
    action: str,
    work: Callable[[AsyncConnection], Awaitable[T]],
    settings: Settings = (),
) -> T:
    """Run ``work(conn)`` with the vector codec in place: in autocommit, or in a
    transaction holding ``settings`` when there are any; retried as
    :func:`through_outages` says.

    Args:
        action: what is being done, for the error message ("search in public.docs").
        work: the statements; it must only read.
        settings: session settings it needs (``hnsw.ef_search`` ...), for this read only.

    Raises:
        StoreError: the database failed or is unavailable (no SQL in the message).
    """

    async def attempt() -> T:
        async with store_errors(action), engine.connect() as conn:
            await ensure_codec(conn)
            if not settings:
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                return await work(conn)
            async with conn.begin():
                sql, values = set_config_sql(settings, local=True)
                await conn.exec_driver_sql(sql, tuple(values))
                return await work(conn)

    return await through_outages(attempt, target=lambda: connect_args(engine))


async def write(
    engine: AsyncEngine,
    action: str,
    work: Callable[[AsyncConnection], Awaitable[T]],
    *,
    retry_lock_conflicts: bool = False,
) -> T:
    """Run ``work(conn)`` in one transaction; retried as :func:`through_outages` says.

    Only for idempotent work (the store's writes are: a replace deletes and writes the
    same rows again, an upsert leaves one copy). A dead connection fails at ``BEGIN``,
    before anything is written; a transaction cut short later is rolled back by the
    server, so the retry starts from the state before it.

    Args:
        retry_lock_conflicts: run the transaction again, after a pause (50 ms doubling to
            1 s; up to :data:`_LOCK_RETRIES` more times), when it was a deadlock's victim
            or its ``lock_timeout`` ran out (SQLSTATE 40P01, 55P03): it was rolled back
            whole, so running it again is safe.

    Raises:
        StoreError: the database failed or is unavailable (no SQL in the message).
    """

    async def attempt() -> T:
        async with store_errors(action), engine.begin() as conn:
            return await work(conn)

    tries, delay = 0, 0.05
    while True:
        try:
            return await through_outages(attempt, target=lambda: connect_args(engine))
        except StoreError as exc:
            conflict = exc.sqlstate in _LOCK_CONFLICTS
            if not retry_lock_conflicts or not conflict or tries >= _LOCK_RETRIES:
                raise
            tries += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


#: Deadlock victim, lock timeout: what ``write(retry_lock_conflicts=True)`` retries.
_LOCK_CONFLICTS = frozenset({"40P01", "55P03"})
_LOCK_RETRIES = 30
