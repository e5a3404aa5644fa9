"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from parrot_parents.stores.embedded import DSN_ENV

__all__ = ["add_store_options", "make_store", "print_json"]


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """``--dsn`` and ``--collection``."""
    parser.add_argument(
        "--dsn",
        default=None,
        help=f"PostgreSQL DSN (default: ${DSN_ENV}, else the embedded server)",
    )
    parser.add_argument(
        "--collection", default="documents", help="collection (table) name (default: documents)"
    )
    parser.add_argument(
        "--model", default=None, help="embedding model name or path (default: all-MiniLM-L6-v2)"
    )


def make_store(args: argparse.Namespace, *, create: bool = True) -> Any:
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
    from parrot_parents.stores.postgres import PgVectorStore

    return PgVectorStore(
        dsn=args.dsn,
        table=args.collection,
        embedding=SentenceTransformerEmbeddings(args.model),
        create=create,
    )


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")
