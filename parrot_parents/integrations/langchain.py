"""A langchain-core retriever over the parrot-parents pipeline.

``ParentChildRetriever`` returns one LangChain ``Document`` per passage, in context order.
Usage and the loops ``invoke``/``ainvoke`` run on: docs/integrations.md ("LangChain").
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, model_validator

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.integrations.common import on_loop, passage_metadata, retrieval
from parrot_parents.retrieval.options import RetrievalOptions
from parrot_parents.retrieval.pipeline import Retrieval
from parrot_parents.sync import run_sync

__all__ = ["ParentChildRetriever", "to_documents"]


def to_documents(retrieval: Retrieval) -> list[Document]:
    """One ``Document`` per passage, in context order (metadata: :func:`passage_metadata`)."""
    return [
        Document(id=p.id, page_content=p.text, metadata=passage_metadata(p))
        for p in retrieval.passages
    ]


def _collect_options(fields: Collection[str], data: dict[str, Any]) -> dict[str, Any]:
    """Keyword options (``budget=2000``) and an ``options`` mapping, validated once into
    :class:`RetrievalOptions` under ``options``; ``fields``: the retriever's own fields.

    Raises:
        ConfigurationError: an unknown keyword (pydantic would drop it without a word) or
            a bad value.
    """
    data = dict(data)
    given = {k: data.pop(k) for k in list(data) if k not in fields}
    base = data.get("options")
    if isinstance(base, dict):
        base = RetrievalOptions.from_overrides(base)
    if given:
        base = RetrievalOptions.from_overrides(given).over(base or RetrievalOptions())
    if base is not None:
        data["options"] = base
    return data


class ParentChildRetriever(BaseRetriever):
    """LangChain retriever returning parent-child passages as ``Document``s.

    Attributes:
        bot: the :class:`Chatbot` that runs the pipeline (its store, parent searcher,
            reranker and settings).
        options: the per-call options
            (:class:`~parrot_parents.retrieval.options.RetrievalOptions`), also given as
            keyword arguments (``ParentChildRetriever(bot=bot, budget=2000)``); keyword
            arguments of ``invoke``/``ainvoke`` override them for one call.
        on_package_loop: the bot was built on the package's loop thread (``from_bot``);
            ``ainvoke`` then awaits it there.

    Raises:
        ConfigurationError: an unknown option or a bad value (at construction), or, at
            query time, a bad override or an empty question.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    bot: Chatbot
    options: RetrievalOptions = RetrievalOptions()
    on_package_loop: bool = False

    def __init__(self, **data: Any) -> None:
        # The options are checked here, outside pydantic's validation: a validator's
        # ConfigurationError (a ValueError) would reach the caller wrapped in pydantic's
        # ValidationError, where the other surfaces raise it as it is.
        super().__init__(**_collect_options(type(self).model_fields, data))

    @model_validator(mode="before")
    @classmethod
    def _options_of_validate(cls, data: Any) -> Any:
        """The same for ``model_validate``, which does not call ``__init__``."""
        return _collect_options(cls.model_fields, data) if isinstance(data, dict) else data

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        coro = retrieval(self.bot, query, self.options.set_fields(), overrides)
        return to_documents(run_sync(coro))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        coro = retrieval(self.bot, query, self.options.set_fields(), overrides)
        return to_documents(await on_loop(coro, self.on_package_loop))

    @classmethod
    def from_bot(
        cls, name: str, *, dsn: str | None = None, embedding: Any = None, **options: Any
    ) -> ParentChildRetriever:
        """A retriever over the bot ``name`` of the ``bots`` table, for ``invoke``.

        The bot is loaded on the package's loop thread (``Chatbot.from_database``).
        ``dsn`` and ``embedding`` are those of ``Chatbot.from_database``; ``options`` are
        the retriever's fields (``budget=2000``, ``mode="window:1"``, ...).
        Close it with :meth:`close`.

        Raises:
            BotNotFoundError, BotConfigError, StoreError: as ``Chatbot.from_database``.
        """
        bot = run_sync(Chatbot.from_database(name, dsn=dsn, embedding=embedding))
        return cls(bot=bot, on_package_loop=True, **options)

    @classmethod
    async def afrom_bot(
        cls, name: str, *, dsn: str | None = None, embedding: Any = None, **options: Any
    ) -> ParentChildRetriever:
        """:meth:`from_bot` for ``ainvoke``: the bot is loaded on the running loop."""
        bot = await Chatbot.from_database(name, dsn=dsn, embedding=embedding)
        return cls(bot=bot, **options)

    def close(self) -> None:
        """Release the bot (and its store when it owns it); for :meth:`from_bot`."""
        run_sync(self.bot.close())

    async def aclose(self) -> None:
        """Release the bot; for :meth:`afrom_bot` or a bot made on the running loop."""
        await on_loop(self.bot.close(), self.on_package_loop)
