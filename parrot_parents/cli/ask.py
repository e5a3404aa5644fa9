"""``parrot-parents ask "question"``: print the context a bot would hand to the LLM."""

from __future__ import annotations

import argparse
from typing import Any

from parrot_parents.cli.common import add_store_options, make_store, print_json

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("ask", help="retrieve the context for a question")
    p.add_argument("question")
    add_store_options(p)
    p.add_argument(
        "--expand",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="expand hits to their parents (default: --expand)",
    )
    p.add_argument("--limit", type=int, default=5, help="children kept (default 5)")
    p.add_argument(
        "--budget",
        type=int,
        default=None,
        help="context budget in characters of passage text (default: none)",
    )
    p.add_argument(
        "--mode", default=None, help="expansion mode: parent (default), auto_merge:T or window:N"
    )
    p.add_argument(
        "--filter",
        default=None,
        metavar="JSON",
        help='metadata filter, e.g. \'{"year": {"$gte": 2022}}\' (langchain-postgres '
        "operators: $eq $ne $lt $lte $gt $gte $in $nin $between $exists $like $ilike "
        "$and $or $not)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def parse_filter(raw: str | None) -> dict[str, Any] | None:
    """``--filter`` as a checked filter dict (None when not given).

    Raises:
        ConfigurationError: not strict JSON, not an object, or an invalid filter.
    """
    if raw is None:
        return None
    from parrot_parents.errors import ConfigurationError
    from parrot_parents.stores.filters import validate_filter
    from parrot_parents.strict_json import InvalidJSON, loads_strict

    try:
        value = loads_strict(raw)
    except InvalidJSON as exc:
        raise ConfigurationError(f"--filter is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigurationError("--filter must be a JSON object")
    validate_filter(value)
    return value


async def run(args: argparse.Namespace) -> int:
    from parrot_parents.bots.chatbot import Chatbot
    from parrot_parents.stores.parents.in_table import InTableParentSearcher

    flt = parse_filter(args.filter)
    store = make_store(args, create=False)
    bot = Chatbot(
        store=store,
        parent_searcher=InTableParentSearcher(store=store),
    )
    try:
        retrieval = await bot.retrieve(
            args.question,
            expand_to_parent=args.expand,
            limit=args.limit,
            budget=args.budget,
            mode=args.mode,
            filter=flt,
        )
    finally:
        await bot.close()
    if args.json:
        print_json(
            {
                "context": retrieval.context,
                "passages": [p.to_dict() for p in retrieval.passages],
                "meta": retrieval.meta,
            }
        )
        return 0
    for i, p in enumerate(retrieval.passages, 1):
        score = "n/a" if p.score is None else f"{p.score:.3f}"
        print(
            f"[{i}] {p.source or p.document_id}  chars {p.start_index}-{p.end_index}  "
            f"{p.kind}  score {score}"
        )
        print(p.text.strip())
        print()
    m = retrieval.meta
    print(
        f"-- {len(retrieval.passages)} passage(s), {m['context_chars']} characters, "
        f"expanded={m['expanded']}, {m['timings_ms']['total']:.0f} ms"
    )
    for f in m["fallbacks"]:
        print(f"-- fallback: {f['stage']}: {f['error']}")
    return 0
