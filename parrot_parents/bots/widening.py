"""The ``auto_merge`` and ``window`` expansion modes (see :mod:`parrot_parents.bots.modes`).

Both read the stored hierarchy with one statement for the children involved plus one
parent ``fetch`` (for the exact text between neighbouring children).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from parrot_parents.bots.expansion import expand_hits, group_by_parent
from parrot_parents.bots.packing import SourceIndex
from parrot_parents.bots.passages import Hit, Passage
from parrot_parents.stores.results import SearchResult

__all__ = ["auto_merge_passages", "window_passages"]


def auto_merge_passages(
    hits: Sequence[Hit],
    parents: Mapping[str, Document],
    children: Mapping[str, Sequence[SearchResult]],
    threshold: float,
    meta: dict[str, Any],
) -> list[Passage]:
    """A parent where at least ``threshold`` of its children hit, else the hit children.

    Args:
        hits: children in rank order.
        parents: fetched parents by id.
        children: every child of those parents (for the ratio's denominator).
        threshold: fraction in (0, 1].
        meta: receives ``auto_merge``: ``{parent_id: {"hits", "children", "merged"}}``.
    """
    groups = group_by_parent(hits)
    merged: dict[str, Document] = {}
    report: dict[str, dict[str, Any]] = {}
    for pid, group in groups.items():
        total = len(children.get(pid, ()))
        ratio = len(group) / total if total else 0.0
        ok = pid in parents and total > 0 and ratio >= threshold
        report[pid] = {"hits": len(group), "children": total, "merged": ok}
        if ok:
            merged[pid] = parents[pid]
    meta["auto_merge"] = report
    result = expand_hits(hits, merged)
    meta["folded"] = result.folded
    meta["parents"] = list(result.folded)
    return result.passages


def window_passages(
    hits: Sequence[Hit],
    neighbours: Mapping[str, Sequence[SearchResult]],
    parents: Mapping[str, Document],
    n: int,
    meta: dict[str, Any],
    *,
    merge: bool = True,
) -> list[Passage]:
    """Each hit with ``n`` neighbouring children on each side, in document order.

    Near a document's edge a window holds what exists. With ``merge`` (default), windows
    of one document that overlap are joined at the rank of the first; under a budget the
    packer joins them instead (``merge=False``), so that each hit keeps its own rank.
    A hit whose neighbours or surrounding text are unknown stays as is.
    """
    source = SourceIndex()
    for parent in parents.values():
        source.add(
            parent.metadata.get("document_id"),
            parent.metadata.get("start_index"),
            parent.page_content,
        )
    out: list[Passage] = []
    windows: dict[str, list[str]] = {}
    for hit in hits:
        doc, index = hit.document_id, hit.metadata.get("chunk_index")
        if doc is None or not isinstance(index, int):
            out.append(Passage.from_hit(hit))
            continue
        rows = [
            r
            for r in neighbours.get(doc, ())
            if abs(int(r.metadata.get("chunk_index", -(10**9))) - index) <= n
        ]
        spans = [(int(r.metadata["start_index"]), int(r.metadata["end_index"])) for r in rows]
        spans.append((hit.start_index or 0, hit.end_index or 0))
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
        text = source.slice(doc, start, end)
        if text is None:
            out.append(Passage.from_hit(hit))
            continue
        pid = f"{doc}#window:{start}-{end}"
        windows[hit.id] = [r.id for r in rows]
        out.append(
            Passage(
                pid,
                text,
                "window",
                hit.score,
                hit.rank,
                doc,
                start,
                end,
                Passage.from_hit(hit).source,
                [hit.id],
                {},
            )
        )
    meta["windows"] = windows
    if merge:
        out = _merge_overlapping(out, source)
    for rank, p in enumerate(out):
        p.rank = rank
    return out


def _merge_overlapping(passages: list[Passage], source: SourceIndex) -> list[Passage]:
    """Join windows of one document that overlap or touch, at the rank of the first.

    Neighbouring hits have overlapping windows; handing both over would repeat text.
    """
    out: list[Passage] = []
    for p in passages:
        target = next(
            (
                q
                for q in out
                if q.kind == "window"
                and p.kind == "window"
                and q.document_id == p.document_id
                and p.start_index is not None
                and q.start_index is not None
                and p.start_index <= q.end_index  # type: ignore[operator]
                and q.start_index <= p.end_index  # type: ignore[operator]
            ),
            None,
        )
        if target is None:
            out.append(p)
            continue
        start = min(target.start_index, p.start_index)  # type: ignore[type-var]
        end = max(target.end_index, p.end_index)  # type: ignore[type-var]
        text = source.slice(target.document_id or "", start, end)
        if text is None:  # pragma: no cover - both windows came from known text
            out.append(p)
            continue
        target.text, target.start_index, target.end_index = text, start, end
        target.id = f"{target.document_id}#window:{start}-{end}"
        target.child_ids += [c for c in p.child_ids if c not in target.child_ids]
    return out
