"""``parrot-parents ask "question"``: print the context a bot would hand to the LLM."""

from __future__ import annotations

import argparse

from parrot_parents.cli.common import (
    add_retrieval_options,
    add_store_options,
    make_store,
    print_json,
    retrieval_overrides,
)

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("ask", help="retrieve the context for a question")
    p.add_argument("question")
    add_store_options(p)
    add_retrieval_options(p)  # the package defaults, as Chatbot() and eval have them
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


async def run(args: argparse.Namespace) -> int:
    from parrot_parents.bots.chatbot import Chatbot
    from parrot_parents.stores.backends import parent_searcher_for

    store = make_store(args, create=False)
    bot = Chatbot(
        store=store,
        parent_searcher=parent_searcher_for(store),
    )
    try:
        retrieval = await bot.retrieve(args.question, **retrieval_overrides(args))
    finally:
        await bot.close()
    if args.json:
        print_json(
            {
                "context": retrieval.context,
                "passages": [p.to_dict() for p in retrieval.passages],
                "meta": retrieval.meta.to_dict(),
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
