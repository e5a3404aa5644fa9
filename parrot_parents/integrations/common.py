"""What the framework adapters share: per-call options and passage metadata."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from parrot_parents.retrieval.options import RetrievalOptions
from parrot_parents.retrieval.passages import Passage
from parrot_parents.stores.questions import check_question
from parrot_parents.sync import package_loop

if TYPE_CHECKING:
    from parrot_parents.bots.chatbot import Chatbot
    from parrot_parents.retrieval.pipeline import Retrieval

__all__ = [
    "METADATA_KEYS",
    "OPTION_NAMES",
    "call_options",
    "on_loop",
    "passage_metadata",
    "retrieval",
]

T = TypeVar("T")

#: The per-call options an adapter takes, as in ``Chatbot.get_vector_context``.
OPTION_NAMES = tuple(RetrievalOptions.model_fields)


def call_options(fixed: Mapping[str, Any], overrides: Mapping[str, Any]) -> RetrievalOptions:
    """The retriever's own options with a call's ``overrides`` over them.

    Unset (None) options fall back to the bot's settings, then the package defaults.

    Raises:
        ConfigurationError: an unknown option or a bad value (the message names it).
    """
    base = RetrievalOptions.from_overrides(fixed)
    return RetrievalOptions.from_overrides(dict(overrides)).over(base)


def retrieval(
    bot: Chatbot, query: str, fixed: Mapping[str, Any], overrides: Mapping[str, Any]
) -> Coroutine[Any, Any, Retrieval]:
    """The bot's retrieval of ``query``, not started; the question and the options are
    checked first, in the caller's thread, before any model loads.

    Raises:
        ConfigurationError: a bad question, option or value.
    """
    check_question(query)
    return bot.retrieve(query, call_options(fixed, overrides))


async def on_loop(coro: Coroutine[Any, Any, T], package: bool) -> T:
    """Await ``coro`` on the package's loop (``package``: a bot made there) or here."""
    if package:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, package_loop()))
    return await coro


def passage_metadata(passage: Passage) -> dict[str, Any]:
    """Metadata of a passage handed to a framework (JSON-ready): the keys of
    :meth:`Passage.to_dict` but ``text`` (offsets in characters, scores as the
    :class:`Passage` fields say), and ``rank`` (0-based position in the context)."""
    out = {k: v for k, v in passage.to_dict().items() if k != "text"}
    out["rank"] = passage.rank
    return out


#: The keys of :func:`passage_metadata`, in its order.
METADATA_KEYS = tuple(passage_metadata(Passage(id="", text="", kind="child", score=None, rank=0)))
