"""``Chatbot``: a retriever (search, rerank, expand, pack) plus an optional LLM answer."""

from __future__ import annotations

from typing import Any

from typing_extensions import Unpack

from parrot_parents.bots.abstract import AbstractBot
from parrot_parents.bots.factory import build_bot, connect_row_store, require_collection, row_store
from parrot_parents.bots.registries import Registries, default_registries
from parrot_parents.bots.repository import BotRepository
from parrot_parents.bots.settings import validate_bot
from parrot_parents.errors import (
    BotConfigError,
    BotNotFoundError,
    CollectionNotFoundError,
    LLMNotConfiguredError,
    SchemaMismatchError,
)
from parrot_parents.llm.client import BASE_URL_ENV, ChatCompletionsClient
from parrot_parents.llm.prompt import Answer, build_messages
from parrot_parents.retrieval.options import RetrievalOptions, RetrievalOverrides
from parrot_parents.retrieval.pipeline import Retrieval
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.questions import check_question
from parrot_parents.sync import run_sync, sync_twin

__all__ = ["Chatbot"]


class Chatbot(AbstractBot):
    """A retrieval bot; see :class:`AbstractBot` for the arguments.

    Example (spec FEAT-128, Option 1)::

        store = PgVectorStore(dsn="postgresql://...", table="my_docs")
        searcher = InTableParentSearcher(store=store)
        bot = Chatbot(parent_searcher=searcher, expand_to_parent=True, context_search_limit=5)
        context, meta = await bot.get_vector_context("How will I be paid?")

    When only ``parent_searcher`` is given, the bot searches that searcher's store.
    A bot can also come from a row of the ``bots`` table: :meth:`from_database`.

    Every retrieval method takes the per-call options
    (:mod:`parrot_parents.retrieval.options`) as keyword arguments or as one ``options``
    object, and has a ``*_sync`` twin for code without an event loop.
    """

    llm: ChatCompletionsClient | None = None

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
        name (see :mod:`parrot_parents.plugins`). The bot owns its store:
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
        registries = registries or default_registries()
        async with BotRepository(dsn, table=table, registries=registries) as repo:
            row = await repo.get_row(name)
            if not row.get("enabled", True):
                raise BotNotFoundError(
                    name, hint=f"the bot is disabled: `parrot-parents bots set {name} enabled=true`"
                )
            settings = validate_bot(row, registries=registries)
            other = row_store(settings, registries=registries, embedding=embedding)
            if other is None:
                await require_collection(await repo.engine(), settings)
        if other is not None:
            await connect_row_store(settings, other)
        # A bot only reads: a missing collection is an error, never an empty one made here.
        store = other or PgVectorStore(
            dsn=dsn, table=settings.collection, embedding=embedding, create=False
        )
        try:
            if other is None:
                await store.connect()
            return await build_bot(
                settings, store, registries=registries, warm_up=warm_up, bot_class=cls
            )
        except (SchemaMismatchError, CollectionNotFoundError) as exc:
            await store.close()
            raise BotConfigError(name, [("collection", exc.message)]) from exc
        except BaseException:
            await store.close()
            raise

    @classmethod
    def from_database_sync(cls, name: str, **kwargs: Any) -> Chatbot:
        """:meth:`from_database` from code without an event loop (same arguments)."""
        return run_sync(cls.from_database(name, **kwargs))

    async def retrieve(
        self,
        question: str,
        options: RetrievalOptions | None = None,
        **overrides: Unpack[RetrievalOverrides],
    ) -> Retrieval:
        """Run the pipeline and return the passages and a typed ``meta``.

        Args:
            question: the user's question.
            options: per-call options as one object; keyword ``overrides`` win over it.
            **overrides: per-call options (:mod:`parrot_parents.retrieval.options`).

        Returns:
            :class:`~parrot_parents.retrieval.pipeline.Retrieval`.

        Raises:
            ConfigurationError: an unknown option or a bad value (the message names it),
                a bad question (empty, blank, over 4000 characters, a NUL or a lone
                surrogate; checked before any model loads), or expansion without a parent
                searcher.
        """
        call = RetrievalOptions.from_overrides(overrides).over(options)
        return await self.retriever.retrieve(question, call)

    async def get_vector_context(
        self,
        question: str,
        options: RetrievalOptions | None = None,
        **overrides: Unpack[RetrievalOverrides],
    ) -> tuple[str, dict[str, Any]]:
        """Retrieve context for ``question`` (spec FEAT-128).

        Returns:
            ``(context, meta)``: the passages joined under source headers, and the
            ``meta`` dict (``children`` with scores and ranks, ``parents``, ``folded``,
            ``expanded``, ``fallbacks``, ``context_chars``, ``timings_ms``, ``passages``
            and, with a budget, ``packing``).

        Raises:
            ConfigurationError: as :meth:`retrieve`.
        """
        retrieval = await self.retrieve(question, options, **overrides)
        return retrieval.context, retrieval.meta.to_dict()

    async def ask(
        self,
        question: str,
        options: RetrievalOptions | None = None,
        *,
        llm: ChatCompletionsClient | None = None,
        system_prompt: str | None = None,
        max_tokens: int | None = None,
        **overrides: Unpack[RetrievalOverrides],
    ) -> Answer:
        """Retrieve context for ``question`` and have the LLM answer from it.

        The retrieval options are those of :meth:`retrieve`. The prompt delimits each
        passage and names its source (:mod:`parrot_parents.llm.prompt`).

        Args:
            llm: the chat-completions client; default ``self.llm`` when set, else one
                configured from ``PARROT_PARENTS_LLM_*`` for this call.
            system_prompt: replaces :data:`~parrot_parents.llm.prompt.SYSTEM_PROMPT`.
            max_tokens: answer length cap (tokens); default the client's.

        Returns:
            :class:`~parrot_parents.llm.prompt.Answer`: ``text``, ``passages`` (``[n]`` in
            the answer is ``passages[n-1]``) and ``meta`` with ``meta["llm"]``.

        Raises:
            LLMNotConfiguredError: no client given and none in the environment.
            LLMError: the LLM call failed.
            ConfigurationError: a bad question or option.
        """
        check_question(question)  # before an LLM client is made or a model loads
        call = RetrievalOptions.from_overrides(overrides).over(options)
        client = llm or self.llm
        owned = None
        if client is None:
            client = owned = ChatCompletionsClient.from_env()
        if client is None:
            raise LLMNotConfiguredError(
                "no LLM is configured",
                hint=f"set {BASE_URL_ENV} and PARROT_PARENTS_LLM_MODEL, or pass llm=",
            )
        try:
            retrieval = await self.retriever.retrieve(question, call)
            messages = build_messages(question, retrieval.passages, system_prompt=system_prompt)
            completion = await client.complete(messages, max_tokens=max_tokens)
        finally:
            if owned is not None:
                await owned.close()
        meta = retrieval.meta.to_dict()
        meta["llm"] = completion.to_dict()
        return Answer(text=completion.text, passages=list(retrieval.passages), meta=meta)

    async def close(self) -> None:
        """Release the reranker's model reference, and the store when the bot owns it
        (not when a :class:`~parrot_parents.bots.manager.BotManager` shares it). Safe to
        call twice."""
        if self.reranker is not None:
            self.reranker.close()
        if self.store is not None and self.owns_store:
            await self.store.close()

    retrieve_sync = sync_twin(retrieve)
    get_vector_context_sync = sync_twin(get_vector_context)
    ask_sync = sync_twin(ask)
    close_sync = sync_twin(close)

    async def __aenter__(self) -> Chatbot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def describe(self) -> dict[str, Any]:
        """Alias of :meth:`config`."""
        return self.config()
