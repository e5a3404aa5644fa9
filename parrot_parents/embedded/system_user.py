"""The embedded server run by root: PostgreSQL as a system user, no directory loosened.

pgserver runs PostgreSQL as the system user ``pgserver`` and, to let it reach the data
directory, socket and binaries, opens every directory above them up to ``/`` and makes a
0777 socket directory: for a root under ``/root``, that opens ``/root`` to every local
account and lets any of them connect as the superuser (``trust``). Instead, no directory
the package did not create changes mode:

* **data**: :data:`SYSTEM_BASE` (``/var/lib/parrot-parents``, made 0711) holds
  ``pgdata`` (0700, the system user's); a ``$PARROT_PARENTS_DATA_DIR`` whose parents the
  system user cannot enter is refused, naming the fix;
* **socket**: in the data directory, or ``SYSTEM_BASE/run/<hash>`` (0700) when that path
  is too long for ``AF_UNIX`` or holds a space;
* **binaries**: where pip put them when readable, else copied once to
  ``SYSTEM_BASE/pgserver-<hash>`` with the wheel's libraries.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from parrot_parents.errors import StoreError

__all__ = [
    "SYSTEM_BASE",
    "SYSTEM_USER",
    "install_in_pgserver",
    "make_dirs",
    "prepare_binaries",
    "reachable_install",
    "require_reachable",
    "root_data_dir",
    "runs_as_root",
    "socket_dir",
]

#: The package's directory for root's embedded server (created by the package, 0711).
SYSTEM_BASE = Path("/var/lib/parrot-parents")
#: The system user pgserver runs PostgreSQL as when the caller is root.
SYSTEM_USER = "pgserver"
#: Mode of the directories the package creates for root: the system user may enter them.
_DIR_MODE = 0o711
#: The longest socket path ``AF_UNIX`` takes on Linux and macOS, less a margin.
_MAX_SOCKET_PATH = 100


def runs_as_root() -> bool:
    """True when this process is root (pgserver then runs PostgreSQL as :data:`SYSTEM_USER`)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def root_data_dir() -> Path:
    """Root's default data directory, ``SYSTEM_BASE/pgdata``."""
    return SYSTEM_BASE / "pgdata"


def make_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents. As root the directories made here get
    mode 0711 whatever the umask, so that the system user can enter them; no directory
    that already exists is changed."""
    missing = []
    for p in (path, *path.parents):
        if p.exists():
            break
        missing.append(p)
    for p in reversed(missing):
        p.mkdir(exist_ok=True)
        if runs_as_root():
            p.chmod(_DIR_MODE)


def _user() -> tuple[int, set[int]]:
    """The system user's uid and groups, creating the user the way pgserver does."""
    import pwd
    import warnings

    with warnings.catch_warnings():  # pgserver asks for a runtime directory at import
        warnings.simplefilter("ignore")
        from pgserver.utils import ensure_user_exists

    ensure_user_exists(SYSTEM_USER)
    entry = pwd.getpwnam(SYSTEM_USER)
    return entry.pw_uid, set(os.getgrouplist(SYSTEM_USER, entry.pw_gid))


def _may(path: Path, uid: int, gids: set[int], bits: int) -> bool:
    """Whether ``uid`` has the permission ``bits`` (4 r, 2 w, 1 x) on ``path``."""
    st = path.stat()
    if st.st_uid == uid:
        mode = st.st_mode >> 6
    elif st.st_gid in gids:
        mode = st.st_mode >> 3
    else:
        mode = st.st_mode
    return mode & bits == bits


def _blocking_parent(path: Path, uid: int, gids: set[int]) -> Path | None:
    """The first directory above ``path`` that ``uid`` cannot enter, or None (those
    not made yet are not in the way: :func:`make_dirs` makes them enterable)."""
    for parent in reversed(path.parents):
        if parent.exists() and not _may(parent, uid, gids, 1):
            return parent
    return None


def require_reachable(path: Path) -> None:
    """Refuse a ``path`` the system user cannot reach, naming the directory in the way;
    it replaces pgserver's function of the same use, which opened every parent to all.

    Raises:
        StoreError: a parent of ``path`` is closed to the system user.
    """
    uid, gids = _user()
    blocking = _blocking_parent(Path(path), uid, gids)
    if blocking is None:
        return
    mode = blocking.stat().st_mode & 0o777
    raise StoreError(
        f"the embedded PostgreSQL runs as the system user {SYSTEM_USER!r} when started by "
        f"root, and that user cannot enter {str(blocking)!r} (mode {mode:04o}) to reach "
        f"{str(path)!r}; the package does not open directories it did not create",
        hint=f"unset PARROT_PARENTS_DATA_DIR to use {str(root_data_dir())!r}, or choose a "
        "data directory whose parents all users may enter, such as one under /var/lib or /srv",
    )


def _tree_readable(root: Path, uid: int, gids: set[int]) -> bool:
    """Whether ``uid`` reaches ``root`` and reads (and runs) everything in it."""
    if _blocking_parent(root, uid, gids) is not None:
        return False
    for top, dirs, files in os.walk(root):
        for name in dirs:
            if not _may(Path(top, name), uid, gids, 5):
                return False
        for name in files:
            p = Path(top, name)
            if p.is_symlink():
                continue
            runs = p.stat().st_mode & 0o100
            if not _may(p, uid, gids, 5 if runs else 4):
                return False
    return _may(root, uid, gids, 5)


def _open_copy(root: Path) -> None:
    """Give all read (and, where the owner may, run/enter) rights on a tree the package
    copied."""
    for top, dirs, files in os.walk(root):
        for name in dirs:
            Path(top, name).chmod(0o755)
        for name in files:
            p = Path(top, name)
            if not p.is_symlink():
                p.chmod(0o755 if p.stat().st_mode & 0o100 else 0o644)
    root.chmod(0o755)


def _bundled_libraries(install: Path) -> list[Path]:
    """The wheel's bundled shared libraries (auditwheel's ``<dist>.libs`` beside the
    ``pgserver`` package), which the binaries load through the RPATH
    ``$ORIGIN/../../../<dist>.libs``."""
    return sorted(install.parent.parent.glob("pgserver*.libs"))


def reachable_install(install: Path) -> Path:
    """``install`` (pgserver's ``pginstall``) when the system user can use it there,
    else its copy under :data:`SYSTEM_BASE`, made once per install.

    The copy keeps the wheel's layout, ``pgserver/pginstall`` beside the bundled
    libraries' directory, so that the binaries' relative RPATH finds those libraries.
    """
    uid, gids = _user()
    libraries = _bundled_libraries(install)
    if all(_tree_readable(tree, uid, gids) for tree in (install, *libraries)):
        return install
    postgres = install / "bin" / "postgres"
    key = f"{install.resolve()}:{postgres.stat().st_mtime_ns}:{postgres.stat().st_size}"
    copy = SYSTEM_BASE / f"pgserver-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    inside = Path(install.parent.name, install.name)
    if copy.is_dir():
        return copy / inside
    make_dirs(SYSTEM_BASE)
    staging = Path(tempfile.mkdtemp(prefix=".pgserver-", dir=SYSTEM_BASE))
    try:
        shutil.copytree(install, staging / "tree" / inside, symlinks=True)
        for tree in libraries:
            shutil.copytree(tree, staging / "tree" / tree.name, symlinks=True)
        _open_copy(staging / "tree")
        try:
            (staging / "tree").rename(copy)  # atomic: a process racing this one wins
        except OSError:
            if not copy.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return copy / inside


def socket_dir(pgdata: Path) -> Path:
    """Root's socket directory for ``pgdata``: the data directory itself when its path
    is short enough and has no space (pgserver splits its socket option on spaces), else
    ``SYSTEM_BASE/run/<hash>``, owned by the system user, mode 0700."""
    if " " not in str(pgdata) and len(str(pgdata / ".s.PGSQL.5432")) <= _MAX_SOCKET_PATH:
        return pgdata
    uid, _ = _user()
    digest = hashlib.sha256(str(pgdata).encode()).hexdigest()[:10]
    path = SYSTEM_BASE / "run" / digest
    make_dirs(path.parent)
    path.mkdir(mode=0o700, exist_ok=True)
    os.chown(path, uid, -1)
    path.chmod(0o700)
    return _KeptMode(path)


class _KeptMode(type(Path())):  # type: ignore[misc]  # the platform's concrete Path
    """A socket directory whose mode pgserver must not change: it makes a socket directory
    other than the data directory 0777 for its system user, which owns this one already."""

    def chmod(self, mode: int, *, follow_symlinks: bool = True) -> None:
        return None


def prepare_binaries() -> None:
    """Point pgserver's commands at binaries the system user can run (see the module
    docstring). Call as root before pgserver's ``ensure_pgdata_inited``."""
    from pgserver import _commands, postgres_server

    install = Path(_commands.__file__).parent / "pginstall"
    bin_path = reachable_install(install) / "bin"
    _commands.POSTGRES_BIN_PATH = bin_path
    setattr(postgres_server, "POSTGRES_BIN_PATH", bin_path)  # noqa: B010


def install_in_pgserver() -> None:
    """Replace pgserver's functions that open directories to all with ones that check
    (:func:`require_reachable`) or that have nothing left to do."""
    from pgserver import postgres_server

    module: Any = postgres_server
    module.ensure_prefix_permissions = require_reachable
    # pgserver's recursive chmod of its install: the install used was checked readable, or
    # copied readable, by prepare_binaries.
    module.ensure_folder_permissions = lambda path, flag: None
