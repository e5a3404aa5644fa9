"""``parrot-parents collections|documents|delete|drop``: what is stored, and removing it.

Thin edges over :mod:`parrot_parents.stores.postgres.collections.catalog`; no model is loaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from parrot_parents.cli.common import TRAILING, add_dsn_option, print_json, visible

__all__ = ["format_table", "register"]


def _command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    func: Callable[[argparse.Namespace], Awaitable[int]],
    help: str,
    description: str | None = None,
) -> argparse.ArgumentParser:
    p = subparsers.add_parser(name, help=help, description=description)
    add_dsn_option(p)
    p.add_argument("--schema", default="public", help="PostgreSQL schema (default: public)")
    p.set_defaults(func=func)
    return p


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(
        subparsers,
        "collections",
        run_collections,
        help="list the collections with their row counts, model, strategy and lexical backend",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p = _command(
        subparsers,
        "documents",
        run_documents,
        help="list a collection's documents: ids, sources, sizes, ingest times",
    )
    p.add_argument(
        "collection",
        nargs="?",
        default="documents",
        help="the collection (default: documents, the default collection)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p = _command(
        subparsers,
        "delete",
        run_delete,
        help="delete documents (their children, parents and documents rows) from a collection",
        description="Exit status 1 when an id names no document (the others are deleted).",
    )
    p.add_argument("collection")
    p.add_argument("document_ids", nargs="+", metavar="DOCUMENT_ID")
    p.set_defaults(**{TRAILING: "document_ids"})
    p = _command(
        subparsers,
        "drop",
        run_drop,
        help="drop a collection and everything stored with it",
        description="Asks for confirmation on a terminal; without one, --yes is required.",
    )
    p.add_argument("collection")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p = _command(
        subparsers,
        "filter-keys",
        run_filter_keys,
        help="list a collection's filter keys, or give it more (a B-tree index of the key's "
        "value and planner statistics, for fast ranges, $in and equalities on it)",
        description="Prints the collection's filter keys, one a line, after adding KEYs it "
        "lacks (each index is built in one pass over the table; its writers wait meanwhile), "
        "and the graphs of their values that keep more children than a filtered search "
        "ranks exactly (4,000 up to 100k children) and have none yet; --json also counts "
        "each key's value graphs.",
    )
    p.add_argument("collection")
    p.add_argument("keys", nargs="*", metavar="KEY", help="metadata keys to add")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(**{TRAILING: "keys"})


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart (the last one unpadded); a
    cell's control characters are written as escapes (:func:`visible`), so each row is
    one line."""
    table = [list(header), *[[visible(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    lines = []
    for r in table:
        cells = [c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, r[-1]]).rstrip())
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def key_cell(key: str | None) -> str:
    """A partition key as a table cell: as it is when that reads back unambiguously, else
    as a JSON string with every invisible character escaped (a key that is empty, holds a
    space or an invisible character, starts with a quote, or is ``-``, which stands for
    none)."""
    if key is None:
        return "-"
    if key and key != "-" and not key.startswith('"') and key.isprintable() and " " not in key:
        return key
    return '"' + "".join(_escaped(ch) for ch in key) + '"'


def _escaped(ch: str) -> str:
    if ch == " " or (ch.isprintable() and ch not in '"\\'):
        return ch
    return json.dumps(ch)[1:-1]  # \", \\, \t or \uXXXX (a pair beyond the BMP)


def _model(c: Any) -> str:
    """The recorded model with its fingerprint, as ``NAME@digest``."""
    if c.embedding_model is None:
        return "(not recorded)"
    name = f"{c.embedding_model}@{c.model_fingerprint}"
    return f"{name} (re-embedding)" if c.reembedding else name


async def _with_engine(dsn: str | None, work: Any) -> Any:
    from parrot_parents.stores.postgres.connections.engine import make_engine

    engine = await make_engine(dsn)
    try:
        return await work(engine)
    finally:
        await engine.dispose()


def _print_listing(
    args: argparse.Namespace,
    found: Sequence[Any],
    empty: str,
    header: Sequence[str],
    row: Callable[[Any], Sequence[str]],
) -> int:
    if args.json:
        print_json([x.to_dict() for x in found])
    elif not found:
        print(empty)
    else:
        print(format_table(header, [row(x) for x in found]))
    return 0


async def run_collections(args: argparse.Namespace) -> int:
    from parrot_parents.stores.postgres.collections.catalog import list_collections

    found = await _with_engine(args.dsn, lambda e: list_collections(e, args.schema))
    return _print_listing(
        args,
        found,
        "no collections (create one with `parrot-parents ingest DIR --collection NAME`)",
        (
            "NAME",
            "DOCUMENTS",
            "PARENTS",
            "CHILDREN",
            "DIM",
            "MODEL",
            "STRATEGY",
            "LEXICAL",
            "PARTITION",
            "FILTER_KEYS",
        ),
        lambda c: (
            c.name,
            _cell(c.documents),
            str(c.parents),
            str(c.children),
            _cell(c.dimension),
            _model(c),
            ",".join(c.strategies) or "-",
            _cell(c.lexical_backend)
            + (f" ({c.text_search_config})" if c.text_search_config else ""),
            key_cell(c.partition_key),
            ",".join(json.dumps(k) if "," in k else key_cell(k) for k in c.filter_keys) or "-",
        ),
    )


async def run_documents(args: argparse.Namespace) -> int:
    from parrot_parents.stores.postgres.collections.catalog import list_documents

    found = await _with_engine(args.dsn, lambda e: list_documents(e, args.collection, args.schema))
    return _print_listing(
        args,
        found,
        f"no documents in {args.collection!r}",
        ("DOCUMENT_ID", "SOURCE", "CHARACTERS", "PARENTS", "CHILDREN", "INGESTED_AT"),
        lambda d: (
            d.document_id,
            _cell(d.source),
            _cell(d.characters),
            str(d.parents),
            str(d.children),
            "-" if d.ingested_at is None else d.ingested_at.isoformat(timespec="seconds"),
        ),
    )


async def run_delete(args: argparse.Namespace) -> int:
    from parrot_parents.stores.postgres.collections.catalog import delete_documents

    report = await _with_engine(
        args.dsn, lambda e: delete_documents(e, args.collection, args.document_ids, args.schema)
    )
    for document_id, rows in report.deleted.items():
        print(f"deleted {document_id!r} from {args.collection!r} ({rows} rows)")
    for document_id in report.unknown:
        print(f"no document {document_id!r} in {args.collection!r}", file=sys.stderr)
    return 1 if report.unknown else 0


def _confirm(collection: str, documents: int | None) -> bool:
    what = "" if documents is None else f" and its {documents} document(s)"
    answer = input(f"drop collection {collection!r}{what}? This cannot be undone [y/N] ")
    return answer.strip().lower() in ("y", "yes")


async def run_drop(args: argparse.Namespace) -> int:
    from parrot_parents.errors import ConfigurationError, StoreError
    from parrot_parents.stores.identifiers import validate_identifier
    from parrot_parents.stores.postgres.collections.catalog import drop_collection, list_collections

    collection = validate_identifier(args.collection, "collection")
    if not args.yes and not sys.stdin.isatty():
        raise ConfigurationError(
            f"refusing to drop {collection!r} without confirmation: stdin is not a terminal",
            hint="add --yes to drop it",
        )

    async def work(engine: Any) -> bool:
        if not args.yes:
            found = {c.name: c for c in await list_collections(engine, args.schema)}
            if collection not in found:
                raise StoreError(
                    f"collection {collection!r} does not exist in schema {args.schema!r}",
                    hint="`parrot-parents collections` lists them; names are case-sensitive",
                )
            if not _confirm(collection, found[collection].documents):
                return False
        await drop_collection(engine, collection, args.schema)
        return True

    if not await _with_engine(args.dsn, work):
        print("not dropped", file=sys.stderr)
        return 1
    print(f"dropped collection {collection!r}")
    return 0


async def run_filter_keys(args: argparse.Namespace) -> int:
    from parrot_parents.stores.identifiers import collection_name
    from parrot_parents.stores.postgres import PgVectorStore
    from parrot_parents.stores.postgres.collections.filter_keys import (
        read_filter_keys,
        validate_filter_keys,
    )
    from parrot_parents.stores.postgres.collections.value_graphs import read_value_graphs

    keys = validate_filter_keys(args.keys)  # before anything connects
    name = collection_name(args.collection, args.schema)
    # A store that may create completes an existing collection when it reads (never
    # creating a missing one): the keys it lacks are built then.
    store = PgVectorStore(dsn=args.dsn, table=name.table, schema=name.schema, filter_keys=keys)
    try:
        await store.ready()
        async with store.engine.connect() as conn:
            found = sorted(await conn.run_sync(read_filter_keys, name))
            graphs = await conn.run_sync(read_value_graphs, name)
    finally:
        await store.close()
    if args.json:
        print_json({"collection": name.table, "filter_keys": found, "value_graphs": graphs})
    else:
        print("\n".join(key_cell(k) for k in found) or f"{name.table!r} has no filter keys")
    return 0
