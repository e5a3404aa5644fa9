"""The one place that turns a DSN into an SQLAlchemy ``AsyncEngine``, and database errors
into :class:`~parrot_parents.errors.StoreError`.

* :func:`make_engine`: ``None`` means ``$PARROT_PARENTS_DSN``, else the embedded server.
  No pre-ping (one to three round trips a checkout; the reads retry a dead connection
  instead, ``pool_pre_ping=True`` restores it); :data:`POOL_SIZE` connections and no
  overflow, so a burst queues rather than opening and closing connections
  (docs/performance.md, "Concurrent queries"). The engine serves DDL, writes, COPY and
  the other reads; searches run on the store's own asyncpg pool.
* :func:`store_errors`: driver and SQLAlchemy errors, and the ``OSError`` of a gone socket,
  become ``StoreError`` with ``sqlstate`` and without SQL text, decided on the exception
  class and SQLSTATE, never on message text.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from parrot_parents.embedded.revival import revive
from parrot_parents.embedded.server import resolve_dsn
from parrot_parents.errors import CollectionNotFoundError, StoreError
from parrot_parents.stores.postgres.connections.dsn import to_async_dsn
from parrot_parents.stores.postgres.connections.vector_codec import install as install_vector_codec

__all__ = [
    "POOL_SIZE",
    "UNAVAILABLE_SQLSTATE_CLASSES",
    "UNDEFINED_TABLE",
    "causes",
    "connect_args",
    "engine_for_url",
    "is_unavailable",
    "make_engine",
    "sqlstate_of",
    "store_error",
    "store_errors",
]

#: SQLSTATE classes that mean "the server is not there right now": 08 connection
#: exception, 57 operator intervention (shutdown, starting up), 53 insufficient resources.
UNAVAILABLE_SQLSTATE_CLASSES = frozenset({"08", "57", "53"})

#: Connections an engine of :func:`make_engine` keeps open (no overflow; see the module).
POOL_SIZE = 5


async def make_engine(dsn: str | None = None, **kwargs: Any) -> AsyncEngine:
    """An async engine (asyncpg) for ``dsn``, the environment's DSN or the embedded server.

    Args:
        dsn: ``postgresql://`` DSN, or None (see module docstring).
        **kwargs: passed to :func:`sqlalchemy.ext.asyncio.create_async_engine`;
            ``pool_pre_ping`` defaults to False; without a ``poolclass``, ``pool_size``
            to :data:`POOL_SIZE` and ``max_overflow`` to 0 (see the module docstring).

    Raises:
        ConfigurationError: an unparsable DSN or another driver.
        StoreError: the embedded server could not be started.
    """
    raw = await asyncio.to_thread(resolve_dsn, dsn)
    engine = engine_for_url(to_async_dsn(raw), **kwargs)
    # The embedded server this process holds may have stopped since it was last used.
    await revive(connect_args(engine))
    return engine


def engine_for_url(url: str | URL, **kwargs: Any) -> AsyncEngine:
    """:func:`make_engine`'s engine for an ``postgresql+asyncpg`` URL already resolved
    (no I/O: a store makes one so for each further event loop it is used from)."""
    kwargs.setdefault("pool_pre_ping", False)
    if "poolclass" not in kwargs:  # NullPool and the like take no sizes
        kwargs.setdefault("pool_size", POOL_SIZE)
        kwargs.setdefault("max_overflow", 0)
    engine = create_async_engine(url, **kwargs)
    install_vector_codec(engine)
    return engine


def connect_args(engine: AsyncEngine) -> dict[str, Any]:
    """The ``asyncpg.connect`` arguments of ``engine``'s URL, as its dialect reads it."""
    return dict(engine.dialect.create_connect_args(engine.url)[1])


def causes(exc: BaseException, *, context: bool = False) -> Iterator[BaseException]:
    """``exc`` and what it wraps, each once: SQLAlchemy's ``orig``, else ``__cause__``
    (with ``context``, else ``__context__`` too)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = getattr(cur, "orig", None) or cur.__cause__ or (cur.__context__ if context else None)


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE carried by a driver or SQLAlchemy error (or its cause), else None."""
    for cur in causes(exc):
        code = getattr(cur, "sqlstate", None) or getattr(cur, "pgcode", None)
        if isinstance(code, str) and code:
            return code
    return None


def is_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` means the server is gone or unreachable: an ``OSError`` (refused,
    socket file missing, reset), a timeout, an invalidated connection, SQLSTATE class 08,
    53 or 57, or a driver interface error on a dropped connection. Decided by exception
    class and SQLSTATE only."""
    if isinstance(exc, OSError | TimeoutError | ConnectionError):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    orig = getattr(exc, "orig", None)
    cause = getattr(orig, "__cause__", None)
    if isinstance(orig, OSError) or isinstance(cause, OSError | TimeoutError):
        return True
    code = sqlstate_of(exc)
    if code is not None:
        return code[:2] in UNAVAILABLE_SQLSTATE_CLASSES
    # Interface errors without a code: the connection dropped under the driver.
    # DataError (a bad argument) is an InterfaceError too, but not an outage.
    return any(
        isinstance(x, asyncpg.InterfaceError) and not isinstance(x, asyncpg.DataError)
        for x in (exc, cause)
    )


def _driver_message(exc: BaseException) -> str:
    """The server's one-line message, without SQL text (never ``str(SQLAlchemyError)``):
    from the driver error SQLAlchemy wraps, or from a driver error raised outside it (the
    store's prepared statements run on the driver)."""
    if isinstance(exc, SQLAlchemyError):
        orig = getattr(exc, "orig", None)
        candidates = (getattr(orig, "__cause__", None), orig)
    elif sqlstate_of(exc):
        candidates = (exc, None)
    else:
        return ""
    for candidate in candidates:
        if candidate is None:
            continue
        message = getattr(candidate, "message", None) or getattr(candidate, "args", [None])[0]
        if isinstance(message, str) and message:
            # asyncpg's adapted errors read "<class '...'>: message".
            return message.split(">: ", 1)[-1].splitlines()[0][:300]
    return ""


#: Driver errors that mean the connection was cut while a statement ran.
_CUT = frozenset({"ConnectionDoesNotExistError", "ConnectionDropped", "ConnectionResetError"})

#: What an outage means, in words: by SQLSTATE (PostgreSQL's appendix A, class 57), else by
#: the driver error's class.
_OUTAGES = {
    "57P01": "the server is shutting down, or an administrator ended this connection",
    "57P02": "a server process crashed, and the server is restarting all of them",
    "57P03": "the server is starting up or recovering from a crash",
    "57P04": "the database was dropped",
    "57P05": "the server closed an idle session",
    **dict.fromkeys(
        _CUT,
        "the connection was cut while a statement ran: its server process crashed or "
        "was terminated (the server log says which)",
    ),
    **dict.fromkeys(
        ("ConnectionRefusedError", "FileNotFoundError"),
        "the server is not running or not reachable",
    ),
}

_OUTAGE_HINTS = {
    "57P02": "the server log names the process and its signal; reads and writes wait for "
    "the restart, so retry now",
    "57P03": "the server replays its log after a crash, usually within seconds; retry",
}


def _root_class(exc: BaseException) -> str:
    """The class name of the driver's error under SQLAlchemy's wrapper (or ``exc``'s)."""
    orig = getattr(exc, "orig", None)
    return type(getattr(orig, "__cause__", None) or orig or exc).__name__


def _root_message(exc: BaseException) -> str:
    """The first line of the driver's own message, for errors that carry no SQLSTATE."""
    for cur in causes(exc):
        if not isinstance(cur, SQLAlchemyError) and cur.args and isinstance(cur.args[0], str):
            return cur.args[0].splitlines()[0][:300] if cur.args[0] else ""
    return ""


def _unencodable(exc: BaseException) -> str | None:
    """The escaped character that made the driver fail to encode a parameter as UTF-8
    (a ``UnicodeEncodeError`` in ``exc``'s chain), else None."""
    for cur in causes(exc, context=True):
        if isinstance(cur, UnicodeEncodeError):
            return ascii(cur.object[cur.start : cur.end])
    return None


def _escape(message: str) -> str:
    """``message`` with what UTF-8 cannot encode (a lone surrogate a caller's text
    carried into the driver's words) written as a ``\\udxxx`` escape: an error message
    must print and serialise everywhere."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


#: SQLSTATE of a relation that does not exist: a collection's table (or one of its own
#: tables) dropped under a store that had it open.
UNDEFINED_TABLE = "42P01"


def store_error(exc: BaseException, action: str) -> StoreError:
    """A :class:`StoreError` describing ``exc`` while doing ``action`` (no SQL text).

    ``action`` completes "… failed" and names the collection, e.g. ``"search in
    public.docs"``. A missing relation (SQLSTATE 42P01) is a
    :class:`~parrot_parents.errors.CollectionNotFoundError`: the store checked the
    collection when it opened, so the collection was dropped since; the database is up.
    """
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, PoolTimeoutError):
        # The server may be fine: every connection of the pool stayed checked out.
        return StoreError(
            f"{action} failed: no pooled connection was free within the pool's timeout",
            hint="the caller holds too many of the engine's connections at once; raise "
            "pool_size or pool_timeout, or return connections sooner",
        )
    code = sqlstate_of(exc)
    suffix = f" (SQLSTATE {code})" if code else ""
    if is_unavailable(exc):
        kind = _root_class(exc)
        # Only an error the server sent carries its words: a cut connection has a SQLSTATE
        # (08003) that the driver gives it, and the driver's words.
        from_server = bool(code) and kind not in _CUT
        said = _escape(_driver_message(exc) if from_server else _root_message(exc))
        who = "the server" if from_server else "the driver"
        quote = f'; {who} said: "{said}"' if said else ""
        meaning = _OUTAGES.get(code or "") or _OUTAGES.get(kind, "the server could not be reached")
        return StoreError(
            f"{action} failed: the database is unavailable ({kind}): {meaning}{quote}{suffix}",
            hint=_OUTAGE_HINTS.get(code or "", "check that the server is running; retry later"),
            sqlstate=code,
            unavailable=True,
        )
    bad_text = _unencodable(exc)
    if bad_text is not None:
        # The driver's words quote the caller's whole value; name the character instead.
        return StoreError(
            f"{action} failed: a text value holds {bad_text}, a lone surrogate, which "
            "UTF-8 cannot encode",
            hint="clean the text first (encode it with errors='replace'), or leave the "
            "character out",
            sqlstate=code,
        )
    detail = _escape(_driver_message(exc))
    text = f": {detail}" if detail else f": {type(exc).__name__}"
    if code == UNDEFINED_TABLE:
        return CollectionNotFoundError(
            f"{action} failed: the collection no longer exists, it was dropped while in use "
            f"(the server said: {detail or 'a table is missing'}){suffix}",
            hint="ingest into it to make it again, or use another collection "
            "(`parrot-parents collections` lists them)",
            sqlstate=code,
        )
    if code == "40P01":
        # The server's message does not say what a deadlock means here, nor what to do.
        return StoreError(
            f"{action} failed: a deadlock with a concurrent transaction, most likely a "
            "schema change running at the same time (a collection being dropped or created, "
            f"a migration, a reindex); the server rolled this statement back{suffix}",
            hint="retry; if the collection was dropped, it no longer exists",
            sqlstate=code,
        )
    return StoreError(f"{action} failed{text}{suffix}", sqlstate=code)


@asynccontextmanager
async def store_errors(action: str) -> AsyncIterator[None]:
    """Re-raise database failures inside the block as :func:`store_error` (see module)."""
    try:
        yield
    except StoreError:
        raise
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        raise store_error(exc, action) from exc
    except Exception as exc:
        if type(exc).__module__.startswith("asyncpg"):
            raise store_error(exc, action) from exc
        raise
