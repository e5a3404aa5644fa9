"""``parrot-parents show DOCUMENT_ID``: a stored document's sections with their row counts,
or (``--text``) the text that its rows' offsets index."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from parrot_parents.cli.common import add_dsn_option, print_json, visible

if TYPE_CHECKING:
    from parrot_parents.stores.postgres.collections.outline import OutlineEntry

__all__ = ["format_outline", "register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "show", help="print a stored document's tree of sections with row counts"
    )
    p.add_argument("document_id", help="the document id (as stored by ingest)")
    add_dsn_option(p)
    p.add_argument("--collection", default="documents", help="collection (default: documents)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument(
        "--text",
        action="store_true",
        help="print the text that start_index/end_index index, exactly as stored (for HTML "
        "and PDF the extracted text), without a newline added; with --json: "
        '{"document_id", "text"}',
    )
    p.set_defaults(func=run)


def format_outline(document_id: str, entries: Sequence[OutlineEntry]) -> str:
    """The tree as text: one line per section path (indented by depth) and layer; control
    characters in the id and titles written as escapes (:func:`visible`)."""
    from parrot_parents.loaders.structure.sections import PATH_SEPARATOR

    lines = [visible(document_id)]
    for e in entries:
        parts = e.section_path.split(PATH_SEPARATOR) if e.section_path else ["(no section)"]
        counts = []
        if e.parents:
            counts.append(f"{e.parents} parent{'s' if e.parents != 1 else ''}")
        if e.children:
            noun = "table row" if e.layer == "table_row" else "child"
            plural = "ren" if noun == "child" else "s"
            counts.append(f"{e.children} {noun}{plural if e.children != 1 else ''}")
        layer = f" [{e.layer}]" if e.layer and e.layer != "section" else ""
        lines.append(f"{'  ' * len(parts)}{visible(parts[-1])}{layer}: {', '.join(counts)}")
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    from parrot_parents.stores.identifiers import validate_identifier
    from parrot_parents.stores.postgres import PgVectorStore
    from parrot_parents.stores.postgres.collections.outline import document_outline, document_text
    from parrot_parents.stores.postgres.connections.engine import make_engine

    collection = validate_identifier(args.collection, "collection")
    # No model: an existing collection's dimension comes from its table, so neither an
    # unknown collection nor a known one waits for the model to load.
    engine = await make_engine(args.dsn)
    try:
        store = PgVectorStore(engine=engine, table=collection, create=False)
        try:
            await store.connect()
            if args.text:
                source = await document_text(store, args.document_id)
            else:
                entries = await document_outline(store, args.document_id)
        finally:
            await store.close()
    finally:
        await engine.dispose()
    if args.text and source is not None:
        return _print_text(args, source)
    if args.text or not entries:
        print(f"no document {args.document_id!r} in {args.collection!r}")
        return 1
    if args.json:
        from dataclasses import asdict

        print_json({"document_id": args.document_id, "sections": [asdict(e) for e in entries]})
    else:
        print(format_outline(args.document_id, entries))
    return 0


def _print_text(args: argparse.Namespace, source: str) -> int:
    if args.json:
        print_json({"document_id": args.document_id, "text": source})
        return 0
    # As stored, line breaks included: the file written by `show DOC --text > out.txt`,
    # read with open(out, newline=""), is indexed by the rows' offsets.
    sys.stdout.flush()
    sys.stdout.buffer.write(source.encode("utf-8"))
    sys.stdout.buffer.flush()
    return 0
