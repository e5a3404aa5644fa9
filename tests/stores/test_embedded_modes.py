"""The embedded server changes the mode of no directory it did not make.

Run by root (as here and in CI) the server is a system user; the package must place what
that user needs, not open the user's directories to all (see
:mod:`parrot_parents.embedded.system_user`). Run by another user the same must hold."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from parrot_parents.embedded import server as embedded
from parrot_parents.embedded import system_user
from parrot_parents.errors import StoreError
from tests.conftest import REPO_ROOT

ROOT = system_user.runs_as_root()
only_root = pytest.mark.skipif(not ROOT, reason="the system user is root's alone")


@pytest.fixture
def closed() -> Iterator[Path]:
    """A private temporary directory (0700), as a user's HOME and its parent are."""
    path = Path(tempfile.mkdtemp(prefix="parrot-parents-closed-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def system_base(server_dir: Path) -> Path:
    """Where root's server keeps its state in the test, instead of /var/lib."""
    return server_dir / "parrot-parents"


def _modes(paths: list[Path]) -> dict[Path, int]:
    return {p: stat.S_IMODE(p.stat().st_mode) for p in paths}


def _open_to_all(top: Path) -> list[str]:
    """The directories under ``top`` that any user may write."""
    return [
        f"{d} {stat.S_IMODE(d.stat().st_mode):04o}"
        for d in [top, *top.rglob("*")]
        if d.is_dir() and not d.is_symlink() and d.stat().st_mode & 0o002
    ]


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def test_the_default_server_leaves_home_and_its_parents_as_they_were(
    closed: Path, server_dir: Path, system_base: Path
) -> None:
    """The default data directory, then one whose path is too long for a socket in it
    (which then gets a socket directory of its own): both answer, and HOME, the runtime
    directory and their parents keep their modes; nothing of the user's is 0777."""
    home = closed / ("h" * 60)  # long: the socket cannot go in a data directory below it
    runtime = closed / "run"
    home.mkdir(mode=0o700)
    runtime.mkdir(mode=0o700)
    long_data = server_dir / ("d" * 80) / "pgdata"
    watched = [*reversed(closed.parents), closed, home, runtime]
    before = _modes(watched)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (embedded.DATA_DIR_ENV, embedded.DSN_ENV, "XDG_DATA_HOME")
    }
    env.update(HOME=str(home), XDG_RUNTIME_DIR=str(runtime), PYTHONPATH=str(REPO_ROOT))
    script = textwrap.dedent(
        f"""
        import asyncio
        from pathlib import Path

        import asyncpg

        from parrot_parents.embedded import server as embedded
        from parrot_parents.embedded import system_user

        system_user.SYSTEM_BASE = Path({str(system_base)!r})

        async def select_one(data):
            conn = await asyncpg.connect(embedded.embedded_dsn(data))
            try:
                print(await conn.fetchval("SELECT 1"))
            finally:
                await conn.close()

        asyncio.run(select_one(None))
        print(embedded.get_server().pgdata)
        asyncio.run(select_one({str(long_data)!r}))
        print(embedded.get_server({str(long_data)!r}).get_postmaster_info().socket_dir)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,  # a directory the server's user cannot enter
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answer, pgdata, answer_long, socket_dir = done.stdout.split()
    assert answer == answer_long == "1"
    assert _modes(watched) == before
    assert _open_to_all(closed) == []
    assert _open_to_all(server_dir) == []
    if ROOT:
        assert Path(pgdata) == system_base / "pgdata"
        assert stat.S_IMODE(system_base.stat().st_mode) == 0o711
        assert Path(socket_dir).parent == system_base / "run"
        assert stat.S_IMODE(Path(socket_dir).stat().st_mode) == 0o700


@only_root
def test_a_data_directory_the_server_user_cannot_enter_is_refused_and_left_closed(
    closed: Path,
) -> None:
    data = closed / "a" / "pgdata"
    with pytest.raises(StoreError) as caught:
        embedded.get_server(data)
    assert f"cannot enter {str(closed)!r} (mode 0700)" in str(caught.value)
    assert "unset PARROT_PARENTS_DATA_DIR" in (caught.value.hint or "")
    assert stat.S_IMODE(closed.stat().st_mode) == 0o700
    assert not (closed / "a").exists()


@only_root
def test_binaries_the_server_user_cannot_reach_are_copied_not_opened(
    closed: Path, system_base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pgserver import _commands

    monkeypatch.setattr(system_user, "SYSTEM_BASE", system_base)
    installed = Path(_commands.__file__).parent / "pginstall"
    assert system_user.reachable_install(installed) == installed  # readable where pip put it
    # The wheel's layout in a virtual environment the system user cannot enter: the
    # binaries load the bundled libraries beside the package through a relative RPATH.
    site = closed / "venv" / "site-packages"
    hidden = site / "pgserver" / "pginstall"
    shutil.copytree(installed, hidden, symlinks=True, copy_function=_link_or_copy)
    for libraries in installed.parent.parent.glob("pgserver*.libs"):
        shutil.copytree(libraries, site / libraries.name, copy_function=_link_or_copy)
    copy = system_user.reachable_install(hidden)
    assert copy.is_relative_to(system_base)
    assert stat.S_IMODE(closed.stat().st_mode) == 0o700
    for program in ("postgres", "initdb", "pg_ctl"):  # initdb and pg_ctl load libpq
        done = subprocess.run(
            [str(copy / "bin" / program), "--version"],
            capture_output=True,
            text=True,
            user=system_user.SYSTEM_USER,
            check=True,
        )
        assert "PostgreSQL" in done.stdout
    assert system_user.reachable_install(hidden) == copy  # made once
