"""``parrot-parents ask "question"``: print the context a bot would hand to the LLM.

Locally, the collection is opened (an unknown one fails at once), then the model loads
(its time is ``meta.timings_ms.model_load``; not for ``--search-mode lexical`` without
a budget's sentence trimming, which embed nothing), then the bot retrieves. With ``--server
URL`` a running ``parrot-parents serve`` answers instead: nothing heavy is imported here
and no model loads (``meta.timings_ms.request`` is the round trip).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

from parrot_parents.cli.common import (
    DEFAULT_COLLECTION,
    add_retrieval_options,
    add_store_options,
    make_store,
    print_json,
    retrieval_overrides,
)
from parrot_parents.server.limits import TOKEN_ENV

__all__ = ["SERVER_ENV", "register"]

#: Environment variable naming the server ``ask`` uses when ``--server`` is not given.
SERVER_ENV = "PARROT_PARENTS_SERVER"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("ask", help="retrieve the context for a question")
    p.add_argument("question")
    add_store_options(p)
    add_retrieval_options(p, from_bot=True)  # else the package defaults, as Chatbot() has them
    p.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help=f"ask a running `parrot-parents serve` at URL instead of loading the model "
        f"here (default: ${SERVER_ENV}, else none). Its bot for --collection answers "
        "(or --bot, whose collection a --collection given must be); options not given take "
        "that bot's settings",
    )
    p.add_argument("--bot", default=None, help="with --server: the bot that answers")
    p.add_argument(
        "--token",
        default=None,
        help=f"with --server: its bearer token (default: ${TOKEN_ENV})",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    # None when not given: with --server and --bot, a collection given is checked against
    # the bot's, and one not given is the bot's (here it is "documents").
    p.set_defaults(func=run, collection=None)


async def run(args: argparse.Namespace) -> int:
    from parrot_parents.stores.questions import check_question

    check_question(args.question)  # here as on the server, before anything loads
    server = args.server if args.server is not None else os.environ.get(SERVER_ENV) or None
    result = await (_ask_server(args, server) if server else _ask_here(args))
    _print(result, as_json=args.json)
    return 0


async def _ask_here(args: argparse.Namespace) -> dict[str, Any]:
    from parrot_parents.errors import ConfigurationError

    if args.bot is not None or args.token is not None:
        raise ConfigurationError("--bot and --token go with --server")
    from parrot_parents.retrieval.options import RetrievalOptions

    options = RetrievalOptions.from_overrides(retrieval_overrides(args))  # before any I/O
    if args.collection is None:
        args.collection = DEFAULT_COLLECTION
    store = make_store(args, create=False)
    try:
        # Opening checks the collection before the model loads (the table gives the
        # dimension), and before the bot's modules are imported: an unknown one fails at
        # once.
        await store.connect()
    except BaseException:
        await store.close()
        raise
    from parrot_parents.bots.chatbot import Chatbot
    from parrot_parents.stores.backends import parent_searcher_for

    bot = Chatbot(store=store, parent_searcher=parent_searcher_for(store))
    try:
        # Loaded before the search, so that ``search`` leaves it out: for any search that
        # embeds the question, or a budget whose trimming ranks sentences by it.
        trims = options.budget is not None and options.trim is not False
        if options.search_mode != "lexical" or trims:
            await asyncio.to_thread(store.embedding.warm_up)
        retrieval = await bot.retrieve(args.question, options)
    finally:
        await bot.close()
    meta = retrieval.meta.to_dict()
    # The load happened before the search started, so ``search`` does not include it.
    meta["timings_ms"]["model_load"] = store.embedding.load_ms or 0.0
    return {
        "context": retrieval.context,
        "passages": [p.to_dict() for p in retrieval.passages],
        "meta": meta,
    }


async def _ask_server(args: argparse.Namespace, server: str) -> dict[str, Any]:
    from parrot_parents.cli.remote import ServerClient
    from parrot_parents.errors import ConfigurationError

    local = [
        flag
        for flag, given in (
            ("--dsn", args.dsn is not None),
            ("--model", args.model is not None),
            ("--store", args.store not in (None, "postgres")),
        )
        if given
    ]
    if local:
        raise ConfigurationError(
            f"{', '.join(local)} cannot be used with --server: the server has its own",
            hint="drop them, or drop --server to ask here",
        )
    options = retrieval_overrides(args, check_filter=False)  # the server checks them
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    client = ServerClient(server, token=token)
    started = time.perf_counter()
    if args.bot is None:
        bot = await asyncio.to_thread(client.bot_for, args.collection or DEFAULT_COLLECTION)
    else:
        bot = args.bot
        if args.collection is not None:
            served = await asyncio.to_thread(client.collection_of, bot)
            if served != args.collection:
                raise ConfigurationError(
                    f"bot {bot!r} on {client.url} serves collection {served!r}, not "
                    f"{args.collection!r}",
                    hint="drop --collection, or name the bot of that collection",
                )
    answer = await asyncio.to_thread(client.context, bot, args.question, options)
    answer["meta"].setdefault("timings_ms", {})["request"] = round(
        (time.perf_counter() - started) * 1000.0, 3
    )
    return {k: answer[k] for k in ("context", "passages", "meta")}


def _branches(p: dict[str, Any]) -> str:
    """`` (dense #1 0.612, lexical #3 7.41)``: the branch ranks and scores (cosine
    similarity, BM25) that made the score; empty when the passage carries none."""
    parts = []
    for branch, fmt in (("dense", ".3f"), ("lexical", ".2f")):
        rank, value = p.get(f"{branch}_rank"), p.get(f"{branch}_score")
        if rank is not None:
            parts.append(f"{branch} #{rank}" + ("" if value is None else f" {value:{fmt}}"))
    return f" ({', '.join(parts)})" if parts else ""


def _pages(p: dict[str, Any]) -> str:
    page, end = p.get("page"), p.get("page_end")
    if page is None:
        return ""
    return f", page {page}" if end in (None, page) else f", pages {page}-{end}"


def _print(result: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print_json(result)
        return
    passages, m = result["passages"], result["meta"]
    for i, p in enumerate(passages, 1):
        score = "n/a" if p.get("score") is None else f"{p['score']:.4f}"
        print(
            f"[{i}] {p.get('source') or p['document_id']}  "
            f"chars {p['start_index']}-{p['end_index']}  {p['kind']}  score {score}"
            f"{_branches(p)}"
        )
        section = " › ".join(p.get("section_path") or [])
        if section:
            print(f"    section: {section}{_pages(p)}")
        print(p["text"].strip())
        print()
    timings = m.get("timings_ms", {})
    took = f"{timings.get('total', 0.0):.0f} ms"
    if timings.get("model_load"):
        took += f" (model load {timings['model_load']:.0f} ms)"
    print(
        f"-- {len(passages)} passage(s), {m['context_chars']} characters, "
        f"expanded={m['expanded']}, {took}"
    )
    for f in m.get("fallbacks", []):
        print(f"-- fallback: {f['stage']}: {f['error']}")
