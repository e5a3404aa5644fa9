"""The query pipeline: search children, rerank, keep the top K, expand, pack.

The order is fixed (spec FEAT-128; docs/architecture.md, "Where each stage of a query
lives"). A failing optional stage (reranker, parent fetch) degrades to the children and is
recorded in ``meta.fallbacks``; only I/O is guarded: an error in pure code raises.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from parrot_parents.embeddings.protocols import LoadTimed
from parrot_parents.errors import ConfigurationError, LexicalIndexMissingError, StoreError
from parrot_parents.retrieval.expanders import expander_for, plan_for
from parrot_parents.retrieval.meta import ChildScore, Fallback, RetrievalMeta, describe_error
from parrot_parents.retrieval.options import ResolvedOptions, RetrievalOptions
from parrot_parents.retrieval.packing import pack
from parrot_parents.retrieval.passages import ContextStyle, Hit, Passage, format_context
from parrot_parents.retrieval.scope import scoped_filter, validate_scope
from parrot_parents.stores.context import Context, ContextPlan, scope_key
from parrot_parents.stores.parents.abstract import AbstractParentSearcher, ChildReads
from parrot_parents.stores.parents.prefetched import PrefetchedParentSearcher
from parrot_parents.stores.parents.scoped import ScopedParentSearcher, parents_holding_outside
from parrot_parents.stores.protocols import (
    ContextSearch,
    Embedded,
    LexicalRanking,
    ModelChecked,
    ScopeCheck,
)
from parrot_parents.stores.questions import check_question
from parrot_parents.stores.records.markers import is_parent
from parrot_parents.stores.results import SearchResults
from parrot_parents.stores.search_options import PRF, Fusion

if TYPE_CHECKING:
    from parrot_parents.rerankers.abstract import AbstractReranker
    from parrot_parents.stores.abstract import AbstractStore
    from parrot_parents.stores.results import SearchResult

__all__ = ["Retrieval", "Retriever"]


@dataclass
class Retrieval:
    """What :meth:`Retriever.retrieve` found: passages in order, and ``meta``."""

    passages: list[Passage]
    meta: RetrievalMeta

    @property
    def context(self) -> str:
        """The passages under source headers (:func:`format_context`, ``headers`` style)."""
        return format_context(self.passages)

    def format(self, style: ContextStyle = "headers", *, citations: bool = False) -> str:
        """The passages as a context string in ``style``; ``citations`` adds each passage's
        section and pages (see :func:`format_context`)."""
        return format_context(self.passages, style, citations=citations)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


@dataclass
class Retriever:
    """Runs the pipeline over one store.

    Attributes:
        store: the store searched for children.
        parent_searcher: every read expansion needs; required when expanding.
        reranker: optional cross-encoder applied to the children.
        defaults: the options used where a call sets none (then
            :data:`~parrot_parents.retrieval.options.DEFAULTS`).
        scope: a metadata filter every search holds to; a call's filter narrows it
            (:mod:`parrot_parents.retrieval.scope`). None (default): no scope.
        min_similarity: drop the children whose cosine similarity to the question (the
            dense branch's score, in [-1, 1]) is below it, before reranking and top K;
            a child the dense branch did not score (a lexical-only hit in ``hybrid``
            mode, every hit in ``lexical``) is kept. None (default): no threshold. For
            frameworks whose bots carry a score threshold (ai-parrot); the count dropped
            is in ``meta.notes``.

    Raises:
        ConfigurationError: a bad ``scope`` or ``min_similarity`` (checked at
            construction).
    """

    store: AbstractStore
    parent_searcher: AbstractParentSearcher | None = None
    reranker: AbstractReranker | None = None
    defaults: RetrievalOptions = field(default_factory=RetrievalOptions)
    scope: dict[str, Any] | None = None
    min_similarity: float | None = None

    def __post_init__(self) -> None:
        self.scope = validate_scope(self.scope)
        value = self.min_similarity
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not -1.0 <= float(value) <= 1.0
        ):
            raise ConfigurationError(
                f"min_similarity must be a number in [-1, 1] or None, got {value!r}",
                hint="it is a cosine similarity: higher is closer",
            )

    async def retrieve(self, question: str, options: RetrievalOptions | None = None) -> Retrieval:
        """Retrieve passages for ``question``.

        Args:
            question: the user's question (non-empty).
            options: per-call options; unset ones come from :attr:`defaults`.

        Returns:
            :class:`Retrieval` with the passages in order and a :class:`RetrievalMeta`.

        Raises:
            ConfigurationError: a bad question (empty, blank, over 4000 characters, a NUL
                or a lone surrogate: :mod:`parrot_parents.stores.questions`), or expansion
                without a parent searcher.
            ModelMismatchError: the store's model is not the collection's, on any path
                that embeds the question (a dense or hybrid search, sentence trimming).
            StoreError: the search itself failed (there is nothing to degrade to).
        """
        check_question(question)  # the rules of every surface, before any model loads
        call = options or RetrievalOptions()
        opts = call.resolve(self.defaults)
        if self.scope is not None:
            opts = dataclasses.replace(opts, filter=scoped_filter(self.scope, opts.filter))
        if opts.expand_to_parent and self.parent_searcher is None:
            raise ConfigurationError(
                "expand_to_parent=True needs a parent searcher",
                hint="pass parent_searcher=InTableParentSearcher(store=store) to the bot",
            )
        started = time.perf_counter()
        model = self.store.embedding if isinstance(self.store, Embedded) else None
        unloaded = isinstance(model, LoadTimed) and model.load_ms is None
        meta = RetrievalMeta(
            question=question,
            expand_to_parent=opts.expand_to_parent,
            limit=opts.limit,
            mode=str(opts.mode),
            search_mode=opts.search_mode,
        )
        if self.scope is not None:
            meta.scope = {"filter": self.scope, "withheld": [], "partial_parents": []}
        t = time.perf_counter()
        fusion = self._fusion(opts)
        results, context = await self._search(question, opts, fusion, meta)
        meta.timings_ms["search"] = _ms(t)
        plan = results.filter_plan if isinstance(results, SearchResults) else None
        meta.filter_plan = None if plan is None else plan.to_dict()
        kept_only = plan is None or plan.ranks_kept_rows
        meta.lexical = self._lexical_ranking(opts, fusion, meta, kept_only)
        if meta.lexical is not None and results and results[0].lexical_bounded is not None:
            meta.lexical["candidates"] = "bounded" if results[0].lexical_bounded else "exact"
        if results and results[0].lexical_expansion is not None:
            meta.prf = {"terms": list(results[0].lexical_expansion)}
        elif opts.prf and meta.search_mode != "dense":
            meta.prf = {"terms": []}  # it ran and found nothing to feed back
        hits = self._similar_enough([Hit.from_result(r, i) for i, r in enumerate(results)], meta)
        hits = await self._whole_parents(hits, meta)
        meta.candidates = len(hits)
        hits = await self._rerank(question, hits, opts.limit, meta)
        meta.children = [ChildScore.from_hit(h) for h in hits]
        meta.notes.extend(self._notes(call, opts))

        expanded = await self._expand(hits, opts, meta, context) if opts.expand_to_parent else None
        # The children themselves when not expanding, or when expansion degraded.
        passages = expanded or [Passage.from_hit(h) for h in hits]
        if opts.budget is not None:
            t = time.perf_counter()
            query = await self._query_vector(question, hits) if opts.trim else None
            packed = pack(passages, hits, opts.budget, trim=opts.trim, query=query)
            passages = packed.passages
            meta.packing = packed.meta()
            meta.timings_ms["pack"] = _ms(t)
        meta.passages = len(passages)
        meta.context_chars = sum(len(p.text) for p in passages)
        if unloaded and isinstance(model, LoadTimed) and model.load_ms is not None:
            # The first call that embeds waits for the model: say so, or its stage
            # (``search``, or ``pack`` trimming sentences) looks seconds slow.
            meta.timings_ms["model_load"] = model.load_ms
        meta.timings_ms["total"] = _ms(started)
        return Retrieval(passages, meta)

    def _similar_enough(self, hits: list[Hit], meta: RetrievalMeta) -> list[Hit]:
        """``hits`` less those the dense branch scored below :attr:`min_similarity`."""
        bound = self.min_similarity
        if bound is None:
            return hits
        kept = [h for h in hits if h.dense_score is None or h.dense_score >= bound]
        if len(kept) == len(hits):
            return hits
        meta.notes.append(f"{len(hits) - len(kept)} children below similarity {bound} left out")
        return [dataclasses.replace(h, rank=rank) for rank, h in enumerate(kept)]

    async def _query_vector(self, question: str, hits: Sequence[Hit]) -> np.ndarray | None:
        """The question's unit vector for sentence trimming, made as the store's searches
        make it (:meth:`~parrot_parents.stores.protocols.ModelChecked.embed_question`: the
        collection's model is checked first, and the default embedding keeps its last
        questions' vectors); None when no hit has stored sentences, or the store cannot
        check its model (its stored sentences could not be compared with the question).

        Raises:
            ModelMismatchError: the store's model is not the collection's.
        """
        store = self.store
        if not any(h.stored_sentences is not None for h in hits):
            return None
        if not issubclass(type(store), ModelChecked):
            return None
        checked = cast(ModelChecked, store)
        vector = np.asarray(await checked.embed_question(question), dtype=np.float32)
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0 else None

    def _lexical_ranking(
        self, opts: ResolvedOptions, fusion: Fusion, meta: RetrievalMeta, exact_filter: bool
    ) -> dict[str, str] | None:
        """``meta.lexical``: what ranked the lexical branch, when one ran and the store says."""
        store = self.store
        if meta.search_mode == "dense" or not issubclass(type(store), LexicalRanking):
            return None
        ranking = cast(LexicalRanking, store)
        backend, why = ranking.lexical_ranking(opts.filter, fusion, exact_filter)
        return {"backend": backend} if why is None else {"backend": backend, "why": why}

    @staticmethod
    def _fusion(opts: ResolvedOptions) -> Fusion:
        prf = PRF() if opts.prf and opts.search_mode != "dense" else None
        return Fusion(opts.rrf_k, opts.dense_weight, opts.lexical_weight, prf=prf)

    def _joined(self, opts: ResolvedOptions) -> tuple[ContextSearch, ContextPlan] | None:
        """The store and the reads to join to its search, when the parent searcher reads
        this store's own table and the store can join them (one round trip for search
        and expansion); else None."""
        searcher = self.parent_searcher
        if not opts.expand_to_parent or searcher is None:
            return None
        store = self.store
        # Asked of the store's class, whose answer ABC caches: on Python 3.11 isinstance
        # against a protocol walks its members again, tens of microseconds a query.
        if not searcher.reads_from(store) or not issubclass(type(store), ContextSearch):
            return None
        plan = plan_for(opts.mode)
        if self.scope is not None:
            # A parent is handed over only when every child of it lies in the scope: its
            # children read with the search, each row judged against the scope there.
            plan = dataclasses.replace(plan, children=True, scope=scope_key(self.scope))
        return cast(ContextSearch, store), plan

    async def _search(
        self, question: str, opts: ResolvedOptions, fusion: Fusion, meta: RetrievalMeta
    ) -> tuple[list[SearchResult], Context | None]:
        """Search the children (with the expansion's reads joined when possible); a
        collection without a lexical index degrades to dense."""
        limit = opts.candidates(self.reranker is not None)
        # After a reranker the context is read for the kept hits (see _expand).
        joined = None if self.reranker is not None else self._joined(opts)
        try:
            if joined is not None:
                store, plan = joined
                try:
                    return await store.search_with_context(
                        question,
                        plan,
                        limit=limit,
                        filter=opts.filter,
                        search_mode=opts.search_mode,
                        fusion=fusion,
                    )
                except StoreError as exc:
                    if exc.unavailable:
                        raise
                    # The joined read failed where a plain search may not: say so, and
                    # search plainly (expansion then reads on its own, and may degrade).
                    meta.fallbacks.append(
                        Fallback(
                            "context",
                            describe_error(exc),
                            "searched without the joined parent read",
                        )
                    )
            results = await self.store.similarity_search(
                question,
                limit=limit,
                filter=opts.filter,
                search_mode=opts.search_mode,
                fusion=fusion,
            )
            return results, None
        except LexicalIndexMissingError as exc:
            meta.search_mode = "dense"
            meta.fallbacks.append(
                Fallback("lexical", describe_error(exc), "searched the dense index only")
            )
            results = await self.store.similarity_search(question, limit=limit, filter=opts.filter)
            return results, None

    def _notes(self, call: RetrievalOptions, opts: ResolvedOptions) -> list[str]:
        """Options given for this call that have no effect, so nobody wonders why."""
        notes = []
        if call.mode is not None and not opts.expand_to_parent:
            notes.append(f"mode {str(call.mode)!r} ignored: expansion is off")
        if call.rerank_candidates is not None and self.reranker is None:
            notes.append("rerank_candidates ignored: the bot has no reranker")
        fusion_set = [
            k for k in ("rrf_k", "dense_weight", "lexical_weight") if getattr(call, k) is not None
        ]
        if fusion_set and opts.search_mode != "hybrid":
            notes.append(f"{', '.join(fusion_set)} ignored: search_mode is {opts.search_mode!r}")
        if call.prf and opts.search_mode == "dense":
            notes.append("prf ignored: search_mode is 'dense'")
        return notes

    async def _rerank(
        self, question: str, hits: list[Hit], k: int, meta: RetrievalMeta
    ) -> list[Hit]:
        """Rerank the children and keep the top ``k``; search order on any failure."""
        if self.reranker is None or not hits:
            return hits[:k]
        t = time.perf_counter()
        try:
            ranked = await self.reranker.rerank(question, [h.to_document() for h in hits], top_n=k)
            if any(math.isnan(r.score) for r in ranked):
                raise ValueError("the reranker returned NaN scores")
        except Exception as exc:
            meta.reranked = False
            meta.fallbacks.append(
                Fallback("rerank", describe_error(exc), f"kept the search order, truncated to {k}")
            )
            return hits[:k]
        finally:
            meta.timings_ms["rerank"] = _ms(t)
        meta.reranked = True
        return [
            dataclasses.replace(hits[r.original_rank], rank=rank, rerank_score=float(r.score))
            for rank, r in enumerate(ranked)
        ]

    async def _whole_parents(self, hits: list[Hit], meta: RetrievalMeta) -> list[Hit]:
        """``hits`` less the parents among them (reached through an indexed row, such as a
        summary's) that hold a child outside the scope: a parent's text holds its
        children's, so it is dropped as expansion holds such a parent back, and listed in
        ``meta.scope["partial_parents"]``. Without a scope, or a parent hit, ``hits``."""
        parents = [h.id for h in hits if is_parent(h.metadata)]
        if self.scope is None or meta.scope is None or not parents:
            return hits
        store = self.store
        if issubclass(type(store), ScopeCheck) and isinstance(store, ChildReads):
            partial, _ = await parents_holding_outside(
                store.fetch_children, cast(ScopeCheck, store), self.scope, parents
            )
        else:
            # Their children cannot be judged against the scope: none is handed over.
            partial = parents
            meta.fallbacks.append(
                Fallback(
                    "scope",
                    f"{type(store).__name__} cannot check a parent's children against a scope",
                    f"left out {len(parents)} parent hit(s)",
                )
            )
        if not partial:
            return hits
        listed = meta.scope["partial_parents"]
        listed.extend(p for p in partial if p not in listed)
        kept = [h for h in hits if h.id not in set(partial)]
        return [dataclasses.replace(h, rank=rank) for rank, h in enumerate(kept)]

    def _scoped(
        self, searcher: AbstractParentSearcher, context: Context | None
    ) -> AbstractParentSearcher | None:
        """``searcher`` confined to the scope (itself without one), with the rows
        ``context`` judged against it; None when the store cannot judge rows against
        the scope."""
        if self.scope is None:
            return searcher
        if not issubclass(type(self.store), ScopeCheck):
            return None
        judged = None
        if context is not None and context.plan.scope == scope_key(self.scope):
            judged = context.judged
        return ScopedParentSearcher(searcher, cast(ScopeCheck, self.store), self.scope, judged)

    async def _expand(
        self,
        hits: list[Hit],
        opts: ResolvedOptions,
        meta: RetrievalMeta,
        context: Context | None = None,
    ) -> list[Passage] | None:
        """Widen the hits per mode; None (keep the children) when a read fails.

        ``context``: the expansion's reads, joined to the search. Without it (after a
        reranker), a searcher over the store's own table still reads everything in one
        statement (``fetch_context``)."""
        assert self.parent_searcher is not None
        expander = expander_for(opts.mode)
        t = time.perf_counter()
        searcher: AbstractParentSearcher = self.parent_searcher
        try:
            joined = self._joined(opts) if context is None else None
            if joined is not None and hits:
                store, plan = joined
                context = await store.fetch_context([(h.id, h.metadata) for h in hits], plan)
            if context is not None:
                searcher = PrefetchedParentSearcher(context, searcher)
            scoped = self._scoped(searcher, context)
            if scoped is None:
                # Rows expansion would read cannot be judged against the scope: nothing
                # is read that might lie outside it.
                meta.fallbacks.append(
                    Fallback(
                        "scope",
                        f"{type(self.store).__name__} cannot check rows against a scope",
                        "returned the children unexpanded",
                    )
                )
                meta.timings_ms["expand"] = _ms(t)
                return None
            fetched = await expander.fetch(hits, scoped)
        except Exception as exc:  # only I/O is guarded: a failed read degrades
            meta.fallbacks.append(
                Fallback("parent_fetch", describe_error(exc), "returned the children unexpanded")
            )
            meta.timings_ms["expand"] = _ms(t)
            return None
        if isinstance(scoped, ScopedParentSearcher) and meta.scope is not None:
            meta.scope["withheld"] = list(scoped.withheld)
            listed = meta.scope["partial_parents"]
            listed.extend(p for p in scoped.partial if p not in listed)
        expansion = expander.expand(hits, fetched, packed=opts.budget is not None)
        meta.expanded = expansion.expanded
        if expansion.folded is not None:
            meta.parents = list(expansion.folded)
            meta.folded = expansion.folded
        meta.auto_merge = expansion.auto_merge
        meta.windows = expansion.windows
        # A parent held back by the scope is not missing: it exists, outside the scope or
        # holding a child outside it.
        withheld = (
            {*meta.scope["withheld"], *meta.scope["partial_parents"]}
            if meta.scope is not None
            else set()
        )
        expansion.missing = [p for p in expansion.missing if p not in withheld]
        if expansion.missing:
            meta.missing_parents = expansion.missing
            meta.fallbacks.append(
                Fallback(
                    "parent_fetch",
                    f"{len(expansion.missing)} parent(s) not found",
                    "kept all of their children",
                    parent_ids=expansion.missing,
                )
            )
        meta.timings_ms["expand"] = _ms(t)
        return expansion.passages
