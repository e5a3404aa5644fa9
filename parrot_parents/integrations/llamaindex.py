"""A llama-index-core retriever over the parrot-parents pipeline (extra ``[llamaindex]``).

``ParentChildLlamaRetriever`` returns one ``NodeWithScore`` per passage, in context order,
with the metadata of :func:`~parrot_parents.integrations.common.passage_metadata`
(offsets in characters) kept on the node but out of the text an LLM or an embedding model
is given, so that a query engine hands the LLM no more than the budget. Usage, how to show
some keys, and the loops ``retrieve``/``aretrieve`` run on: docs/integrations.md
("LlamaIndex").
"""

from __future__ import annotations

from collections.abc import Collection
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
from parrot_parents.errors import ConfigurationError
from parrot_parents.integrations.common import (
    METADATA_KEYS,
    call_options,
    on_loop,
    passage_metadata,
    retrieval,
)
from parrot_parents.retrieval.pipeline import Retrieval
from parrot_parents.sync import run_sync

__all__ = ["ParentChildLlamaRetriever", "checked_keys", "to_nodes"]


def to_nodes(retrieval: Retrieval, shown: Collection[str] = ()) -> list[NodeWithScore]:
    """One ``NodeWithScore`` per passage, in context order; ``score`` is the best hit's
    search score (:attr:`Passage.score`: fused RRF value in hybrid mode, cosine similarity
    in dense mode; None when unknown).

    Every metadata key but those in ``shown`` (default none) is in the node's
    ``excluded_llm_metadata_keys`` and ``excluded_embed_metadata_keys``: LlamaIndex
    otherwise writes each key as a ``key: value`` line above the passage in what the LLM
    reads (``get_content(MetadataMode.LLM)``), beyond the budget. ``node.metadata`` keeps
    them all.
    """
    nodes = []
    for p in retrieval.passages:
        metadata = passage_metadata(p)
        hidden = [k for k in metadata if k not in shown]
        node = TextNode(
            id_=p.id,
            text=p.text,
            metadata=metadata,
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=list(hidden),
        )
        nodes.append(NodeWithScore(node=node, score=p.score))
    return nodes


def checked_keys(keys: Any) -> tuple[str, ...]:
    """``keys`` as the metadata keys to show: names of :data:`METADATA_KEYS`.

    Raises:
        ConfigurationError: not a collection of names (a lone string too), or a name not
            among the metadata keys (the message lists them).
    """
    if isinstance(keys, str | bytes) or not isinstance(keys, Collection):
        raise ConfigurationError(
            f"llm_metadata_keys must be a list of metadata keys, got {keys!r}",
            hint='e.g. llm_metadata_keys=["source"]',
        )
    unknown = [k for k in keys if k not in METADATA_KEYS]
    if unknown:
        raise ConfigurationError(
            f"llm_metadata_keys: unknown key {unknown[0]!r} (known: {', '.join(METADATA_KEYS)})"
        )
    return tuple(keys)


class ParentChildLlamaRetriever(BaseRetriever):
    """LlamaIndex retriever returning parent-child passages.

    Args:
        bot: the :class:`Chatbot` that runs the pipeline.
        on_package_loop: the bot was built on the package's loop thread (``from_bot``).
        llm_metadata_keys: the metadata keys a query engine shows the LLM and an
            embedding model beside each passage, as ``key: value`` lines above its text.
            Default none: they read the passage text alone, so a query engine hands the
            LLM at most ``budget`` characters of context. Each key shown adds its line
            to every passage, beyond the budget. Every key stays in ``node.metadata``.
        **options: the per-call options
            (:class:`~parrot_parents.retrieval.options.RetrievalOptions`).

    Raises:
        ConfigurationError: an unknown option or a bad value, or an unknown metadata key
            (at construction).
    """

    def __init__(
        self,
        bot: Chatbot,
        *,
        on_package_loop: bool = False,
        llm_metadata_keys: Collection[str] = (),
        **options: Any,
    ) -> None:
        super().__init__()
        call_options(options, {})  # validates: unknown names and bad values raise
        self.llm_metadata_keys = checked_keys(llm_metadata_keys)
        self.bot = bot
        self.options = dict(options)
        self.on_package_loop = on_package_loop

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = run_sync(retrieval(self.bot, query_bundle.query_str, self.options, {}))
        return to_nodes(found, self.llm_metadata_keys)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        coro = retrieval(self.bot, query_bundle.query_str, self.options, {})
        return to_nodes(await on_loop(coro, self.on_package_loop), self.llm_metadata_keys)

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
