"""``parrot-parents backfill --collection C``: add hierarchy markers to legacy rows in place."""

from __future__ import annotations

import argparse
import sys

from parrot_parents.cli.common import add_dsn_option

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "backfill",
        help="add is_chunk markers to a legacy collection, in committed batches (resumable)",
        description="Rewrites each row's markers as a re-ingest would, batch by batch; each "
        "batch is its own short transaction, so queries keep running. Interrupted runs "
        "resume where they stopped.",
    )
    p.add_argument("--collection", required=True, help="collection (table) name")
    add_dsn_option(p)
    p.add_argument("--schema", default="public", help="schema of the collection (public)")
    p.add_argument("--batch-size", type=int, default=1000, help="rows per transaction (1000)")
    p.add_argument("--max-batches", type=int, default=None, help="stop after N batches (resumable)")
    p.add_argument("--pause-ms", type=int, default=0, help="sleep between batches, in ms (0)")
    p.add_argument("--restart", action="store_true", help="ignore an unfinished pass; start over")
    p.add_argument("--quiet", action="store_true", help="no per-batch progress on stderr")
    p.set_defaults(func=run)


async def run(args: argparse.Namespace) -> int:
    from parrot_parents.stores.postgres.collections.backfill import BackfillReport, backfill_markers

    def progress(r: BackfillReport) -> None:
        if not args.quiet:
            print(
                f"batch {r.batches}: {r.scanned} row(s) scanned, {r.updated} updated "
                f"(last id {r.last_id!r})",
                file=sys.stderr,
            )

    report = await backfill_markers(
        args.collection,
        dsn=args.dsn,
        schema=args.schema,
        batch_size=args.batch_size,
        restart=args.restart,
        max_batches=args.max_batches,
        pause_s=max(0, args.pause_ms) / 1000.0,
        on_batch=progress,
    )
    resumed = "" if report.resumed_from is None else f" (resumed after {report.resumed_from!r})"
    state = (
        "finished"
        if report.finished
        else f"stopped after id {report.last_id!r}; run again to resume"
    )
    print(
        f"backfill of {args.schema}.{args.collection}{resumed}: {report.scanned} row(s) scanned, "
        f"{report.updated} updated, {report.batches} batch(es) in this pass; {state}"
    )
    return 0
