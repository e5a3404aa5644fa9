"""A parent searcher that answers from rows read together with the search.

When the search statement already joined the parents (and a window's neighbours, or a
parent's children: :class:`~parrot_parents.stores.context.Context`), expansion reads
nothing more. Anything the context did not cover (another mode, an id it never looked
for) goes to the real searcher, so the answers are the same as without the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from parrot_parents.stores.context import Context
from parrot_parents.stores.parents.abstract import AbstractParentSearcher, ChunkRange
from parrot_parents.stores.records.markers import CHUNK_INDEX, int_marker
from parrot_parents.stores.results import SearchResult

__all__ = ["PrefetchedParentSearcher"]


class PrefetchedParentSearcher(AbstractParentSearcher):
    """Serves :meth:`fetch`, :meth:`fetch_children` and :meth:`fetch_neighbours` from a
    :class:`Context`, and what it lacks from ``fallback``.

    Args:
        context: rows read with the search.
        fallback: the bot's parent searcher.
    """

    def __init__(self, context: Context, fallback: AbstractParentSearcher) -> None:
        self.context = context
        self.fallback = fallback
        #: Reads sent to ``fallback`` (0 when the context covered everything).
        self.fallback_reads = 0

    async def fetch(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        ids = list(dict.fromkeys(str(p) for p in parent_ids if p is not None))
        known = self.context.parent_ids if self.context.plan.parents else set()
        out = {p: self.context.parents[p] for p in ids if p in self.context.parents}
        unread = [p for p in ids if p not in known]
        if unread:
            self.fallback_reads += 1
            out.update(await self.fallback.fetch(unread))
        return out

    async def fetch_children(self, parent_ids: Sequence[str]) -> dict[str, list[SearchResult]]:
        ids = list(dict.fromkeys(str(p) for p in parent_ids))
        if not self.context.plan.children or not set(ids) <= self.context.parent_ids:
            self.fallback_reads += 1
            return await self.fallback.fetch_children(ids)
        return {p: self.context.children[p] for p in ids if p in self.context.children}

    async def fetch_neighbours(self, ranges: Sequence[ChunkRange]) -> dict[str, list[SearchResult]]:
        windows = self.context.windows
        if not all((lo, hi) in windows.get(str(d), ()) for d, lo, hi in ranges):
            self.fallback_reads += 1
            return await self.fallback.fetch_neighbours(ranges)
        wanted: dict[str, list[tuple[int, int]]] = {}
        for d, lo, hi in ranges:
            wanted.setdefault(str(d), []).append((lo, hi))
        out: dict[str, list[SearchResult]] = {}
        for d, spans in wanted.items():
            rows = [
                r
                for r in self.context.neighbours.get(d, ())
                if (i := int_marker(r.metadata, CHUNK_INDEX)) is not None
                and any(lo <= i <= hi for lo, hi in spans)
            ]
            if rows:
                out[d] = rows
        return out

    async def health_check(self) -> bool:
        return await self.fallback.health_check()

    def to_dict(self) -> dict[str, Any]:
        return self.fallback.to_dict()
