"""A llama-index-core retriever over the parrot-parents pipeline (extra ``[llamaindex]``).

``ParentChildLlamaRetriever`` returns one ``NodeWithScore`` per passage, in context order,
with the metadata of :func:`~parrot_parents.integrations.common.passage_metadata`
(offsets in characters). Usage and the loops ``retrieve``/``aretrieve`` run on:
docs/integrations.md ("LlamaIndex").
"""

from __future__ import annotations

from typing import Any

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "parrot_parents.integrations.llamaindex needs llama-index-core: "
        "pip install 'parrot-parents[llamaindex]'"
    ) from exc

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.integrations.common import (
    call_options,
    on_loop,
    passage_metadata,
    retrieval,
)
from parrot_parents.retrieval.pipeline import Retrieval
from parrot_parents.sync import run_sync

__all__ = ["ParentChildLlamaRetriever", "to_nodes"]


def to_nodes(retrieval: Retrieval) -> list[NodeWithScore]:
    """One ``NodeWithScore`` per passage, in context order; ``score`` is the best hit's
    search score (:attr:`Passage.score`: fused RRF value in hybrid mode, cosine similarity
    in dense mode; None when unknown)."""
    return [
        NodeWithScore(
            node=TextNode(id_=p.id, text=p.text, metadata=passage_metadata(p)),
            score=p.score,
        )
        for p in retrieval.passages
    ]


class ParentChildLlamaRetriever(BaseRetriever):
    """LlamaIndex retriever returning parent-child passages.

    Args:
        bot: the :class:`Chatbot` that runs the pipeline.
        on_package_loop: the bot was built on the package's loop thread (``from_bot``).
        **options: the per-call options
            (:class:`~parrot_parents.retrieval.options.RetrievalOptions`).

    Raises:
        ConfigurationError: an unknown option or a bad value (at construction).
    """

    def __init__(self, bot: Chatbot, *, on_package_loop: bool = False, **options: Any) -> None:
        super().__init__()
        call_options(options, {})  # validates: unknown names and bad values raise
        self.bot = bot
        self.options = dict(options)
        self.on_package_loop = on_package_loop

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(run_sync(retrieval(self.bot, query_bundle.query_str, self.options, {})))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        coro = retrieval(self.bot, query_bundle.query_str, self.options, {})
        return to_nodes(await on_loop(coro, self.on_package_loop))

    @classmethod
    def from_bot(
        cls, name: str, *, dsn: str | None = None, embedding: Any = None, **options: Any
    ) -> ParentChildLlamaRetriever:
        """A retriever over the bot ``name`` of the ``bots`` table (loaded on the package's
        loop thread). Close it with :meth:`close`.

        Raises:
            BotNotFoundError, BotConfigError, StoreError: as ``Chatbot.from_database``.
        """
        bot = run_sync(Chatbot.from_database(name, dsn=dsn, embedding=embedding))
        return cls(bot, on_package_loop=True, **options)

    def close(self) -> None:
        """Release the bot (and its store when it owns it); for :meth:`from_bot`."""
        run_sync(self.bot.close())
