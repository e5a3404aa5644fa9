"""Options and helpers shared by the CLI commands."""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from typing import Any

from parrot_parents.embedded.server import DSN_ENV

__all__ = [
    "DEFAULT_COLLECTION",
    "RETRIEVAL_FLAGS",
    "TRAILING",
    "add_backend_option",
    "add_dsn_option",
    "add_model_option",
    "add_retrieval_options",
    "add_store_options",
    "add_strategy_option",
    "describe_strategy",
    "make_store",
    "print_json",
    "retrieval_overrides",
    "visible",
]


#: The collection a command reads or writes when ``--collection`` is not given.
DEFAULT_COLLECTION = "documents"

#: The namespace attribute a command sets to the ``dest`` of its list of positionals
#: (``nargs`` ``*`` or ``+``) when those may also come after its options, as in
#: ``bots set NAME --scope JSON key=value``: argparse alone takes a list of positionals
#: in one run, and refuses the rest as unrecognised.
TRAILING = "trailing_positionals"


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


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    """``--store``: ``postgres`` (default) or ``milvus:URI``."""
    parser.add_argument(
        "--store",
        default="postgres",
        metavar="BACKEND",
        help="postgres (default; see --dsn) or milvus:URI, a Milvus Lite file such as "
        "milvus:./milvus.db or a server such as milvus:http://host:19530 (token from "
        "$PARROT_PARENTS_MILVUS_TOKEN); needs the [milvus] extra",
    )


def add_lexical_backend_option(parser: argparse.ArgumentParser) -> None:
    """``--lexical-backend``: what ranks the lexical branch of a new collection."""
    parser.add_argument(
        "--lexical-backend",
        choices=["auto", "pg_textsearch", "sql"],
        default="auto",
        help="what ranks BM25 in a new PostgreSQL collection: pg_textsearch (its bm25 index), "
        "sql (BM25 computed in SQL, any PostgreSQL) or auto (default: pg_textsearch where the "
        "server has 1.1.0 or newer, else sql); an existing collection keeps its own "
        "(reindex --lexical moves it)",
    )


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """``--store``, ``--dsn``, ``--collection`` and ``--model``."""
    add_backend_option(parser)
    add_dsn_option(parser)
    parser.add_argument(
        "--collection",
        default=DEFAULT_COLLECTION,
        help=f"collection (table) name (default: {DEFAULT_COLLECTION})",
    )
    add_model_option(parser)


#: The retrieval flags, one per field of
#: :class:`~parrot_parents.retrieval.options.RetrievalOptions` and in its order:
#: ``(option, flag, type, meaning, package default)``. Spelled out here because
#: ``--help`` must not import pydantic and the SQL layer; a test holds this table to the
#: options (the names, and the defaults it states).
RETRIEVAL_FLAGS: tuple[tuple[str, str, type, str, str], ...] = (
    ("expand_to_parent", "--expand", bool, "widen hits to their parents or windows", "off"),
    (
        "limit",
        "--limit",
        int,
        "children kept after search and rerank, 1..100",
        "10, or 20 with a budget",
    ),
    (
        "filter",
        "--filter",
        str,
        'metadata filter as JSON, e.g. \'{"year": {"$gte": 2022}}\' (langchain-postgres '
        "operators: $eq $ne $lt $lte $gt $gte $in $nin $between $exists $like $ilike $and "
        "$or $not)",
        "none",
    ),
    (
        "rerank_candidates",
        "--rerank-candidates",
        int,
        "children searched before reranking (with a reranker), 1..1,000",
        "4 x the limit",
    ),
    (
        "budget",
        "--budget",
        int,
        "context budget in characters of passage text, 1..10,000,000",
        "none",
    ),
    (
        "mode",
        "--mode",
        str,
        "expansion mode: parent, auto_merge:T (0 < T <= 1) or window:N (N >= 1)",
        "parent",
    ),
    (
        "search_mode",
        "--search-mode",
        str,
        "how children are searched: dense, lexical (BM25) "
        "or hybrid (both, fused by reciprocal rank fusion)",
        "hybrid",
    ),
    ("rrf_k", "--rrf-k", int, "hybrid: the RRF constant k, 1..1,000", "60"),
    ("dense_weight", "--dense-weight", float, "hybrid: weight of the dense ranks, 0..10", "1.0"),
    (
        "lexical_weight",
        "--lexical-weight",
        float,
        "hybrid: weight of the lexical ranks, 0..10",
        "1.0",
    ),
    (
        "trim",
        "--trim",
        bool,
        "with a budget, hand over the hits that do not fit whole as their best sentences",
        "on",
    ),
    (
        "prf",
        "--prf",
        bool,
        "lexical/hybrid: pseudo-relevance feedback (RM3), a second BM25 pass with the "
        "strongest terms of the top 10 lexical hits; PostgreSQL only",
        "off",
    ),
)


def add_retrieval_options(
    parser: argparse.ArgumentParser,
    *,
    flags: dict[str, str] | None = None,
    exclude: tuple[str, ...] = (),
    from_bot: bool = False,
) -> None:
    """The flags of :data:`RETRIEVAL_FLAGS`, for ``ask``, ``eval`` and ``bots add``.

    Each lands in ``args.<option>``, None when not given; values are checked where they
    are used, by :mod:`parrot_parents.retrieval.options`.

    Args:
        flags: other spellings of some flags, by option (``bots add`` spells two as the
            row's columns: ``{"expand_to_parent": "--expand-to-parent"}``).
        exclude: options the command does not take (a bot row holds no ``filter``).
        from_bot: an option not given takes a bot's setting (``ask --bot``), which the
            help says; ``filter`` never does (a bot row holds none).
    """
    for name, flag, kind, meaning, default in RETRIEVAL_FLAGS:
        if name in exclude:
            continue
        if from_bot and name != "filter":
            help_ = f"{meaning} (default: the bot's setting, else {default})"
        else:
            help_ = f"{meaning} (default: {default})"
        flag = (flags or {}).get(name, flag)
        if kind is bool:
            action: Any = argparse.BooleanOptionalAction
            parser.add_argument(flag, dest=name, action=action, default=None, help=help_)
        else:
            metavar = "JSON" if name == "filter" else None
            parser.add_argument(
                flag, dest=name, type=kind, default=None, metavar=metavar, help=help_
            )


def add_strategy_option(parser: argparse.ArgumentParser) -> None:
    """``--strategy SPEC``: an ingestion strategy (:mod:`parrot_parents.strategies.spec`)."""
    parser.add_argument(
        "--strategy",
        default=None,
        metavar="SPEC",
        help="ingestion strategy: plain, parent-document[:N], sentence-window[:N], "
        "hierarchical[:N], contextual (or contextual:extractive, no model), "
        "hypothetical-questions[:N], propositions[:N], summary; keyword forms too "
        "(hypothetical-questions:count=2). The model-backed ones call the LLM of "
        "$PARROT_PARENTS_LLM_BASE_URL (docs/strategies.md)",
    )


def describe_strategy(report: dict[str, Any]) -> str:
    """One line on what an ingestion strategy did: its expansion ratio (when it wrote
    rows) and model use."""
    tokens = report.get("tokens") or {}
    expansion = report.get("expansion")
    ratio = (
        "nothing new to embed"
        if expansion is None
        else f"expansion ratio {expansion:.2f} (searched units per retrievable unit)"
    )
    line = (
        f"strategy {report['strategy']}: {ratio}, {report['calls']} model call(s), "
        f"{report.get('cache_hits', 0)} cached, "
        f"{tokens.get('prompt', 0) + tokens.get('completion', 0)} tokens"
    )
    if report.get("of"):
        line += f"; enriched {report['enriched']} of {report['of']}"
        if report.get("partial"):
            failures = ", ".join(f"{k} {v}" for k, v in sorted(report["failures"].items()))
            line += f" (partly plain: {failures or 'no rows'})"
    return line


def retrieval_overrides(args: argparse.Namespace, *, check_filter: bool = True) -> dict[str, Any]:
    """The retrieval options given on the command line (see :func:`add_retrieval_options`).

    ``--filter`` is parsed as strict JSON; with ``check_filter`` (default) also checked
    against the filter language (that imports the store's SQL layer; a caller sending it
    to a server that checks it passes False).

    Raises:
        ConfigurationError: ``--filter`` is not a JSON object, or (checked) not a filter.
    """
    keys = [name for name, *_ in RETRIEVAL_FLAGS]
    out = {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}
    if "filter" not in out:
        return out
    from parrot_parents.errors import ConfigurationError
    from parrot_parents.strict_json import InvalidJSON, loads_strict

    try:
        value = loads_strict(out["filter"])
    except InvalidJSON as exc:
        raise ConfigurationError(f"--filter is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigurationError("--filter must be a JSON object")
    if check_filter:
        from parrot_parents.stores.filters import validate_filter

        validate_filter(value)
    return {**out, "filter": value}


def make_store(args: argparse.Namespace, *, create: bool = True) -> Any:
    """The store of ``--store``/``--dsn``/``--collection``/``--model`` (not connected).

    Raises:
        ConfigurationError: a bad ``--store`` or collection name, or ``--store milvus:``
            without pymilvus installed (said here, before any model loads).
    """
    import importlib.util

    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
    from parrot_parents.errors import ConfigurationError
    from parrot_parents.stores.backends import open_store, parse_store_spec

    kind, _ = parse_store_spec(getattr(args, "store", None))
    if kind == "milvus" and importlib.util.find_spec("pymilvus") is None:
        raise ConfigurationError(
            "the Milvus store needs pymilvus", hint="pip install 'parrot-parents[milvus]'"
        )

    return open_store(
        getattr(args, "store", None),
        dsn=args.dsn,
        collection=args.collection,
        embedding=SentenceTransformerEmbeddings(args.model),
        create=create,
        lexical_backend=getattr(args, "lexical_backend", "auto"),
        partition_key=getattr(args, "partition_key", None),
        filter_keys=getattr(args, "filter_key", None),
    )


#: Characters that move the cursor or reorder the text after them on a terminal: a
#: stored name holding one would break the lines of a table, or disguise another name.
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def visible(text: str) -> str:
    r"""``text`` for one cell of a table: control characters, line and paragraph
    separators and bidirectional controls written as escapes (``a\nb.md`` for a name
    holding a newline, ``\x1b``, ``\u2028``), the rest as is. Only for tables: ``--json``
    gives the stored text exactly."""
    if text.isprintable():
        return text
    return "".join(
        ch.encode("unicode_escape").decode("ascii")
        if ch in _BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Zl", "Zp")
        else ch
        for ch in text
    )


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")
