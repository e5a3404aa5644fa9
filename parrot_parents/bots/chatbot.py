"""``Chatbot``: a bot configured by constructor injection."""

from __future__ import annotations

from typing import Any

from parrot_parents.bots.abstract import AbstractBot
from parrot_parents.bots.vector_context import VectorContextMixin

__all__ = ["Chatbot"]


class Chatbot(VectorContextMixin, AbstractBot):
    """A retrieval bot; see :class:`AbstractBot` for the arguments.

    Example (spec FEAT-128, Option 1)::

        store = PgVectorStore(dsn="postgresql://...", table="my_docs")
        searcher = InTableParentSearcher(store=store)
        bot = Chatbot(parent_searcher=searcher, expand_to_parent=True, context_search_limit=5)
        context, meta = await bot.get_vector_context("How will I be paid?")

    When only ``parent_searcher`` is given, the bot searches that searcher's store.
    """

    async def close(self) -> None:
        """Close the store (and the reranker when it has resources)."""
        if self.store is not None:
            await self.store.close()

    async def __aenter__(self) -> Chatbot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def describe(self) -> dict[str, Any]:
        """Alias of :meth:`config`."""
        return self.config()
