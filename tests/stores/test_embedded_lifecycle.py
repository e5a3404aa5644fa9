"""The embedded server's lifecycle under faults: a crashed backend, a killed client
process, and two data directories used at once. Each test runs its own server in a
temporary data directory, so killing things disturbs no other test."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import psutil
import pytest
from langchain_core.documents import Document

from parrot_parents.embedded import server as embedded
from parrot_parents.errors import StoreError
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.connections.engine import store_error
from tests.conftest import REPO_ROOT, server_temp_dir, unique_table

#: Seconds a child process may take to start or stop a server here (a shared 2-core box).
START_S = 60


@pytest.fixture
def data_dir() -> Iterator[Path]:
    root = server_temp_dir("parrot-parents-life-")
    yield root / "data"
    _stop_whatever_runs(root / "data")


def _stop_whatever_runs(data: Path) -> None:
    """Stop a server a failed test left running in ``data``, then delete the directory."""
    pid_file = data / "postmaster.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text().split()[0])
        if psutil.pid_exists(pid):
            os.kill(pid, signal.SIGQUIT)  # immediate shutdown
            psutil.wait_procs([psutil.Process(pid)], timeout=20)
    subprocess.run(["rm", "-rf", str(data.parent)], check=False)


def _postmaster_pid(data: Path) -> int | None:
    pid_file = data / "postmaster.pid"
    if not pid_file.exists():
        return None
    pid = int(pid_file.read_text().split()[0])
    return pid if psutil.pid_exists(pid) else None


def _user(data: Path, *, wait_for_stdin: bool) -> subprocess.Popen[str]:
    """A child process that starts (or joins) the server of ``data``, prints its DSN, then
    sleeps (to be killed) or exits normally at the first line on its stdin."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from parrot_parents.embedded.server import embedded_dsn
        print(embedded_dsn({str(data)!r}), flush=True)
        if {wait_for_stdin!r}:
            sys.stdin.readline()
        else:
            time.sleep(600)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("postgresql://"), proc.stderr.read() if proc.stderr else line
    return proc


def _start_and_leave(data: Path) -> subprocess.CompletedProcess[str]:
    """A child process that starts (or joins) the server of ``data`` and exits at once."""
    code = f"from parrot_parents.embedded.server import embedded_dsn; embedded_dsn({str(data)!r})"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=START_S,
    )


def test_a_killed_client_does_not_keep_the_server_alive(data_dir: Path) -> None:
    first = _user(data_dir, wait_for_stdin=False)
    second = _user(data_dir, wait_for_stdin=True)
    server = _postmaster_pid(data_dir)
    assert server is not None
    assert sorted(h.pid for h in embedded.handle_records(data_dir)) == sorted(
        [first.pid, second.pid]
    )

    first.kill()  # kill -9: no atexit, its pid stays in the handle list
    first.wait(timeout=10)
    assert [h.alive for h in embedded.handle_records(data_dir) if h.pid == first.pid] == [False]

    assert second.stdin is not None
    second.stdin.write("\n")
    second.stdin.flush()
    assert second.wait(timeout=START_S) == 0
    # The last live user's exit stopped the server and left an empty list.
    deadline = time.monotonic() + 20
    while _postmaster_pid(data_dir) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _postmaster_pid(data_dir) is None
    assert embedded.handle_records(data_dir) == []


#: A child that starts (or joins) the server of a data directory and exits, taking every
#: file lock without waiting: a lock another process holds ends it at once (exit 3,
#: naming the lock) instead of making it wait. It prints the locks it took.
_NEVER_WAITS = """
import os, sys
import fasteners

taken = []
acquire = fasteners.InterProcessLock.acquire

def at_once(self, *args, **kwargs):
    if not acquire(self, blocking=False):
        print("would wait on", self.path, file=sys.stderr, flush=True)
        os._exit(3)
    taken.append(os.fsdecode(self.path))
    return True

fasteners.InterProcessLock.acquire = at_once
from parrot_parents.embedded.server import embedded_dsn
embedded_dsn(sys.argv[1])
print("\\n".join(taken), flush=True)
"""


def test_two_data_directories_never_wait_on_each_other(data_dir: Path) -> None:
    import fasteners
    import pgserver

    other = data_dir.parent / "other"
    other.mkdir()
    # As if another process were busy starting or stopping the server of ``other``: hold
    # its lock, and pgserver's own machine-wide lock too. The child never waits for a
    # lock (it fails instead), so what is checked is which locks it takes, not how long
    # it took: a loaded machine makes it slower, never wrong.
    held = [
        fasteners.InterProcessLock(str(embedded.lock_path(other))),
        fasteners.InterProcessLock(str(pgserver.PostgresServer.lock_path)),
    ]
    for lock in held:
        assert lock.acquire(timeout=10)
    try:
        assert embedded.lock_path(other) != embedded.lock_path(data_dir)
        proc = _never_waits(data_dir)
    finally:
        for lock in held:
            lock.release()
    assert proc.returncode == 0, proc.stderr[-2000:]
    taken = {Path(p).resolve() for p in proc.stdout.splitlines() if p}
    assert Path(embedded.lock_path(data_dir)).resolve() in taken  # its own lock, taken
    assert Path(embedded.lock_path(other)).resolve() not in taken
    assert Path(pgserver.PostgresServer.lock_path).resolve() not in taken
    assert _postmaster_pid(data_dir) is None  # that process was the last user: stopped
    # The check is not vacuous: a lock the child needs, held elsewhere, fails it at once.
    own = fasteners.InterProcessLock(str(embedded.lock_path(data_dir)))
    assert own.acquire(timeout=10)
    try:
        proc = _never_waits(data_dir)
    finally:
        own.release()
    assert proc.returncode == 3 and "would wait on" in proc.stderr, proc.stderr[-2000:]


def _never_waits(data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _NEVER_WAITS, str(data)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=START_S * 5,  # only against a hang: no lock is ever waited for
    )


async def _search_backend(dsn: str, table: str) -> int:
    """The pid of the backend whose statement waits for a lock on ``table``."""
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            pid = await conn.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND position($1 in query) > 0 AND pid <> pg_backend_pid()",
                table,
            )
            if pid is not None:
                return int(pid)
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    raise AssertionError("the search never waited on the lock")


async def test_a_backend_killed_during_a_search_then_the_next_search_succeeds(
    data_dir: Path, embeddings
) -> None:
    server = embedded.get_server(data_dir, cleanup_mode="delete")
    try:
        dsn = server.get_uri()
        table = unique_table("crash")
        store = PgVectorStore(dsn=dsn, table=table, embedding=embeddings)
        await store.add_documents(
            [Document(page_content=f"pump maintenance step {i}") for i in range(12)]
        )
        query = await embeddings.aembed_query("pump maintenance")
        assert len(await store.similarity_search_by_vector(query, limit=3)) == 3

        # Hold the table so that the next search waits inside its backend, then kill -9
        # that backend: PostgreSQL ends every connection and replays its log.
        holder = await asyncpg.connect(dsn)
        tx = holder.transaction()
        await tx.start()
        await holder.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
        search = asyncio.create_task(store.similarity_search_by_vector(query, limit=3))
        backend = await _search_backend(dsn, table)
        os.kill(backend, signal.SIGKILL)

        try:
            hits = await search
            assert len(hits) == 3  # it waited for the restart and went on
        except StoreError as exc:
            assert exc.unavailable
            assert "DBAPIError" not in str(exc)
            assert "crash" in str(exc) or "cut" in str(exc), str(exc)
        holder.terminate()

        # The next search waits for the recovery instead of failing.
        hits = await store.similarity_search_by_vector(query, limit=3)
        assert len(hits) == 3
        assert "pump maintenance" in hits[0].page_content
        log = (data_dir / "log").read_text(errors="replace")
        assert "was terminated by signal 9" in log
        await store.drop()
        await store.close()
    finally:
        embedded.release(data_dir)


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (
            asyncpg.exceptions.CannotConnectNowError("the database system is in recovery mode"),
            "recovering from a crash",
        ),
        (
            asyncpg.exceptions.CrashShutdownError(
                "terminating connection because of crash of another server process"
            ),
            "a server process crashed",
        ),
        (
            asyncpg.exceptions.ConnectionDoesNotExistError(
                "connection was closed in the middle of operation"
            ),
            "crashed or was terminated",
        ),
    ],
)
def test_an_outage_names_itself_and_quotes_the_server(error: Exception, words: str) -> None:
    exc = store_error(error, "search in public.docs")
    assert exc.unavailable
    text = str(exc)
    assert words in text
    assert str(error) in text  # the server's (or driver's) own words
    assert type(error).__name__ in text
    if getattr(error, "sqlstate", None):
        assert f"SQLSTATE {error.sqlstate}" in text  # type: ignore[attr-defined]


def test_a_recovering_server_is_waited_for_at_start(data_dir: Path) -> None:
    """A process that finds the postmaster running but not ready waits for it."""
    server = embedded.get_server(data_dir, cleanup_mode="delete")
    try:
        pid_file = data_dir / "postmaster.pid"
        lines = pid_file.read_text().splitlines()
        # The postmaster rewrites this line itself; "starting" is what it says in recovery.
        status = lines[7]
        pid_file.write_text("\n".join([*lines[:7], "starting", *lines[8:]]) + "\n")

        def ready_again() -> None:
            time.sleep(1.5)
            pid_file.write_text("\n".join([*lines[:7], status, *lines[8:]]) + "\n")

        import threading

        threading.Thread(target=ready_again).start()
        started = time.monotonic()
        server.ensure_postgres_running()
        assert time.monotonic() - started >= 1.0
    finally:
        embedded.release(data_dir)


def _wait_stopped(data: Path, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while _postmaster_pid(data) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _postmaster_pid(data) is None, "the server still runs with no live user"


def test_the_last_user_stops_a_server_another_process_restarted(data_dir: Path) -> None:
    first = _user(data_dir, wait_for_stdin=True)
    old = _postmaster_pid(data_dir)
    assert old is not None
    os.kill(old, signal.SIGINT)  # a fast shutdown, as an administrator would
    psutil.wait_procs([psutil.Process(old)], timeout=30)
    # Another process starts the server again and leaves; the first is its last user.
    again = _user(data_dir, wait_for_stdin=True)
    assert _postmaster_pid(data_dir) not in (None, old)
    for proc in (again, first):
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(timeout=START_S) == 0
    _wait_stopped(data_dir)


def test_the_last_user_leaving_during_crash_recovery_stops_the_server_promptly(
    data_dir: Path,
) -> None:
    code = textwrap.dedent(
        f"""
        import asyncio, os, signal, asyncpg
        from parrot_parents.embedded.server import embedded_dsn

        async def main():
            dsn = embedded_dsn({str(data_dir)!r})
            victim = await asyncpg.connect(dsn)
            os.kill(await victim.fetchval("SELECT pg_backend_pid()"), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    assert "does not shut down" not in done.stderr
    assert took < 40, took  # pg_ctl's own 60 s wait, then a kill, before the fix
    _wait_stopped(data_dir, 10)


def test_a_terminated_cli_command_stops_the_server(data_dir: Path) -> None:
    env = {**os.environ, "PARROT_PARENTS_DATA_DIR": str(data_dir)}
    env.pop("PARROT_PARENTS_DSN", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "parrot_parents",
            "ingest",
            str(REPO_ROOT / "examples" / "corpus"),
            "--collection",
            "terminated",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + START_S
    while _postmaster_pid(data_dir) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _postmaster_pid(data_dir) is not None
    proc.send_signal(signal.SIGTERM)  # what `timeout`, systemd and `docker stop` send
    proc.wait(timeout=START_S)
    _wait_stopped(data_dir)
    assert embedded.handle_records(data_dir) == []


def test_a_broken_handle_list_does_not_stop_the_server_from_starting(data_dir: Path) -> None:
    embedded.get_server(data_dir, cleanup_mode=None)
    embedded.release(data_dir)  # cleanup_mode None: the server runs on
    (data_dir / embedded.HANDLES_FILE).write_text("")  # cut by a crash or a full disk
    with pytest.raises(ValueError, match="not a list of pids"):
        embedded.handle_records(data_dir)
    done = _start_and_leave(data_dir)
    assert done.returncode == 0, done.stderr[-2000:]
    assert embedded.handle_records(data_dir) == []
    _wait_stopped(data_dir)


def test_a_data_directory_with_a_space_in_its_path_starts(data_dir: Path) -> None:
    spaced = data_dir.parent / "Application Support" / "pgdata"
    spaced.parent.mkdir()
    try:
        server = embedded.get_server(spaced, cleanup_mode="delete")
        assert server.get_uri().startswith("postgresql://")
    finally:
        embedded.release(spaced)


def test_a_data_directory_left_by_a_killed_initdb_is_set_aside(data_dir: Path) -> None:
    data_dir.mkdir()
    (data_dir / "PG_VERSION").write_text("18\n")  # what initdb writes before pg_control
    (data_dir / "base").mkdir()
    try:
        server = embedded.get_server(data_dir, cleanup_mode="delete")
        assert server.get_uri()
        assert (data_dir / "global" / "pg_control").exists()
        assert list(data_dir.parent.glob("data.incomplete-*"))
    finally:
        embedded.release(data_dir)


def test_the_last_user_stops_the_server_quietly(data_dir: Path) -> None:
    # One stop, said nowhere: a second stop of the stopped server printed pgserver's
    # failed pg_ctl and "killing it instead" on every CLI command's exit.
    left = _start_and_leave(data_dir)
    assert left.returncode == 0, left.stderr
    assert "Failed" not in left.stderr and "killing" not in left.stderr, left.stderr
    _wait_stopped(data_dir)


async def _shared_buffers_mb(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        blocks, unit = await conn.fetchrow(
            "SELECT setting::bigint, unit FROM pg_settings WHERE name = 'shared_buffers'"
        )
    finally:
        await conn.close()
    assert unit == "8kB"
    return int(blocks * 8 // 1024)


async def _setting(dsn: str, name: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        return str(await conn.fetchval("SELECT current_setting($1)", name))
    finally:
        await conn.close()


def test_the_server_is_sized_for_the_machine_and_alter_system_still_wins(data_dir: Path) -> None:
    from parrot_parents.embedded.settings import (
        SETTINGS_FILE,
        machine_memory,
        shared_buffers_mb,
    )

    try:
        dsn = embedded.get_server(data_dir, cleanup_mode="stop").get_uri()
        # initdb's 128 MB is what the server had before; this machine's is larger.
        assert asyncio.run(_shared_buffers_mb(dsn)) == shared_buffers_mb(machine_memory())
        assert (data_dir / SETTINGS_FILE).exists()
        if int((data_dir / "PG_VERSION").read_text()) >= 18:
            assert asyncio.run(_setting(dsn, "io_method")) == "sync"

        async def alter() -> None:
            conn = await asyncpg.connect(dsn)
            try:
                await conn.execute("ALTER SYSTEM SET shared_buffers = '200MB'")
            finally:
                await conn.close()

        asyncio.run(alter())
        embedded.release(data_dir)
        _wait_stopped(data_dir)
        dsn = embedded.get_server(data_dir, cleanup_mode="stop").get_uri()
        assert asyncio.run(_shared_buffers_mb(dsn)) == 200
        conf = (data_dir / "postgresql.conf").read_text()
        assert conf.count(f"include_if_exists '{SETTINGS_FILE}'") == 1
    finally:
        embedded.release(data_dir)
