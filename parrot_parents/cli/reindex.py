"""``parrot-parents reindex --stale``: re-chunk documents stored under another chunk policy;
``parrot-parents reindex --model NAME``: re-embed the whole collection with another model;
``parrot-parents reindex --lexical BACKEND``: move the collection to another lexical backend."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from parrot_parents.cli.common import add_store_options, add_strategy_option, make_store
from parrot_parents.cli.ingest import add_chunking_options, loader_options, parent_sizes

__all__ = ["register"]

R = TypeVar("R")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "reindex",
        help="re-chunk the documents whose chunk policy version differs (--stale), or every "
        "document with another embedding model (--model NAME), from the stored text; or "
        "move the collection to another lexical backend (--lexical pg_textsearch|sql)",
        description="Takes the chunking options of `ingest`; every document stored with "
        "another policy version is rebuilt from the text kept in the collection's documents "
        "table (the files are not read), batch by batch; each document is replaced in one "
        "transaction, so an interrupted run resumes where it stopped. The strategy is part "
        "of the policy: give the `--strategy` the documents were ingested with (default: "
        "the same default as `ingest`). With `--model NAME` and no `--stale`, every "
        "document is rebuilt with that model, the one way to change a collection's model: "
        "searches are refused until the pass finishes, and running the same command again "
        "resumes an interrupted pass. With `--lexical BACKEND` alone, the collection's BM25 "
        "moves to pg_textsearch's bm25 index or to BM25 computed in SQL (sql): the index is "
        "built or dropped in one transaction, nothing is re-embedded. Moving to pg_textsearch "
        "adds a column, so the table is rewritten and its indexes built again, the HNSW "
        "graph too; searches and writes wait for it (minutes per hundred thousand children).",
    )
    p.add_argument("--stale", action="store_true", help="only documents of another policy")
    p.add_argument(
        "--lexical",
        choices=["pg_textsearch", "sql"],
        default=None,
        help="move the collection's lexical (BM25) ranking to pg_textsearch's bm25 index, "
        "or to BM25 computed in SQL (sql)",
    )
    add_store_options(p)
    add_chunking_options(p)
    add_strategy_option(p)
    p.add_argument("--batch-size", type=int, default=16, help="documents per batch (16)")
    p.add_argument("--max-batches", type=int, default=None, help="stop after N batches")
    p.set_defaults(func=run)


async def run(args: argparse.Namespace) -> int:
    if args.lexical is not None:
        if args.stale or args.model is not None:
            print("error: --lexical goes alone, not with --stale or --model", file=sys.stderr)
            return 2
        return await _move_lexical(args)
    if not args.stale and args.model is None:
        print(
            "error: give --stale (re-chunk documents of another chunk policy), --model NAME "
            "(re-embed every document with that model) or --lexical BACKEND",
            file=sys.stderr,
        )
        return 2
    if not args.stale:
        return await _reembed(args)
    from parrot_parents.loaders.reindex import ReindexReport, reindex_stale

    # An existing collection only: a typo must not create an empty one.
    store = make_store(args, create=False)  # not connected: nothing is loaded yet

    def progress(r: ReindexReport) -> None:
        print(f"batch {r.batches}: {r.reindexed} document(s) re-chunked", file=sys.stderr)

    report = await _rebuild(args, store, reindex_stale, progress)
    state = "finished" if report.finished else "stopped; run again to resume"
    print(
        f"reindex of {args.collection!r} to policy {report.policy}: "
        f"{report.reindexed} document(s) re-chunked in {report.batches} batch(es); {state}"
    )
    return _failures(report.failed)


def _failures(failed: dict[str, str]) -> int:
    """Print each document that failed; the exit status (1 when any did)."""
    for name, reason in failed.items():
        print(f"error: {name}: {reason}", file=sys.stderr)
    return 1 if failed else 0


def _postgres_store(args: argparse.Namespace, flag: str) -> Any:
    """The existing collection's PgVectorStore; None (said on stderr) for another store."""
    from parrot_parents.stores.postgres import PgVectorStore

    store = make_store(args, create=False)
    if not isinstance(store, PgVectorStore):
        print(f"error: reindex {flag} needs the postgres store", file=sys.stderr)
        return None
    return store


async def _move_lexical(args: argparse.Namespace) -> int:
    import time

    store = _postgres_store(args, "--lexical")
    if store is None:
        return 2
    try:
        await store.ready()  # a missing collection is reported before anything is said
        if args.lexical == "pg_textsearch" and store.lexical_backend != "pg_textsearch":
            print(
                f"moving {args.collection!r} to pg_textsearch: its table is rewritten and "
                "its indexes built again; searches and writes wait for it",
                file=sys.stderr,
            )
        started = time.perf_counter()
        before = await store.set_lexical_backend(args.lexical)
        took = time.perf_counter() - started
    finally:
        await store.close()
    if before == args.lexical:
        print(f"{args.collection!r} uses the {before} lexical backend already; nothing to do")
    else:
        print(f"{args.collection!r}: lexical backend {before} -> {args.lexical} in {took:.1f} s")
    return 0


async def _reembed(args: argparse.Namespace) -> int:
    from parrot_parents.loaders.reembed import ReembedReport, reembed

    store = _postgres_store(args, "--model")
    if store is None:
        return 2

    def progress(r: ReembedReport) -> None:
        print(f"batch {r.batches}: {r.reembedded} document(s) re-embedded", file=sys.stderr)

    report = await _rebuild(args, store, reembed, progress)
    if report.previous is None:
        print(f"{args.collection!r} is embedded with {report.model} already; nothing to do")
        return 0
    state = (
        "finished"
        if report.finished
        else "stopped; searches stay refused until the same command finishes it"
    )
    print(
        f"re-embed of {args.collection!r} from {report.previous} to {report.model}: "
        f"{report.reembedded} document(s) in {report.batches} batch(es); {state}"
    )
    return _failures(report.failed)


async def _rebuild(
    args: argparse.Namespace,
    store: Any,
    run_pass: Callable[..., Awaitable[R]],
    progress: Callable[[R], None],
) -> R:
    """One batched rebuild of ``store`` (``reindex_stale`` or ``reembed``) with the loader
    the arguments describe; the store and the strategy's model are closed after it."""
    from parrot_parents.loaders.text import TextLoader
    from parrot_parents.strategies.build import indexer_for
    from parrot_parents.strategies.spec import strategy_for

    spec = strategy_for(args.strategy, store)  # a bad spec fails before any work
    indexer = indexer_for(spec)
    loader = TextLoader(embedding=store.embedding, indexer=indexer, **loader_options(args))
    try:
        return await run_pass(
            loader,
            store,
            batch_size=args.batch_size,
            max_batches=args.max_batches,
            on_batch=progress,
            **parent_sizes(args, spec),
        )
    finally:
        await store.close()
        if indexer is not None:
            await indexer.close()
