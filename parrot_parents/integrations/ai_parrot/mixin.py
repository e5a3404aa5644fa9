"""The spec's bot mixin for ai-parrot: its ``get_vector_context`` runs the whole pipeline.

``class HRBot(ParentChildMixin, BasicBot)``: search (hybrid by default), the bot's
reranker on the children, top K, expansion with dedup, packing into a budget. ai-parrot's
``ask``/``invoke`` call ``get_vector_context`` (through ``_build_vector_context``), so
they use it unchanged, with any LLM client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parrot_parents.errors import ConfigurationError
from parrot_parents.integrations.ai_parrot.documents import passage_result
from parrot_parents.integrations.ai_parrot.reranker import FrameworkRerankerAdapter
from parrot_parents.integrations.ai_parrot.searcher import ParrotParentsSearcher
from parrot_parents.integrations.ai_parrot.store import ParrotParentsStore
from parrot_parents.retrieval.options import RetrievalOptions
from parrot_parents.retrieval.passages import ContextStyle, format_context
from parrot_parents.retrieval.pipeline import Retrieval, Retriever
from parrot_parents.stores.parents.abstract import AbstractParentSearcher
from parrot_parents.stores.parents.in_table import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore

__all__ = ["ParentChildMixin"]

#: Retrieval options that are ai-parrot settings of the bot (``expand_to_parent``,
#: ``context_search_limit``, ``rerank_oversample_factor``): refused in
#: ``parrot_parents_options``, where they would never apply.
FRAMEWORK_OWNED = frozenset({"expand_to_parent", "limit", "rerank_candidates"})

#: Context styles: ai-parrot's own (passages joined by a blank line, no labels: sources
#: travel in ``metadata``), or one of :func:`format_context`'s.
Style = ContextStyle | str


class ParentChildMixin:
    """Place before ai-parrot's bot class (``class Bot(ParentChildMixin, BasicBot)``).

    Keyword arguments it takes (the rest go to the bot):

    * ``parrot_parents_store``: the collection (a
      :class:`~parrot_parents.stores.postgres.PgVectorStore` or a
      :class:`~parrot_parents.integrations.ai_parrot.store.ParrotParentsStore`); it
      becomes ``bot.store``. Without it, ``bot.store`` must be a ``ParrotParentsStore``
      (``vector_store_config={"name": "parrot_parents", "table": ...}``).
    * ``parrot_parents_options``: the bot's retrieval options
      (:class:`~parrot_parents.retrieval.options.RetrievalOptions` fields: ``budget`` in
      characters, ``mode``, ``search_mode``...); validated at construction. Not
      ``expand_to_parent``, ``limit`` or ``rerank_candidates``: ai-parrot's own settings
      give those.
    * ``context_style``: ``"plain"`` (default: ai-parrot's convention, passages joined by
      a blank line), ``"headers"`` or ``"tags"`` (:func:`format_context`).

    ai-parrot's own settings keep their meaning: ``expand_to_parent`` (per call, else
    ``search_kwargs["expand_to_parent"]``, else the bot's: ai-parrot's ``ask`` forwards
    no ``expand_to_parent``, so ``ask(q, search_kwargs={"expand_to_parent": False})`` is
    its per-call switch), ``limit`` (else ``context_search_limit``), ``reranker`` with
    ``rerank_oversample_factor`` (candidates = limit x factor), ``return_sources``.
    ``score_threshold`` is the minimum cosine similarity of a child (per call, or the
    bot's ``context_score_threshold`` when given to the constructor; ai-parrot's
    catalogue default is not applied, as it was set for its own store's distances).
    ai-parrot's ``ask`` passes that catalogue default as ``score_threshold`` on every
    call: a per-call value equal to the bot's ``context_score_threshold``, on a bot
    not given one, is that default and is not applied either (to apply the value,
    give ``context_score_threshold`` to the constructor).
    ``search_kwargs`` takes ``filter`` (or ``metadata_filters``) and any retrieval option.
    The parent searcher is the bot's when it is a ``parrot_parents`` one, else the
    in-table reads of the collection.

    Raises:
        ConfigurationError: a bad option or style (at construction); at query time a bad
            question, option or filter, a ``search_type`` other than ``similarity``, or a
            bot without a parrot-parents store. Errors are raised, not folded into an
            empty context: a missing collection raises
            :class:`~parrot_parents.errors.CollectionNotFoundError`.
    """

    store: Any
    reranker: Any
    parent_searcher: Any
    expand_to_parent: bool
    context_search_limit: int
    context_score_threshold: float
    rerank_oversample_factor: int

    def __init__(
        self,
        *args: Any,
        parrot_parents_store: PgVectorStore | ParrotParentsStore | None = None,
        parrot_parents_options: Mapping[str, Any] | None = None,
        context_style: Style = "plain",
        **kwargs: Any,
    ) -> None:
        if context_style not in ("plain", "headers", "tags"):
            raise ConfigurationError(
                f"context_style must be 'plain', 'headers' or 'tags', got {context_style!r}"
            )
        owned = sorted(set(parrot_parents_options or {}) & FRAMEWORK_OWNED)
        if owned:
            raise ConfigurationError(
                f"parrot_parents_options {', '.join(map(repr, owned))} are ai-parrot's own "
                "settings here",
                hint="use the bot's expand_to_parent and context_search_limit, or "
                "rerank_oversample_factor",
            )
        self.parrot_parents_options = RetrievalOptions.from_overrides(
            dict(parrot_parents_options or {})
        )
        if parrot_parents_store is not None and not isinstance(
            parrot_parents_store, PgVectorStore | ParrotParentsStore
        ):
            raise ConfigurationError(
                "parrot_parents_store must be a PgVectorStore or a ParrotParentsStore, got "
                f"{type(parrot_parents_store).__name__}",
                hint="parrot_parents_store=PgVectorStore(table='my_docs')",
            )
        self.context_style = context_style
        self._threshold_given = "context_score_threshold" in kwargs
        super().__init__(*args, **kwargs)
        if parrot_parents_store is not None:
            self.store = (
                parrot_parents_store
                if isinstance(parrot_parents_store, ParrotParentsStore)
                else ParrotParentsStore(parrot_parents_store)
            )

    def _collection(self) -> ParrotParentsStore:
        store = self.store
        if not isinstance(store, ParrotParentsStore):
            raise ConfigurationError(
                f"{type(self).__name__} retrieves from a parrot-parents collection, and its "
                f"store is {type(store).__name__}",
                hint="pass parrot_parents_store=PgVectorStore(table=...) or "
                "vector_store_config={'name': 'parrot_parents', 'table': ...}",
            )
        return store

    def _parent_searcher(self, store: ParrotParentsStore) -> AbstractParentSearcher:
        searcher = self.parent_searcher
        if isinstance(searcher, ParrotParentsSearcher):
            return searcher.searcher
        return InTableParentSearcher(store=store.collection_store)

    def _call_options(
        self, search_kwargs: Mapping[str, Any] | None, limit: int | None, expand: bool | None
    ) -> RetrievalOptions:
        given = dict(search_kwargs or {})
        metadata_filters = given.pop("metadata_filters", None)
        if metadata_filters is not None:
            if "filter" in given:
                raise ConfigurationError("give metadata_filters or filter, not both")
            given["filter"] = metadata_filters
        if "k" in given:
            k = given.pop("k")
            if "limit" in given and given["limit"] != k:
                raise ConfigurationError(f"k={k!r} and limit={given['limit']!r} differ; give one")
            given["limit"] = k
        call = RetrievalOptions.from_overrides(given)
        chosen_limit = call.limit or limit or self.context_search_limit
        # The argument, else search_kwargs' (ai-parrot's ask forwards no expand_to_parent,
        # so its search_kwargs are the per-call route), else the bot's.
        if expand is not None:
            chosen_expand = expand
        elif call.expand_to_parent is not None:
            chosen_expand = call.expand_to_parent
        else:
            chosen_expand = bool(self.expand_to_parent)
        fixed: dict[str, Any] = {"limit": chosen_limit, "expand_to_parent": chosen_expand}
        if self.reranker is not None and call.rerank_candidates is None:
            fixed["rerank_candidates"] = min(
                1000, chosen_limit * max(1, int(self.rerank_oversample_factor))
            )
        return RetrievalOptions.from_overrides(fixed).over(call)

    def _applied_threshold(self, score_threshold: float | None) -> float | None:
        """The minimum child similarity a call applies (``None``: none), as the class says."""
        if self._threshold_given:
            return self.context_score_threshold if score_threshold is None else score_threshold
        if score_threshold == self.context_score_threshold:
            return None  # ai-parrot's ask forwarding its catalogue default
        return score_threshold

    async def parrot_parents_retrieve(
        self,
        question: str,
        *,
        search_kwargs: Mapping[str, Any] | None = None,
        limit: int | None = None,
        score_threshold: float | None = None,
        expand_to_parent: bool | None = None,
    ) -> Retrieval:
        """The pipeline's :class:`~parrot_parents.retrieval.pipeline.Retrieval` (passages
        and typed ``meta``) with this bot's settings; arguments as :meth:`get_vector_context`.

        Raises:
            ConfigurationError, CollectionNotFoundError, ModelMismatchError, StoreError:
                as the class says.
        """
        store = self._collection()
        options = self._call_options(search_kwargs, limit, expand_to_parent)
        threshold = self._applied_threshold(score_threshold)
        reranker = None if self.reranker is None else FrameworkRerankerAdapter(self.reranker)
        retriever = Retriever(
            store.collection_store,
            self._parent_searcher(store),
            reranker,
            defaults=self.parrot_parents_options.over(store.defaults),
            scope=store.scope,
            min_similarity=threshold,
        )
        return await retriever.retrieve(question, options)

    async def get_vector_context(
        self,
        question: str,
        search_type: str = "similarity",
        search_kwargs: dict[str, Any] | None = None,
        metric_type: str | None = "COSINE",
        limit: int | None = 10,
        score_threshold: float | None = None,
        ensemble_config: dict[str, Any] | None = None,
        return_sources: bool = False,
        expand_to_parent: bool | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """ai-parrot's ``get_vector_context``, answered by the parrot-parents pipeline.

        Returns:
            ``(context, metadata)``: the passages in context order (``context_style``);
            ``metadata`` with ai-parrot's keys (``search_type``, ``score_threshold``: the
            minimum similarity applied, ``None`` for none, ``metric_type``,
            ``search_results_count``, ``sources``, ``context_sources`` and, with
            ``return_sources``, ``source_documents``) and ``parrot_parents``: the
            pipeline's ``meta`` (children, parents, fallbacks, packing, timings).

        Raises:
            as the class says.
        """
        if search_type != "similarity":
            raise ConfigurationError(
                f"search_type {search_type!r} is not served by parrot-parents; use 'similarity'",
                hint="choose the branches with search_kwargs={'search_mode': "
                "'dense'|'lexical'|'hybrid'}",
            )
        if ensemble_config is not None:
            raise ConfigurationError("ensemble_config is not served by parrot-parents")
        if metric_type is not None and str(metric_type).upper() != "COSINE":
            raise ConfigurationError(f"metric_type {metric_type!r} is not supported: cosine only")
        retrieval = await self.parrot_parents_retrieve(
            question,
            search_kwargs=search_kwargs,
            limit=limit,
            score_threshold=score_threshold,
            expand_to_parent=expand_to_parent,
        )
        passages = retrieval.passages
        if self.context_style == "plain":
            context = "\n\n".join(p.text for p in passages)
        else:
            style: ContextStyle = "tags" if self.context_style == "tags" else "headers"
            context = format_context(passages, style)
        sources = [p.source or p.document_id or p.id for p in passages]
        metadata: dict[str, Any] = {
            "search_type": search_type,
            "score_threshold": self._applied_threshold(score_threshold),
            "metric_type": metric_type,
            "search_results_count": len(passages),
            "sources": sources,
            "context_sources": sources,
            "parrot_parents": retrieval.meta.to_dict(),
        }
        if return_sources and passages:
            results = [passage_result(p) for p in passages]
            documents = self._extract_sources_documents(results)  # type: ignore[attr-defined]
            metadata["source_documents"] = [d.to_dict() for d in documents]
            metadata["context_sources"] = [d.filename for d in documents]
        return context, metadata
