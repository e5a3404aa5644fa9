"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from parrot_parents.stores.embedded import DSN_ENV

__all__ = [
    "add_dsn_option",
    "add_model_option",
    "add_store_options",
    "make_store",
    "print_json",
]


def add_dsn_option(parser: argparse.ArgumentParser) -> None:
    """``--dsn``: an external server; default ``$PARROT_PARENTS_DSN``, else embedded."""
    parser.add_argument(
        "--dsn",
        default=None,
        help=f"PostgreSQL DSN (default: ${DSN_ENV}, else the embedded server)",
    )


def add_model_option(parser: argparse.ArgumentParser) -> None:
    """``--model``: the embedding model."""
    parser.add_argument(
        "--model", default=None, help="embedding model name or path (default: all-MiniLM-L6-v2)"
    )


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """``--dsn``, ``--collection`` and ``--model``."""
    add_dsn_option(parser)
    parser.add_argument(
        "--collection", default="documents", help="collection (table) name (default: documents)"
    )
    add_model_option(parser)


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
