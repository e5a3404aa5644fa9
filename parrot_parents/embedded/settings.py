"""The settings the product gives its embedded PostgreSQL server.

``shared_buffers`` is an eighth of the machine's memory, between 128 MB and 4 GB
(:func:`shared_buffers_mb`), not initdb's 128 MB: searches that read many rows (BM25 in
SQL, exact ranking under a filter) pay for every page read from outside it. An eighth, not
PostgreSQL's suggested quarter, as the server shares the machine with the application and
its model (measured: docs/performance.md, the ``shared_buffers`` comparison). The settings
are written to :data:`SETTINGS_FILE`, which ``postgresql.conf`` includes, for the next
start; ``ALTER SYSTEM`` overrides them.

``io_method`` is ``sync`` on PostgreSQL 18 and newer (where the setting exists; its default,
``worker``, hands each read to an I/O worker process): on 2 shared cores the bitmap heap
scan of BM25 in SQL over fresh queries at 1M children took 24 to 28 ms with ``worker`` and
12 to 16 ms with ``sync``, the same statements against the same warm operating-system
cache (docs/performance.md, "BM25 in SQL at a million children").
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "MAX_SHARED_BUFFERS_MB",
    "MIN_SHARED_BUFFERS_MB",
    "SETTINGS_FILE",
    "machine_memory",
    "settings_text",
    "shared_buffers_mb",
    "write_settings",
]

#: The file of the product's settings, in the data directory.
SETTINGS_FILE = "parrot_parents.conf"
#: Bounds of the embedded server's ``shared_buffers``, in MB (initdb's default, and 4 GB).
MIN_SHARED_BUFFERS_MB = 128
MAX_SHARED_BUFFERS_MB = 4096

_INCLUDE = f"include_if_exists '{SETTINGS_FILE}'"
#: Where a container's memory limit is (cgroup v2, then v1).
_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)


def shared_buffers_mb(memory_bytes: int) -> int:
    """``shared_buffers`` for a machine with ``memory_bytes`` of memory: an eighth of
    it, in MB, clamped to :data:`MIN_SHARED_BUFFERS_MB`..:data:`MAX_SHARED_BUFFERS_MB`."""
    eighth = max(memory_bytes, 0) // 8 // 2**20
    return max(MIN_SHARED_BUFFERS_MB, min(MAX_SHARED_BUFFERS_MB, eighth))


def machine_memory() -> int:
    """The memory this process may use, in bytes: the machine's, or a container's
    cgroup limit when that is lower."""
    import psutil

    total = int(psutil.virtual_memory().total)
    for path in _CGROUP_LIMITS:
        try:
            limit = path.read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            total = min(total, int(limit))
    return total


def settings_text(memory_bytes: int, major: int | None = None) -> str:
    """The contents of :data:`SETTINGS_FILE` for a machine with ``memory_bytes`` and a
    server of major version ``major`` (None: unknown, no version-dependent setting)."""
    io = "io_method = 'sync'\n" if major is not None and major >= 18 else ""
    return (
        "# Written by parrot-parents at each start of its embedded server; edits are\n"
        "# overwritten. ALTER SYSTEM (postgresql.auto.conf) overrides these settings.\n"
        f"shared_buffers = '{shared_buffers_mb(memory_bytes)}MB'\n{io}"
    )


def _major(pgdata: Path) -> int | None:
    """The major version of the data directory (its ``PG_VERSION`` file), if readable."""
    try:
        return int((pgdata / "PG_VERSION").read_text().strip())
    except (OSError, ValueError):
        return None


def write_settings(pgdata: Path, memory_bytes: int | None = None) -> bool:
    """Write :data:`SETTINGS_FILE` into the data directory ``pgdata`` and include it
    from its ``postgresql.conf`` (once); call before the server starts. Returns whether
    anything changed. ``memory_bytes``: None reads :func:`machine_memory`.

    Raises:
        OSError: the data directory cannot be written.
    """
    memory = machine_memory() if memory_bytes is None else memory_bytes
    wanted = settings_text(memory, _major(pgdata))
    changed = False
    target = pgdata / SETTINGS_FILE
    if not target.exists() or target.read_text() != wanted:
        temporary = target.with_name(f".{SETTINGS_FILE}.{os.getpid()}")
        temporary.write_text(wanted)
        temporary.chmod(0o644)  # the server may run as another user (pgserver, under root)
        os.replace(temporary, target)
        changed = True
    conf = pgdata / "postgresql.conf"
    lines = conf.read_text().splitlines()
    if _INCLUDE not in (line.strip() for line in lines):
        with conf.open("a") as out:
            out.write(f"\n# The settings parrot-parents chooses for this server.\n{_INCLUDE}\n")
        changed = True
    return changed
