"""``parrot-parents bots list|show|add|set|remove``: manage bot rows without SQL.

Every write goes through :class:`~parrot_parents.bots.repository.BotRepository`, which
validates exactly as the HTTP API does; a bad value is refused with a message naming the
bot and the key.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from parrot_parents.cli.collections import format_table
from parrot_parents.cli.common import (
    TRAILING,
    add_dsn_option,
    add_retrieval_options,
    print_json,
)

__all__ = ["register"]


def _json_arg(text: str) -> Any:
    if text.lower() in ("none", "null"):
        return None
    from parrot_parents.strict_json import InvalidJSON, loads_strict

    try:
        return loads_strict(text)
    except InvalidJSON as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None


_SCOPE_HELP = (
    "a metadata filter (JSON, the --filter language) every search of the bot holds to; "
    "a call's filter narrows it, never widens it; none removes it"
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = subparsers.add_parser("bots", help="list, add, change and remove bot rows")
    sub = group.add_subparsers(dest="bots_command", required=True)
    # Every subcommand takes --dsn; the two writes that name a collection take --force.
    dsn = argparse.ArgumentParser(add_help=False)
    add_dsn_option(dsn)
    force = argparse.ArgumentParser(add_help=False, parents=[dsn])
    force.add_argument(
        "--force",
        action="store_true",
        help="accept a collection that does not exist yet (the bot loads once it does)",
    )

    p = sub.add_parser("list", parents=[dsn], help="list the bot rows (invalid ones are flagged)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_list)

    p = sub.add_parser("show", parents=[dsn], help="print one bot row as JSON")
    p.add_argument("name")
    p.set_defaults(func=run_show)

    p = sub.add_parser("add", parents=[force], help="create a bot row")
    p.add_argument("name")
    p.add_argument("--collection", required=True, help="collection (table) the bot searches")
    p.add_argument("--description", default="", help="free text")
    # A row holds every option but the per-call filter; two flags are spelled as its columns.
    add_retrieval_options(
        p,
        flags={"expand_to_parent": "--expand-to-parent", "mode": "--expansion-mode"},
        exclude=("filter",),
    )
    p.add_argument(
        "--reranker-config",
        type=_json_arg,
        default=None,
        help='JSON, e.g. \'{"type": "cross_encoder", "model": "/models/ms-marco"}\'',
    )
    p.add_argument(
        "--parent-searcher-config",
        type=_json_arg,
        default={"type": "in_table"},
        help='JSON (default: \'{"type": "in_table"}\'), or none',
    )
    p.add_argument("--scope", type=_json_arg, default=None, help=_SCOPE_HELP)
    p.add_argument("--disabled", action="store_true", help="create it disabled")
    p.set_defaults(func=run_add)

    p = sub.add_parser(
        "set",
        parents=[force],
        help="change settings: key=value ...",
        description="Values are JSON (true, 5, null, {...}); text keys (description, "
        "collection, expansion_mode, name) take the text as is. A dotted key such as "
        "reranker_config.batch_size=16 changes one key of a JSON config.",
    )
    p.add_argument("name")
    p.add_argument("assignments", nargs="*", metavar="key=value")
    p.add_argument("--scope", type=_json_arg, default=argparse.SUPPRESS, help=_SCOPE_HELP)
    p.set_defaults(func=run_set, **{TRAILING: "assignments"})

    p = sub.add_parser("remove", parents=[dsn], help="delete a bot row")
    p.add_argument("name")
    p.set_defaults(func=run_remove)


def _repo(args: argparse.Namespace) -> Any:
    from parrot_parents.bots.repository import BotRepository

    return BotRepository(args.dsn)


def _status(row: dict[str, Any]) -> str:
    from parrot_parents.bots.settings import validate_bot
    from parrot_parents.errors import BotConfigError, problem_text

    try:
        validate_bot(row)
    except BotConfigError as exc:
        return "invalid: " + "; ".join(problem_text(k, m) for k, m in exc.problems)
    # "valid" is what this command can know: the row passes the same validation as the
    # API. Whether a server loaded it (models found, etc.) is GET /api/v1/bots/{name}.
    return "valid" if row["enabled"] else "disabled"


async def _missing_collections(repo: Any, rows: list[dict[str, Any]]) -> set[str]:
    from parrot_parents.bots.factory import collection_exists

    engine = await repo.engine()
    names = {r["collection"] for r in rows}
    return {c for c in names if not await collection_exists(engine, c)}


async def run_list(args: argparse.Namespace) -> int:
    async with _repo(args) as repo:
        rows = await repo.list_rows()
        missing = await _missing_collections(repo, rows)
    for r in rows:
        r["status"] = _status(r)
        if r["collection"] in missing and not r["status"].startswith("invalid"):
            r["status"] += " (collection missing: will not load)"
    if args.json:
        print_json([{k: v for k, v in r.items() if k != "id"} for r in rows])
        return 0
    if not rows:
        print("no bots (add one with `parrot-parents bots add NAME --collection C`)")
        return 0
    header = (
        "NAME",
        "COLLECTION",
        "EXPAND",
        "MODE",
        "LIMIT",
        "BUDGET",
        "RERANKER",
        "SCOPE",
        "STATUS",
    )
    table = [
        (
            r["name"],
            r["collection"],
            "yes" if r["expand_to_parent"] else "no",
            r["expansion_mode"],
            "-" if r["context_search_limit"] is None else str(r["context_search_limit"]),
            "-" if r["context_budget"] is None else str(r["context_budget"]),
            str((r["reranker_config"] or {}).get("type", "-")),
            # The scope in full: it is what keeps the bot to its part of the collection.
            "-" if r["scope"] is None else _compact_json(r["scope"]),
            r["status"],
        )
        for r in rows
    ]
    print(format_table(header, table))
    return 0


def _compact_json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@contextlib.contextmanager
def _scope_warnings() -> Iterator[None]:
    """Print the repository's scope warnings on stderr: the CLI silences warnings, but a
    scope that keeps no row leaves a bot that finds nothing, so it is said out loud."""
    from parrot_parents.bots.scope_check import ScopeWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScopeWarning)
        try:
            yield
        finally:
            for w in caught:
                if issubclass(w.category, ScopeWarning):
                    print(f"warning: {w.message}", file=sys.stderr)


async def run_show(args: argparse.Namespace) -> int:
    async with _repo(args) as repo:
        row = await repo.get_row(args.name)
    print_json({**{k: v for k, v in row.items() if k != "id"}, "status": _status(row)})
    return 0


async def _check_collection(repo: Any, collection: object, *, force: bool) -> None:
    """Refuse a collection that does not exist (a bot on it would answer 503) unless
    ``force``; with ``force``, warn. A value that is not text is left to the validation.

    Raises:
        ConfigurationError: the collection does not exist and ``force`` is False.
    """
    from parrot_parents.bots.factory import collection_exists
    from parrot_parents.errors import ConfigurationError
    from parrot_parents.stores.identifiers import validate_identifier

    if not isinstance(collection, str):
        return
    try:
        validate_identifier(collection, "collection")
    except ConfigurationError:
        return  # the row's validation names the bad value, as for any other key
    if await collection_exists(await repo.engine(), collection):
        return
    if not force:
        raise ConfigurationError(
            f"collection {collection!r} does not exist",
            hint="ingest into it first (`parrot-parents collections` lists them), or pass "
            "--force to save the bot anyway: it will not load until the collection exists",
        )
    print(
        f"warning: collection {collection!r} does not exist yet; the bot will not load "
        f"until you ingest into it (or run `parrot-parents migrate --collection "
        f"{collection}`)",
        file=sys.stderr,
    )


async def run_add(args: argparse.Namespace) -> int:
    from parrot_parents.bots.settings import SETTING_NAMES

    # A flag not given leaves its column to the row's default, as an HTTP write does.
    given = {s: getattr(args, o) for o, s in SETTING_NAMES.items() if getattr(args, o) is not None}
    data = {
        "name": args.name,
        "collection": args.collection,
        "description": args.description,
        **given,
        "reranker_config": args.reranker_config,
        "parent_searcher_config": args.parent_searcher_config,
        "scope": args.scope,
        "enabled": not args.disabled,
    }
    async with _repo(args) as repo:
        await _check_collection(repo, args.collection, force=args.force)
        with _scope_warnings():
            settings = await repo.create(data)
    print(f"added bot {settings.name!r} on collection {settings.collection!r}")
    return 0


async def run_set(args: argparse.Namespace) -> int:
    from parrot_parents.bots.settings import parse_assignment
    from parrot_parents.errors import ConfigurationError

    changes: dict[str, Any] = {}
    given = [parse_assignment(a) for a in args.assignments]
    if "scope" in vars(args):
        given.append(("scope", args.scope))
    for key, value in given:
        # One value per key: which of two the user meant is not ours to guess.
        if key in changes:
            raise ConfigurationError(
                f"{key} is given twice", hint="give each key once (--scope counts as scope=)"
            )
        changes[key] = value
    if not changes:
        raise ConfigurationError(
            "nothing to change", hint="give key=value assignments, or --scope JSON"
        )
    async with _repo(args) as repo:
        before = await repo.get_row(args.name)
        if "collection" in changes and changes["collection"] != before["collection"]:
            await _check_collection(repo, changes["collection"], force=args.force)
        with _scope_warnings():
            settings = await repo.update(args.name, changes)
    after = settings.model_dump()
    changed = [k for k in sorted(after) if before.get(k) != after[k]]
    for key in changed:
        print(f"{settings.name}: {key}: {before.get(key)!r} -> {after[key]!r}")
    if not changed:
        print(f"{settings.name}: no change")
    return 0


async def run_remove(args: argparse.Namespace) -> int:
    async with _repo(args) as repo:
        await repo.delete(args.name)
    print(f"removed bot {args.name!r}")
    return 0
