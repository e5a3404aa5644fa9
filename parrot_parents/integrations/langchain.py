"""A langchain-core retriever over the parrot-parents pipeline.

``ParentChildRetriever`` returns one LangChain ``Document`` per passage, in context order,
at most ``k`` of them when ``k`` is set. Usage, ``k`` beside ``limit``, and the loops
``invoke``/``ainvoke`` run on: docs/integrations.md ("LangChain").
"""

from __future__ import annotations

from collections.abc import Collection, Coroutine, Mapping
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, model_validator

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.errors import ConfigurationError
from parrot_parents.integrations.common import (
    call_options,
    on_loop,
    passage_metadata,
    retrieval,
)
from parrot_parents.retrieval.options import LIMIT_MAX, RetrievalOptions, echo_value
from parrot_parents.retrieval.pipeline import Retrieval
from parrot_parents.stores.questions import check_question
from parrot_parents.sync import run_sync

__all__ = ["ParentChildRetriever", "checked_k", "to_documents"]


def to_documents(retrieval: Retrieval) -> list[Document]:
    """One ``Document`` per passage, in context order (metadata: :func:`passage_metadata`)."""
    return [
        Document(id=p.id, page_content=p.text, metadata=passage_metadata(p))
        for p in retrieval.passages
    ]


def checked_k(value: Any) -> int | None:
    """``value`` as a ``k``: an int from 1 to :data:`LIMIT_MAX` (100), or None (unset).

    Raises:
        ConfigurationError: anything else (0, a negative, a bool, a float, a string), in
            the words the other options' limits use.
    """
    # bool is an int to Python: k=True would silently mean one document.
    if value is None or (type(value) is int and 1 <= value <= LIMIT_MAX):
        return value
    raise ConfigurationError(
        f"k must be a positive int (at most {LIMIT_MAX}), got {echo_value(value)}",
        hint="k counts the Documents returned; the option limit counts the children searched",
    )


def _collect_options(fields: Collection[str], data: dict[str, Any]) -> dict[str, Any]:
    """Keyword options (``budget=2000``) and an ``options`` mapping, validated once into
    :class:`RetrievalOptions` under ``options``; ``fields``: the retriever's own fields.

    Raises:
        ConfigurationError: an unknown keyword (pydantic would drop it without a word) or
            a bad value.
    """
    data = dict(data)
    if "k" in data:
        data["k"] = checked_k(data["k"])
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
        k: LangChain's number of results: the most ``Document``s one call returns, an
            int from 1 to 100; None (default) returns every passage the pipeline kept.
            The Documents are the passages *after* expansion and packing (a parent, a
            window or a packed span, never a child folded into one), and ``k`` keeps the
            first ``k`` of them in context (rank) order, all within the budget when one
            is set. ``k`` is not ``limit``, the number of children searched and kept
            before expansion. Where ``limit`` is set on neither the retriever nor the
            call, a call with ``k`` searches ``max(k, L)`` children, ``L`` being the
            limit it would search otherwise (the bot's setting, else 10, or 20 with a
            budget), and when their passages number fewer than ``k`` because children
            folded into shared parents, searches once more, 4 times deeper (at most 100
            children). Where ``limit`` is set, it is searched as given and ``k`` only
            caps the result. Fewer than ``k`` come back when the collection or the
            filter holds fewer, or the budget holds fewer. Also given per call
            (``invoke(q, k=3)``, over the retriever's; None there keeps the retriever's).
        on_package_loop: the bot was built on the package's loop thread (``from_bot``);
            ``ainvoke`` then awaits it there.

    Raises:
        ConfigurationError: an unknown option or a bad value (at construction), a bad
            ``k`` (0, a negative, over 100, a bool or not an int; the message names
            ``k``), or, at query time, a bad override or ``k``, or an empty question.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    bot: Chatbot
    options: RetrievalOptions = RetrievalOptions()
    k: int | None = None
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

    def _call(self, query: str, overrides: Mapping[str, Any]) -> Coroutine[Any, Any, Retrieval]:
        """The call's retrieval, not started, its passages cut to ``k`` (see the class
        docstring); the question, options and ``k`` are checked here, in the caller's
        thread, before any model loads.

        Raises:
            ConfigurationError: a bad question, option, value or ``k``.
        """
        check_question(query)  # before a bad option: the order the other surfaces check in
        given = dict(overrides)
        k = checked_k(given.pop("k", None))
        if k is None:
            k = self.k
        fixed = self.options.set_fields()
        if k is None:
            return retrieval(self.bot, query, fixed, given)
        deepen = "limit" not in fixed and given.get("limit") is None
        if deepen:
            # A limit below k could never return k passages.
            searched = call_options(fixed, given).resolve(self.bot.options).limit
            given["limit"] = max(k, searched)
        return self._first(query, fixed, given, k, deepen)

    async def _first(
        self, query: str, fixed: Mapping[str, Any], given: dict[str, Any], k: int, deepen: bool
    ) -> Retrieval:
        """The first ``k`` passages; searched once more, 4 times deeper (at most 100
        children), when the children folded into fewer than ``k`` passages while the
        search still had more to give and the caller left the depth to ``k``."""
        found = await retrieval(self.bot, query, fixed, given)
        depth = given.get("limit", LIMIT_MAX)
        full = len(found.meta.children) >= depth
        if deepen and len(found.passages) < k and full and depth < LIMIT_MAX:
            given = {**given, "limit": min(LIMIT_MAX, 4 * depth)}
            found = await retrieval(self.bot, query, fixed, given)
        found.passages = found.passages[:k]
        found.meta.passages = len(found.passages)
        found.meta.context_chars = sum(len(p.text) for p in found.passages)
        return found

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        return to_documents(run_sync(self._call(query, overrides)))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        return to_documents(await on_loop(self._call(query, overrides), self.on_package_loop))

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
