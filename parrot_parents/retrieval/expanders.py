"""Expanders: how hits (children) are widened into passages, one class per mode.

Every expander works in two steps, so that a failing read degrades while a programming
error still raises:

1. :meth:`Expander.fetch`, the only step that does I/O, reads through the
   :class:`~parrot_parents.stores.parents.abstract.AbstractParentSearcher` (never a store);
2. :meth:`Expander.expand`, pure, turns the hits and what was fetched into passages.

Parent folding (spec FEAT-128; each parent appears once, and a missing parent loses no hit):

* hits are grouped by ``parent_document_id``; all parents are fetched with one call;
* each group becomes its parent, placed at the rank of its best hit, scored with that
  hit's search score; later hits of the same parent add nothing (dedup);
* a hit without a parent id stays as itself;
* when a parent is missing, *all* of its hits stay as themselves, in rank order.

Example: ``[child(P1), S, child(P2), child(P1)]`` becomes ``[P1, S, P2]``. The other
modes: :mod:`.modes`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.documents import Document

from parrot_parents.retrieval.modes import ExpansionMode
from parrot_parents.retrieval.packing import SourceIndex
from parrot_parents.retrieval.passages import Hit, Passage
from parrot_parents.retrieval.sections import Section
from parrot_parents.stores.context import ContextPlan
from parrot_parents.stores.parents.abstract import AbstractParentSearcher, ChunkRange
from parrot_parents.stores.records.markers import (
    CHUNK_INDEX,
    DOCUMENT_ID,
    END_INDEX,
    PARENT_DOCUMENT_ID,
    START_INDEX,
    is_parent,
)
from parrot_parents.stores.results import SearchResult

__all__ = [
    "AutoMergeExpander",
    "Expander",
    "Expansion",
    "ParentExpander",
    "WindowExpander",
    "expand_hits",
    "expander_for",
    "group_by_parent",
    "plan_for",
]


@dataclass
class Expansion:
    """Passages in rank order and what the expander did (copied into ``meta``).

    Attributes:
        passages: the expanded context units, best first.
        expanded: at least one hit was widened.
        folded: ``{parent_id: [child ids folded into it]}`` (parent and auto_merge).
        missing: parent ids that were asked for but not found (their hits stay).
        auto_merge: ``{parent_id: {"hits", "children", "merged"}}`` (auto_merge).
        windows: ``{hit id: [ids of the children in its window]}`` (window).
    """

    passages: list[Passage]
    expanded: bool = False
    folded: dict[str, list[str]] | None = None
    missing: list[str] = field(default_factory=list)
    auto_merge: dict[str, dict[str, Any]] | None = None
    windows: dict[str, list[str]] | None = None


class Expander(Protocol):
    """One expansion mode: an I/O step, then a pure step (see the module docstring)."""

    async def fetch(self, hits: Sequence[Hit], searcher: AbstractParentSearcher) -> Any:
        """Read what :meth:`expand` needs; the only step allowed to fail on I/O."""

    def expand(self, hits: Sequence[Hit], fetched: Any, *, packed: bool) -> Expansion:
        """Widen ``hits`` with what :meth:`fetch` read. ``packed``: a packer runs next."""


def group_by_parent(hits: Sequence[Hit]) -> dict[str, list[Hit]]:
    """``{parent_id: hits}`` in first-seen order; hits without a parent are left out."""
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        if hit.parent_id is not None:
            groups.setdefault(hit.parent_id, []).append(hit)
    return groups


def expand_hits(hits: Sequence[Hit], parents: Mapping[str, Document]) -> Expansion:
    """Replace each group of hits by its parent (see the module docstring).

    Args:
        hits: children in rank order.
        parents: result of :meth:`AbstractParentSearcher.fetch` for their parent ids.
    """
    groups = group_by_parent(hits)
    result = Expansion(passages=[], folded={})
    assert result.folded is not None
    emitted: set[str] = set()
    for hit in hits:
        pid = hit.parent_id
        if pid is None or pid not in parents:
            if pid is not None and pid not in result.missing:
                result.missing.append(pid)
            result.passages.append(Passage.from_hit(hit))
            continue
        if pid in emitted:
            continue
        emitted.add(pid)
        parent = parents[pid]
        group = groups[pid]
        result.passages.append(
            Passage.from_parent(pid, parent.page_content, dict(parent.metadata), group)
        )
        result.folded[pid] = [h.id for h in group]
    for rank, passage in enumerate(result.passages):
        passage.rank = rank
    result.expanded = bool(result.folded)
    return result


class ParentExpander:
    """``parent``: each hit folds into its parent, once per parent."""

    async def fetch(
        self, hits: Sequence[Hit], searcher: AbstractParentSearcher
    ) -> dict[str, Document]:
        parent_ids = list(group_by_parent(hits))
        return await searcher.fetch(parent_ids) if parent_ids else {}

    def expand(
        self, hits: Sequence[Hit], fetched: dict[str, Document], *, packed: bool
    ) -> Expansion:
        return expand_hits(hits, fetched)


@dataclass(frozen=True)
class AutoMergeExpander:
    """``auto_merge:T``: a parent where at least ``threshold`` of its children hit, else
    the hit children. One parent fetch plus one read of their children."""

    threshold: float

    async def fetch(
        self, hits: Sequence[Hit], searcher: AbstractParentSearcher
    ) -> tuple[dict[str, Document], dict[str, list[SearchResult]]]:
        parents = await ParentExpander().fetch(hits, searcher)
        children = await searcher.fetch_children(list(parents)) if parents else {}
        return parents, children

    def expand(
        self,
        hits: Sequence[Hit],
        fetched: tuple[dict[str, Document], dict[str, list[SearchResult]]],
        *,
        packed: bool,
    ) -> Expansion:
        parents, children = fetched
        merged: dict[str, Document] = {}
        report: dict[str, dict[str, Any]] = {}
        for pid, group in group_by_parent(hits).items():
            total = len(children.get(pid, ()))
            ratio = len(group) / total if total else 0.0
            ok = pid in parents and total > 0 and ratio >= self.threshold
            report[pid] = {"hits": len(group), "children": total, "merged": ok}
            if ok:
                merged[pid] = parents[pid]
        result = expand_hits(hits, merged)
        # Parents below the threshold are not missing: their hits stay on purpose.
        result.missing = [pid for pid in result.missing if pid not in parents]
        result.auto_merge = report
        result.expanded = any(p.kind != "child" for p in result.passages)
        return result


@dataclass(frozen=True)
class WindowExpander:
    """``window:N``: each hit with ``n`` neighbouring children on each side, in document
    order. One read of the neighbours plus one parent fetch (for the exact text between
    neighbouring children)."""

    n: int

    async def fetch(
        self, hits: Sequence[Hit], searcher: AbstractParentSearcher
    ) -> tuple[dict[str, list[SearchResult]], dict[str, Document]]:
        ranges: list[ChunkRange] = [
            (h.document_id, h.metadata[CHUNK_INDEX] - self.n, h.metadata[CHUNK_INDEX] + self.n)
            for h in hits
            if h.document_id is not None
            and isinstance(h.metadata.get(CHUNK_INDEX), int)
            # a parent (reached through a document summary) is already its own context
            and not is_parent(h.metadata)
        ]
        neighbours = await searcher.fetch_neighbours(ranges) if ranges else {}
        # The hits' parents, then their neighbours', each once.
        parent_ids = dict.fromkeys(group_by_parent(hits))
        for r in itertools.chain.from_iterable(neighbours.values()):
            if r.metadata.get(PARENT_DOCUMENT_ID):
                parent_ids[str(r.metadata[PARENT_DOCUMENT_ID])] = None
        parents = await searcher.fetch_text(list(parent_ids)) if parent_ids else {}
        return neighbours, parents

    def expand(
        self,
        hits: Sequence[Hit],
        fetched: tuple[dict[str, list[SearchResult]], dict[str, Document]],
        *,
        packed: bool,
    ) -> Expansion:
        """Near a document's edge a window holds what exists. Without a packer, windows of
        one document that overlap are joined at the rank of the first; under a budget the
        packer joins them instead, so that each hit keeps its own rank. A window whose
        text no parent holds whole (it would cross from one section parent into the
        next) keeps to its hit's own parent. A hit whose neighbours or surrounding text
        are unknown stays as is, and, without a packer, joins a window that holds it."""
        neighbours, parents = fetched
        source = SourceIndex()
        for parent in parents.values():
            source.add(
                parent.metadata.get(DOCUMENT_ID),
                parent.metadata.get(START_INDEX),
                parent.page_content,
            )
        out: list[Passage] = []
        windows: dict[str, list[str]] = {}
        for hit in hits:
            doc, index = hit.document_id, hit.metadata.get(CHUNK_INDEX)
            if doc is None or not isinstance(index, int) or is_parent(hit.metadata):
                out.append(Passage.from_hit(hit))
                continue
            rows = _contiguous(neighbours.get(doc, ()), index, self.n)
            start, end, text = _window_text(rows, hit, doc, source)
            if text is None:
                # The text between parents is in none of them (a window reaching into the
                # next section, say): the window keeps to the hit's own parent.
                own_parent = hit.metadata.get(PARENT_DOCUMENT_ID)
                rows = _contiguous(
                    [r for r in rows if r.metadata.get(PARENT_DOCUMENT_ID) == own_parent],
                    index,
                    self.n,
                )
                start, end, text = _window_text(rows, hit, doc, source)
            if text is None:
                out.append(Passage.from_hit(hit))
                continue
            windows[hit.id] = [r.id for r in rows]
            own = Passage.from_hit(hit)
            # The hit's section; pages covering every child of the window.
            section = own.section.spanning(Section.from_metadata(r.metadata) for r in rows)
            out.append(
                dataclasses.replace(
                    own,
                    id=f"{doc}#window:{start}-{end}",
                    text=text,
                    kind="window",
                    start_index=start,
                    end_index=end,
                    metadata={},
                    section=section,
                )
            )
        if not packed:
            out = _absorbed(out, source)
        for rank, p in enumerate(out):
            p.rank = rank
        return Expansion(
            passages=out, expanded=any(p.kind == "window" for p in out), windows=windows
        )


def _window_text(
    rows: Sequence[SearchResult], hit: Hit, doc: str, source: SourceIndex
) -> tuple[int, int, str | None]:
    """``(start, end, text)`` of the window from ``rows`` and ``hit`` (character offsets
    in the document); ``text`` is None when no known parent text holds the whole span."""
    spans = [(int(r.metadata[START_INDEX]), int(r.metadata[END_INDEX])) for r in rows]
    spans.append((hit.start_index or 0, hit.end_index or 0))
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    return start, end, source.slice(doc, start, end)


def _absorbed(out: list[Passage], source: SourceIndex) -> list[Passage]:
    """``out`` with no passage inside or across another of the same document: two windows
    that overlap or touch become one, and a passage that is no window (a hit whose window
    could not be built) joins a window that holds its whole span. The passage made of two
    takes the better rank of the two, and the hits of both. Neighbouring hits have
    overlapping windows: handing both over would repeat text."""
    while True:
        kept = _absorb_once(out, source)
        if len(kept) == len(out):
            return kept
        # A window made of two may now reach a third.
        out = kept


def _absorb_once(out: list[Passage], source: SourceIndex) -> list[Passage]:
    """One pass of :func:`_absorbed`, in rank order."""
    kept: list[Passage] = []
    for p in out:
        holder = next((w for w in kept if _holds(w, p, source)), None)
        if holder is None and p.kind == "window":
            held = [q for q in kept if q.kind != "window" and _holds(p, q, source)]
            if held:
                # The window takes the place of the best hit it holds.
                kept[kept.index(held[0])] = p
                p.child_ids = [
                    *dict.fromkeys([*(c for q in held for c in q.child_ids), *p.child_ids])
                ]
                kept = [q for q in kept if q not in held[1:]]
                continue
        if holder is None:
            kept.append(p)
            continue
        assert holder.start_index is not None and holder.end_index is not None
        assert p.start_index is not None and p.end_index is not None
        s, e = min(holder.start_index, p.start_index), max(holder.end_index, p.end_index)
        text = source.slice(holder.document_id or "", s, e)
        assert text is not None  # _holds checked it
        holder.text, holder.start_index, holder.end_index = text, s, e
        holder.id = f"{holder.document_id}#window:{s}-{e}"
        holder.section = holder.section.spanning([p.section])
        for child in p.child_ids:
            if child not in holder.child_ids:
                holder.child_ids.append(child)
    return kept


def _holds(window: Passage, p: Passage, source: SourceIndex) -> bool:
    """Whether ``window`` and ``p`` (a window that overlaps or touches it, or a passage
    inside it) of one document make one window of known text."""
    if window.kind != "window" or window.document_id != p.document_id:
        return False
    ws, we, ps, pe = window.start_index, window.end_index, p.start_index, p.end_index
    if ws is None or we is None or ps is None or pe is None or window.document_id is None:
        return False
    # Windows join when they overlap or touch; any other passage only when inside.
    near = (ps <= we and ws <= pe) if p.kind == "window" else (ws <= ps and pe <= we)
    return near and source.slice(window.document_id, min(ws, ps), max(we, pe)) is not None


def _contiguous(rows: Sequence[SearchResult], index: int, n: int) -> list[SearchResult]:
    """The ``rows`` within ``n`` chunk indexes of ``index`` that a run of consecutive
    indexes joins to it, in document order. A window is the text from its first child to
    its last, so a child missing between them (outside a bot's scope, or never stored)
    would be handed over with it: the window stops before it."""
    by_index: dict[int, SearchResult] = {}
    for r in rows:
        at = r.metadata.get(CHUNK_INDEX)
        if isinstance(at, int) and abs(at - index) <= n:
            by_index.setdefault(at, r)
    low = high = index
    while low - 1 in by_index:
        low -= 1
    while high + 1 in by_index:
        high += 1
    return [by_index[i] for i in range(low, high + 1) if i in by_index]


def plan_for(mode: ExpansionMode) -> ContextPlan:
    """The reads of a mode's :meth:`Expander.fetch`, to join to the search statement."""
    if mode.name == "auto_merge":
        return ContextPlan(parents=True, children=True)
    if mode.name == "window":
        return ContextPlan(parents=True, window=mode.window)
    return ContextPlan(parents=True)


def expander_for(mode: ExpansionMode) -> Expander:
    """The expander of a parsed mode."""
    if mode.name == "auto_merge":
        assert mode.threshold is not None
        return AutoMergeExpander(mode.threshold)
    if mode.name == "window":
        assert mode.window is not None
        return WindowExpander(mode.window)
    return ParentExpander()
