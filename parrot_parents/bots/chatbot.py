"""``Chatbot``: a bot configured by constructor injection."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from parrot_parents.bots.abstract import AbstractBot
from parrot_parents.bots.vector_context import VectorContextMixin

if TYPE_CHECKING:
    from parrot_parents.bots.llm import ChatCompletionsClient
    from parrot_parents.bots.prompt import Answer
    from parrot_parents.bots.registry import Registries

__all__ = ["Chatbot"]


class Chatbot(VectorContextMixin, AbstractBot):
    """A retrieval bot; see :class:`AbstractBot` for the arguments.

    Example (spec FEAT-128, Option 1)::

        store = PgVectorStore(dsn="postgresql://...", table="my_docs")
        searcher = InTableParentSearcher(store=store)
        bot = Chatbot(parent_searcher=searcher, expand_to_parent=True, context_search_limit=5)
        context, meta = await bot.get_vector_context("How will I be paid?")

    When only ``parent_searcher`` is given, the bot searches that searcher's store.

    A bot can also come from a row of the ``bots`` table: :meth:`from_database`.
    """

    @classmethod
    async def from_database(
        cls,
        name: str,
        *,
        dsn: str | None = None,
        embedding: Any = None,
        registries: Registries | None = None,
        table: str = "bots",
        warm_up: bool = True,
    ) -> Chatbot:
        """Load the bot ``name`` from its row of the ``bots`` table.

        The parent searcher and reranker are built from the row's JSON configs by type
        name (see :mod:`parrot_parents.bots.registry`). The bot owns its store:
        ``await bot.close()`` releases it. To pick up a later change of the row, load it
        again (or use :class:`~parrot_parents.bots.manager.BotManager`).

        Args:
            name: the bot's name.
            dsn: PostgreSQL DSN; ``$PARROT_PARENTS_DSN``, else the embedded server.
            embedding: the embedding model the collection was built with (default
                all-MiniLM-L6-v2).
            registries: type names for the JSON configs; the process default when None.
            table: the bots table, default ``"bots"``.
            warm_up: load the reranker model now, default True.

        Raises:
            BotNotFoundError: no such row, or it is disabled.
            BotConfigError: the row is invalid (the message names the bot and the key), or
                its collection is missing.
            StoreError: the database or the bots table is unavailable.
        """
        from parrot_parents.bots.manager import load_bot

        return await load_bot(
            name,
            dsn=dsn,
            embedding=embedding,
            registries=registries,
            table=table,
            warm_up=warm_up,
            bot_class=cls,
        )

    async def ask(
        self,
        question: str,
        *,
        expand_to_parent: bool | None = None,
        limit: int | None = None,
        filter: dict[str, Any] | None = None,
        rerank_candidates: int | None = None,
        budget: int | None = None,
        mode: str | None = None,
        llm: ChatCompletionsClient | None = None,
        system_prompt: str | None = None,
        max_tokens: int | None = None,
    ) -> Answer:
        """Retrieve context for ``question`` and have the LLM answer from it.

        The overrides are those of :meth:`get_vector_context` and resolve the same way: per
        call, then the bot's setting (its row or constructor), then the default.
        ``budget`` and ``mode`` are passed on only when set. The prompt delimits each
        passage and names its source (:mod:`parrot_parents.bots.prompt`).

        Args:
            llm: the chat-completions client; default ``self.llm`` when set, else one
                configured from ``PARROT_PARENTS_LLM_*`` for this call.
            system_prompt: replaces :data:`~parrot_parents.bots.prompt.SYSTEM_PROMPT`.
            max_tokens: answer length cap (tokens); default the client's.

        Returns:
            :class:`~parrot_parents.bots.prompt.Answer`: ``text``, ``passages`` (``[n]`` in
            the answer is ``passages[n-1]``) and ``meta`` with ``meta["llm"]``.

        Raises:
            LLMNotConfiguredError: no client given and none in the environment.
            LLMError: the LLM call failed.
            ConfigurationError: a bad question or override.
        """
        from parrot_parents.bots.prompt import ask_bot

        return await ask_bot(
            self,
            question,
            llm=llm,
            system_prompt=system_prompt,
            max_tokens=max_tokens,
            expand_to_parent=expand_to_parent,
            limit=limit,
            filter=filter,
            rerank_candidates=rerank_candidates,
            budget=budget,
            mode=mode,
        )

    async def close(self) -> None:
        """Release the reranker's model reference and close the store. Safe to call twice."""
        if self.reranker is not None:
            self.reranker.close()
        if self.store is not None:
            await self.store.close()

    async def __aenter__(self) -> Chatbot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def describe(self) -> dict[str, Any]:
        """Alias of :meth:`config`."""
        return self.config()
