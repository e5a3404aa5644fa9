"""Starting the embedded server again when a long-lived process finds it down.

When a read or write finds nothing listening on the embedded server's socket
(:func:`~parrot_parents.stores.postgres.connections.reads.through_outages`), or a new
engine is made, the server is started again: only the one
:func:`~parrot_parents.embedded.server.embedded_dsn` handed out in this process (never a
server given by DSN), under the data directory's lock (so concurrent finders start it once),
with one warning naming the data directory.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parrot_parents.embedded.server import embedded_servers, lock_path, process_alive

if TYPE_CHECKING:
    from pgserver.postgres_server import PostgresServer

__all__ = ["is_down", "restart_if_down", "revive"]

logger = logging.getLogger(__name__)

# An inter-process file lock does not exclude the threads of one process: this does.
_THREADS = threading.Lock()


def is_down(pgdata: Path) -> bool:
    """True when no postmaster runs for ``pgdata``: no ``postmaster.pid``, or its process
    is gone or a zombie (an exited server that nothing has reaped)."""
    from pgserver.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, AssertionError):  # a file being written or cut short
        return False
    return info is None or info.process is None or not process_alive(info.process.pid)


def restart_if_down(server: PostgresServer) -> bool:
    """Start ``server`` (pgserver's handle, held by this process) again when it is down,
    under its data directory's lock; blocking (seconds).

    Returns:
        True when it runs after the call (started here or by another process meanwhile),
        False when it could not be started (the reason is logged).
    """
    import fasteners

    with _THREADS, fasteners.InterProcessLock(str(lock_path(server.pgdata))):
        if not is_down(server.pgdata):
            return True
        try:
            server.ensure_postgres_running()
        except Exception as exc:
            logger.warning(
                "the embedded PostgreSQL of %s is down and could not be started again: %s: %s "
                "(its log is %s)",
                server.pgdata,
                type(exc).__name__,
                exc,
                server.pgdata / "log",
            )
            return False
    logger.warning(
        "the embedded PostgreSQL of %s was not running (stopped or crashed); started it again",
        server.pgdata,
    )
    return True


def _socket_dir(server: PostgresServer) -> str | None:
    info = getattr(server, "_postmaster_info", None)
    socket_dir = getattr(info, "socket_dir", None)
    return None if socket_dir is None else str(socket_dir)


async def revive(target: Mapping[str, Any]) -> bool:
    """Start the embedded server that ``target`` (``asyncpg.connect`` arguments: its
    ``host`` is the socket directory) reaches, when this process uses it and it is down.

    Returns:
        True when that server runs again, so that the failed statement is worth running
        once more; False for any other server (one given by DSN is never started), or
        when the start failed.
    """
    host = target.get("host")
    for server in embedded_servers():
        if host is not None and str(host) == _socket_dir(server):
            return not is_down(server.pgdata) or await asyncio.to_thread(restart_if_down, server)
    return False
