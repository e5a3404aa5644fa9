"""The query pipeline of a bot: search children, rerank, keep the top K, expand.

The order is fixed (spec FEAT-128, "Composition with the cross-encoder reranker"):

1. ``similarity_search`` over children (parents excluded);
2. the reranker, when configured, scores the *children* and the top ``limit`` are kept;
3. parent expansion folds the kept children into their parents (dedup).

A failing optional stage (reranker, parent fetch) degrades to the children and is
recorded in ``meta["fallbacks"]``; hits are never dropped silently.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from parrot_parents.bots.context import format_context
from parrot_parents.bots.expansion import expand_hits, group_by_parent
from parrot_parents.bots.modes import ExpansionMode, parse_mode
from parrot_parents.bots.packing import pack
from parrot_parents.bots.passages import Hit, Passage
from parrot_parents.bots.widening import auto_merge_passages, window_passages
from parrot_parents.errors import ConfigurationError

if TYPE_CHECKING:
    from parrot_parents.rerankers.abstract import AbstractReranker
    from parrot_parents.stores.abstract import AbstractStore
    from parrot_parents.stores.parents.abstract import AbstractParentSearcher

__all__ = ["Retrieval", "VectorContextMixin", "resolve_override"]


def resolve_override(per_call: Any, configured: Any, default: Any) -> Any:
    """Resolution order of every setting: per-call value, then the bot's, then the default."""
    if per_call is not None:
        return per_call
    if configured is not None:
        return configured
    return default


@dataclass
class Retrieval:
    """What :meth:`VectorContextMixin.retrieve` found: passages in order, and ``meta``."""

    passages: list[Passage]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def context(self) -> str:
        return format_context(self.passages)


def describe_error(exc: BaseException) -> str:
    """``"Type: first line"`` of an error, without SQL text (a database error gives only
    its class and the driver's class: statements and parameters stay in the logs)."""
    from sqlalchemy.exc import SQLAlchemyError

    if isinstance(exc, SQLAlchemyError):
        orig = getattr(exc, "orig", None)
        return type(exc).__name__ + (f" ({type(orig).__name__})" if orig is not None else "")
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first[:300]}"


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


def _check_limit(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be a positive int, got {value!r}")
    return value


class VectorContextMixin:
    """Adds :meth:`get_vector_context` to a bot.

    The bot provides ``store`` (an :class:`AbstractStore`), ``parent_searcher``
    (:class:`AbstractParentSearcher` or None), ``reranker`` (:class:`AbstractReranker`
    or None), ``expand_to_parent`` (bool), ``context_search_limit`` (int) and
    ``rerank_candidates`` (int or None: children searched before reranking, default
    4 x limit), ``context_budget`` (characters or None) and ``expansion_mode``.
    """

    store: AbstractStore | None
    parent_searcher: AbstractParentSearcher | None
    reranker: AbstractReranker | None
    expand_to_parent: bool
    context_search_limit: int
    rerank_candidates: int | None
    context_budget: int | None
    expansion_mode: str

    async def get_vector_context(
        self,
        question: str,
        *,
        expand_to_parent: bool | None = None,
        limit: int | None = None,
        filter: dict[str, Any] | None = None,
        rerank_candidates: int | None = None,
        budget: int | None = None,
        mode: str | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """Retrieve context for ``question``.

        Args:
            question: the user's question.
            expand_to_parent: per-call override; resolution is this argument, then the
                bot's ``expand_to_parent``, then False.
            limit: children kept after search/rerank (default: the bot's
                ``context_search_limit``).
            filter: ``cmetadata`` containment filter passed to the store.
            rerank_candidates: children searched before reranking (default 4 x limit).
            budget: context budget in characters of passage text (default: the bot's
                ``context_budget``; None means no budget). See
                :mod:`parrot_parents.bots.packing`.
            mode: expansion mode, ``parent`` | ``auto_merge:T`` | ``window:N`` (default:
                the bot's ``expansion_mode``, else ``parent``); used when expanding.

        Returns:
            ``(context, meta)``: the passages joined with source headers, and a dict with
            ``children`` (ids, scores, ranks, parent_id, document_id and character offsets
            start_index / end_index), ``parents``, ``folded``, ``expanded``,
            ``fallbacks``, ``context_chars``, ``timings_ms`` and ``passages``.

        Raises:
            ConfigurationError: expansion requested without a parent searcher, or a bad
                ``limit``.
        """
        retrieval = await self.retrieve(
            question,
            expand_to_parent=expand_to_parent,
            limit=limit,
            filter=filter,
            rerank_candidates=rerank_candidates,
            budget=budget,
            mode=mode,
        )
        return retrieval.context, retrieval.meta

    async def retrieve(
        self,
        question: str,
        *,
        expand_to_parent: bool | None = None,
        limit: int | None = None,
        filter: dict[str, Any] | None = None,
        rerank_candidates: int | None = None,
        budget: int | None = None,
        mode: str | None = None,
    ) -> Retrieval:
        """Run the pipeline and return structured passages (see :meth:`get_vector_context`)."""
        if not isinstance(question, str) or not question.strip():
            raise ConfigurationError(f"question must be a non-empty string, got {question!r}")
        expand = bool(resolve_override(expand_to_parent, self.expand_to_parent, False))
        if expand and self.parent_searcher is None:
            raise ConfigurationError(
                "expand_to_parent=True needs a parent searcher",
                hint="pass parent_searcher=InTableParentSearcher(store=store) to the bot",
            )
        if self.store is None:
            raise ConfigurationError("the bot has no store", hint="pass store=PgVectorStore(...)")
        k = _check_limit(resolve_override(limit, self.context_search_limit, 10), "limit")
        chosen_mode = parse_mode(resolve_override(mode, self.expansion_mode, "parent"))
        chars = resolve_override(budget, self.context_budget, None)
        if chars is not None:
            chars = _check_limit(chars, "budget")
        candidates = k
        if self.reranker is not None:
            candidates = _check_limit(
                resolve_override(rerank_candidates, self.rerank_candidates, 4 * k),
                "rerank_candidates",
            )
            candidates = max(candidates, k)
        started = time.perf_counter()
        meta: dict[str, Any] = {
            "question": question,
            "expand_to_parent": expand,
            "expanded": False,
            "limit": k,
            "mode": str(chosen_mode),
            "fallbacks": [],
            "timings_ms": {},
        }

        t = time.perf_counter()
        results = await self.store.similarity_search(question, limit=candidates, filter=filter)
        meta["timings_ms"]["search"] = _ms(t)
        hits = [Hit.from_result(r, i) for i, r in enumerate(results)]
        meta["candidates"] = len(hits)

        hits = await self._rerank_stage(question, hits, k, meta)
        meta["children"] = [
            {
                "id": h.id,
                "score": h.score,
                "rerank_score": h.rerank_score,
                "rank": h.rank,
                "parent_id": h.parent_id,
                # Where the hit lies in its source (characters): the inspector highlights it.
                "document_id": h.document_id,
                "start_index": h.start_index,
                "end_index": h.end_index,
            }
            for h in hits
        ]

        passages = [Passage.from_hit(h) for h in hits]
        notes = []
        if mode is not None and not expand:
            notes.append(f"mode {mode!r} ignored: expansion is off")
        if rerank_candidates is not None and self.reranker is None:
            notes.append("rerank_candidates ignored: the bot has no reranker")
        if notes:
            meta["notes"] = notes
        if expand:
            passages = (
                await self._expand_stage(hits, chosen_mode, meta, packed=chars is not None)
                or passages
            )
        if chars is not None:
            t = time.perf_counter()
            packed = pack(passages, hits, chars)
            passages = packed.passages
            meta["packing"] = packed.meta()
            meta["timings_ms"]["pack"] = _ms(t)
        meta["passages"] = len(passages)
        meta["context_chars"] = sum(len(p.text) for p in passages)
        meta["timings_ms"]["total"] = _ms(started)
        return Retrieval(passages, meta)

    async def _rerank_stage(
        self, question: str, hits: list[Hit], k: int, meta: dict[str, Any]
    ) -> list[Hit]:
        """Rerank the children and keep the top ``k``; vector order on any failure."""
        if self.reranker is None or not hits:
            return hits[:k]
        t = time.perf_counter()
        try:
            ranked = await self.reranker.rerank(question, [h.to_document() for h in hits], top_n=k)
            scores = [r.score for r in ranked]
            if any(s is None or (isinstance(s, float) and math.isnan(s)) for s in scores):
                raise ValueError("the reranker returned NaN scores")
            out = []
            for rank, r in enumerate(ranked):
                hit = hits[r.original_rank]
                out.append(Hit(hit.id, hit.text, hit.metadata, hit.score, rank, float(r.score)))
            meta["reranked"] = True
            return out
        except Exception as exc:
            meta["reranked"] = False
            meta["fallbacks"].append(
                {
                    "stage": "rerank",
                    "error": describe_error(exc),
                    "action": f"kept the vector order, truncated to {k}",
                }
            )
            return hits[:k]
        finally:
            meta["timings_ms"]["rerank"] = _ms(t)

    async def _expand_stage(
        self, hits: list[Hit], mode: ExpansionMode, meta: dict[str, Any], *, packed: bool
    ) -> list[Passage] | None:
        """Widen the hits per ``mode``; None (keep the children) when a fetch fails."""
        assert self.parent_searcher is not None and self.store is not None
        t = time.perf_counter()
        parent_ids = list(group_by_parent(hits))
        try:
            if mode.name == "window":
                ranges = [
                    (
                        h.document_id,
                        h.metadata["chunk_index"] - mode.window,
                        h.metadata["chunk_index"] + mode.window,
                    )
                    for h in hits
                    if h.document_id is not None and isinstance(h.metadata.get("chunk_index"), int)
                ]
                neighbours = await self.store.fetch_chunk_ranges(ranges)  # type: ignore[attr-defined]
                parent_ids = list(
                    dict.fromkeys(
                        [
                            *parent_ids,
                            *(
                                str(r.metadata["parent_document_id"])
                                for rows in neighbours.values()
                                for r in rows
                                if r.metadata.get("parent_document_id")
                            ),
                        ]
                    )
                )
                parents = await self.parent_searcher.fetch(parent_ids) if parent_ids else {}
                passages = window_passages(
                    hits, neighbours, parents, mode.window or 1, meta, merge=not packed
                )
                meta["expanded"] = any(p.kind == "window" for p in passages)
                meta["timings_ms"]["expand"] = _ms(t)
                return passages
            parents = await self.parent_searcher.fetch(parent_ids) if parent_ids else {}
            if mode.name == "auto_merge":
                children = await self.store.fetch_children(list(parents))
                passages = auto_merge_passages(hits, parents, children, mode.threshold or 1.0, meta)
                meta["expanded"] = any(p.kind != "child" for p in passages)
                meta["timings_ms"]["expand"] = _ms(t)
                return passages
        except Exception as exc:
            meta["fallbacks"].append(
                {
                    "stage": "parent_fetch",
                    "error": describe_error(exc),
                    "action": "returned the children unexpanded",
                }
            )
            meta["timings_ms"]["expand"] = _ms(t)
            return None
        result = expand_hits(hits, parents)
        meta["expanded"] = bool(result.folded)
        meta["parents"] = list(result.folded)
        meta["folded"] = result.folded
        if result.missing:
            meta["missing_parents"] = result.missing
            meta["fallbacks"].append(
                {
                    "stage": "parent_fetch",
                    "error": f"{len(result.missing)} parent(s) not found",
                    "action": "kept all of their children",
                    "parent_ids": result.missing,
                }
            )
        meta["timings_ms"]["expand"] = _ms(t)
        return result.passages
