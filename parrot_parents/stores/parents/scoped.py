"""A parent searcher confined to a scope: what expansion reads never leaves it.

A bot's scope (a metadata filter, :mod:`parrot_parents.stores.filters`) holds for the
children its searches return, as part of their filter. Expansion reads other rows (a
hit's parent, the children of a window or of a merged parent), and those may lie outside
the scope: a parent's metadata need not be its children's. :class:`ScopedParentSearcher`
passes each read through to the bot's searcher, then keeps only the rows the store finds
in the scope, judged by the same SQL as a search's filter (:class:`ScopeCheck`).

A parent's text holds its children's, so a parent is held back when any of its children
lies outside the scope, though its own row lies inside (a scope on a child-level field
such as ``section_path``, or rows whose metadata differs from their parent's). A parent
held back is absent, so its hits stay as themselves (:mod:`parrot_parents.retrieval.expanders`);
a window or a merge is made of the children in the scope alone, and a window stops at the
first child outside it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from parrot_parents.stores.parents.abstract import AbstractParentSearcher, ChunkRange
from parrot_parents.stores.protocols import ScopeCheck
from parrot_parents.stores.results import SearchResult

__all__ = ["ScopedParentSearcher", "parents_holding_outside"]

#: A read of every child of some parents (``fetch_children`` of a searcher or a store).
ChildrenRead = Callable[[Sequence[str]], Awaitable[dict[str, list[SearchResult]]]]


async def parents_holding_outside(
    children_of: ChildrenRead,
    check: ScopeCheck,
    scope: Mapping[str, Any],
    parent_ids: Sequence[str],
) -> tuple[list[str], list[str]]:
    """The parents among ``parent_ids`` holding a child outside ``scope`` (their text
    would hand it over), and the ids of those children; both in the order met. One read
    of the children, one check of them against the scope; nothing read for no ids."""
    wanted = list(dict.fromkeys(parent_ids))
    if not wanted:
        return [], []
    children = await children_of(wanted)
    ids = list(dict.fromkeys(r.id for p in wanted for r in children.get(p, ())))
    inside = await check.ids_matching(ids, scope) if ids else set()
    holding = [p for p in wanted if any(r.id not in inside for r in children.get(p, ()))]
    return holding, [i for i in ids if i not in inside]


class ScopedParentSearcher(AbstractParentSearcher):
    """``inner``'s reads, less the rows outside ``scope`` and the parents holding a child
    outside it (one more read of the store per call that returns rows, unless ``judged``
    answers for all of them; a parent fetch reads its parents' children too).

    Args:
        inner: the bot's parent searcher (or the rows read with the search).
        check: the store that judges the scope (the bot's store).
        scope: a metadata filter, already validated.
        judged: rows already judged against this very scope by the store, by id
            (:attr:`~parrot_parents.stores.context.Context.judged`, read with the
            search); only the ids it lacks are sent to ``check``.

    Attributes:
        withheld: ids of the rows read and held back as outside the scope, in the order
            they were met.
        partial: ids of parents inside the scope held back because a child of theirs
            lies outside it, in the order they were met.
    """

    def __init__(
        self,
        inner: AbstractParentSearcher,
        check: ScopeCheck,
        scope: Mapping[str, Any],
        judged: Mapping[str, bool] | None = None,
    ) -> None:
        self.inner = inner
        self.check = check
        self.scope = dict(scope)
        self.judged = dict(judged or {})
        self.store = inner.store
        self.withheld: list[str] = []
        self.partial: list[str] = []

    async def _inside(self, ids: Sequence[str]) -> set[str]:
        """The ids among ``ids`` the scope keeps: from :attr:`judged`, and one read of
        the store for those it lacks (none when it has them all)."""
        judged = self.judged
        inside = {i for i in ids if judged.get(i)}
        unjudged = [i for i in ids if i not in judged]
        if unjudged:
            inside |= await self.check.ids_matching(unjudged, self.scope)
        return inside

    async def _kept(self, ids: Sequence[str]) -> set[str]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return set()
        kept = await self._inside(wanted)
        self.withheld.extend(i for i in wanted if i not in kept and i not in self.withheld)
        return kept

    async def _kept_lists(
        self, found: dict[str, list[SearchResult]]
    ) -> dict[str, list[SearchResult]]:
        kept = await self._kept([r.id for rows in found.values() for r in rows])
        out = {key: [r for r in rows if r.id in kept] for key, rows in found.items()}
        return {key: rows for key, rows in out.items() if rows}

    async def fetch_text(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        found = await self.inner.fetch_text(parent_ids)
        kept = await self._kept(list(found))
        return {pid: doc for pid, doc in found.items() if pid in kept}

    async def fetch(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        found = await self.inner.fetch_text(parent_ids)
        if not found:
            return {}
        # The parents and their children judged in one read (the children usually come
        # with the search: the pipeline joins them to it for a scoped bot).
        children = await self.inner.fetch_children(list(found))
        ids = [*found, *(r.id for p in found for r in children.get(p, ()))]
        inside = await self._inside(list(dict.fromkeys(ids)))
        parents = [p for p in found if p in inside]
        self.withheld.extend(p for p in found if p not in inside and p not in self.withheld)
        outside = [r.id for p in parents for r in children.get(p, ()) if r.id not in inside]
        holding = [p for p in parents if any(r.id not in inside for r in children.get(p, ()))]
        self.withheld.extend(i for i in dict.fromkeys(outside) if i not in self.withheld)
        self.partial.extend(p for p in holding if p not in self.partial)
        return {pid: found[pid] for pid in parents if pid not in holding}

    async def fetch_children(self, parent_ids: Sequence[str]) -> dict[str, list[SearchResult]]:
        return await self._kept_lists(await self.inner.fetch_children(parent_ids))

    async def fetch_neighbours(self, ranges: Sequence[ChunkRange]) -> dict[str, list[SearchResult]]:
        return await self._kept_lists(await self.inner.fetch_neighbours(ranges))

    def reads_from(self, store: Any) -> bool:
        return self.inner.reads_from(store)

    async def health_check(self) -> bool:
        return await self.inner.health_check()

    def to_dict(self) -> dict[str, Any]:
        return self.inner.to_dict()
