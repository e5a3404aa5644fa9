"""``parrot-parents migrate``: apply the alembic migrations shipped with the package."""

from __future__ import annotations

import argparse
import asyncio

from parrot_parents.cli.common import add_dsn_option

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "migrate",
        help="create or upgrade the database schema (bots table, collections)",
        description="Upgrade to the latest revision (default), or --downgrade. "
        "--collection NAME also creates that collection's table and indexes.",
    )
    add_dsn_option(p)
    p.add_argument(
        "--collection",
        action="append",
        default=[],
        metavar="NAME",
        help="collection table to create (or, with --downgrade to base, drop); repeatable",
    )
    p.add_argument(
        "--dimension", type=int, default=384, help="embedding length of new collections (384)"
    )
    p.add_argument("--revision", default="head", help="revision to upgrade to (default: head)")
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--downgrade", metavar="REV", help="downgrade to REV instead ('-1', 'base', '0002')"
    )
    group.add_argument("--current", action="store_true", help="print the current revision")
    group.add_argument("--history", action="store_true", help="list the shipped revisions")
    p.set_defaults(func=run)


def _where(dsn: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(dsn).render_as_string(hide_password=True)


async def run(args: argparse.Namespace) -> int:
    from parrot_parents import migrations
    from parrot_parents.embedded.server import resolve_dsn

    if args.history:
        for rev in migrations.history():
            print(f"{rev['revision']}  {rev['doc']}")
        return 0
    dsn = await asyncio.to_thread(resolve_dsn, args.dsn)
    before = await asyncio.to_thread(migrations.current, dsn)
    if args.current:
        print(before or "none (not migrated)")
        return 0
    if args.downgrade:
        await asyncio.to_thread(
            migrations.downgrade, dsn, args.downgrade, collections=args.collection
        )
        after = await asyncio.to_thread(migrations.current, dsn)
        print(f"downgraded {_where(dsn)} from {before} to {after or 'base'}")
        return 0
    created = await asyncio.to_thread(
        migrations.upgrade,
        dsn,
        args.revision,
        collections=args.collection,
        dimension=args.dimension,
    )
    after = await asyncio.to_thread(migrations.current, dsn)
    change = "already at" if before == after else f"upgraded from {before or 'none'} to"
    print(f"{_where(dsn)}: {change} {after}")
    for name in created:
        print(f"created collection {name!r} (vector({args.dimension}))")
    return 0
