"""Budget-aware context packing.

The budget is in **characters of passage text** (the unit of the shared scorer's
``recall@Bc``); the source headers added by :func:`format_context` are not counted.

Rules, applied to passages in rank order:

1. a passage that fits in what is left of the budget is taken whole;
2. spans of the same source that overlap or touch are merged, never repeated: a passage
   costs only the characters it adds;
3. a wider passage (a parent, parent_chunk or window) that does not fit is replaced by
   the best window of its hit children that fits: the hits' spans, in rank order, grown
   symmetrically into the surrounding text until the remaining budget is used (a
   binary search on the growth, so neighbouring windows merge);
4. a child that does not fit is cut to the remaining budget around its centre;
5. nothing beyond the budget is ever returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from parrot_parents.bots.passages import Hit, Passage

__all__ = ["PackResult", "SourceIndex", "pack"]

_WIDE = frozenset({"parent", "parent_chunk", "window", "merged"})


class SourceIndex:
    """Exact text of source documents, pieced together from passages already fetched.

    A span can be sliced when it lies inside one contiguous known segment (overlapping
    parent_chunks join into one segment).
    """

    def __init__(self) -> None:
        self._segments: dict[str, list[tuple[int, str]]] = {}

    def add(self, document_id: str | None, start: int | None, text: str) -> None:
        if document_id is None or start is None or not text:
            return
        segs = self._segments.setdefault(document_id, [])
        segs.append((start, text))
        segs.sort(key=lambda s: s[0])
        merged: list[tuple[int, str]] = []
        for s, t in segs:
            if merged and s <= merged[-1][0] + len(merged[-1][1]):
                ms, mt = merged[-1]
                tail = t[ms + len(mt) - s :]
                merged[-1] = (ms, mt + tail)
            else:
                merged.append((s, t))
        self._segments[document_id] = merged

    def slice(self, document_id: str, start: int, end: int) -> str | None:
        for s, t in self._segments.get(document_id, []):
            if s <= start and end <= s + len(t):
                return t[start - s : end - s]
        return None


@dataclass
class PackResult:
    """Packed passages and what packing did (reported in ``meta["packing"]``)."""

    passages: list[Passage]
    budget: int
    used: int
    substituted: list[dict[str, Any]] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)

    def meta(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "used": self.used,
            "substituted": self.substituted,
            "truncated": self.truncated,
            "cut": self.cut,
        }


@dataclass
class _Span:
    document_id: str
    start: int
    end: int
    rank: int
    score: float | None
    kinds: set[str]
    ids: list[str]
    child_ids: list[str]
    source: str | None


def _union_length(spans: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(spans):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s  # type: ignore[operator]
    return total


class _Packer:
    def __init__(
        self, budget: int, source: SourceIndex, original: dict[str, tuple[int, int]]
    ) -> None:
        self.budget = budget
        self._original = original
        self.source = source
        self.spans: dict[str, list[_Span]] = {}
        self.loose: list[Passage] = []  # passages without offsets (legacy rows)
        self.used = 0

    @property
    def left(self) -> int:
        return self.budget - self.used

    def cost(self, doc: str, pieces: list[tuple[int, int]]) -> int:
        have = [(s.start, s.end) for s in self.spans.get(doc, [])]
        return _union_length(have + pieces) - _union_length(have)

    def add(self, p: Passage, start: int, end: int) -> None:
        self.add_many(p, [(start, end)])

    def add_many(self, p: Passage, pieces: list[tuple[int, int]]) -> None:
        doc = p.document_id or ""
        self.used += self.cost(doc, pieces)
        for start, end in pieces:
            self.spans.setdefault(doc, []).append(
                _Span(
                    doc, start, end, p.rank, p.score, {p.kind}, [p.id], list(p.child_ids), p.source
                )
            )

    def best_window(
        self, doc: str, hits: list[tuple[int, int]], lo: int, hi: int
    ) -> list[tuple[int, int]]:
        """Hit spans (rank order) that fit, grown symmetrically inside ``[lo, hi]``.

        Cost is counted against what is already packed, so growing into text that is
        already selected is free.
        """
        pieces: list[tuple[int, int]] = []
        for s, e in hits:
            trial = [*pieces, (max(lo, s), min(hi, e))]
            if self.cost(doc, trial) <= self.left:
                pieces = trial
        if not pieces:
            return []

        def grown(g: int) -> list[tuple[int, int]]:
            return [(max(lo, s - g), min(hi, e + g)) for s, e in pieces]

        a, b = 0, max(hi - lo, 0)
        while a < b:  # the largest growth whose added characters still fit
            mid = (a + b + 1) // 2
            if self.cost(doc, grown(mid)) <= self.left:
                a = mid
            else:
                b = mid - 1
        return grown(a)

    def passages(self) -> list[Passage]:
        out: list[Passage] = []
        for doc, spans in self.spans.items():
            spans.sort(key=lambda s: s.start)
            merged: list[_Span] = []
            for sp in spans:
                last = merged[-1] if merged else None
                if last is not None and sp.start <= last.end:
                    last.end = max(last.end, sp.end)
                    last.rank = min(last.rank, sp.rank)
                    last.kinds |= sp.kinds
                    last.ids += sp.ids
                    last.child_ids += [c for c in sp.child_ids if c not in last.child_ids]
                    if sp.score is not None and (last.score is None or sp.score > last.score):
                        last.score = sp.score
                else:
                    merged.append(
                        _Span(
                            doc,
                            sp.start,
                            sp.end,
                            sp.rank,
                            sp.score,
                            set(sp.kinds),
                            list(sp.ids),
                            list(sp.child_ids),
                            sp.source,
                        )
                    )
            for sp in merged:
                text = self.source.slice(doc, sp.start, sp.end)
                if text is None:  # pragma: no cover - every span comes from known text
                    continue
                ids = list(dict.fromkeys(sp.ids))
                single = len(sp.kinds) == 1 and len(ids) == 1
                kind = next(iter(sp.kinds)) if single else "merged"
                pid = ids[0] if single else f"{doc}#merged:{sp.start}-{sp.end}"
                if kind != "merged" and (sp.start, sp.end) != self._original.get(pid):
                    kind = "window"
                    pid = f"{doc}#window:{sp.start}-{sp.end}"
                out.append(
                    Passage(
                        pid,
                        text,
                        kind,
                        sp.score,
                        sp.rank,
                        doc or None,
                        sp.start,
                        sp.end,
                        sp.source,
                        sp.child_ids,
                    )
                )
        out.extend(self.loose)
        out.sort(key=lambda p: p.rank)
        for i, p in enumerate(out):
            p.rank = i
        return out


def pack(
    passages: Sequence[Passage], hits: Sequence[Hit], budget: int, source: SourceIndex | None = None
) -> PackResult:
    """Pack ``passages`` (rank order) into ``budget`` characters; see the module docstring.

    Args:
        passages: expanded passages, best first.
        hits: the children behind them (their spans choose the windows).
        budget: characters of passage text, >= 1.
        source: known source text; built from ``passages`` when None.
    """
    if source is None:
        source = SourceIndex()
    for p in passages:
        source.add(p.document_id, p.start_index, p.text)
    hit_spans = {h.id: (h.start_index, h.end_index) for h in hits}
    original = {
        p.id: (p.start_index, p.end_index)
        for p in passages
        if p.start_index is not None and p.end_index is not None
    }
    packer = _Packer(budget, source, original)
    result = PackResult([], budget, 0)
    for p in passages:
        if packer.left <= 0:
            result.cut.append(p.id)
            continue
        if p.document_id is None or p.start_index is None or p.end_index is None:
            text = p.text[: packer.left]
            if len(text) < len(p.text):
                result.truncated.append(p.id)
            packer.loose.append(
                Passage(
                    p.id,
                    text,
                    p.kind,
                    p.score,
                    p.rank,
                    p.document_id,
                    None,
                    None,
                    p.source,
                    p.child_ids,
                    p.metadata,
                )
            )
            packer.used += len(text)
            continue
        doc, s, e = p.document_id, p.start_index, p.end_index
        if packer.cost(doc, [(s, e)]) <= packer.left:
            packer.add(p, s, e)
            continue
        if p.kind in _WIDE:
            inner = [
                hit_spans[c] for c in p.child_ids if c in hit_spans and None not in hit_spans[c]
            ]
            window = packer.best_window(doc, inner, s, e)  # type: ignore[arg-type]
            new = [w for w in window if packer.cost(doc, [w]) > 0]
            if new:
                packer.add_many(p, new)
                result.substituted.append(
                    {"id": p.id, "kind": p.kind, "windows": [list(w) for w in new]}
                )
                continue
        # A child (or a window that found nothing new): cut around its centre.
        room = packer.left
        mid = (s + e) // 2
        cs = max(s, min(mid - room // 2, e - room))
        packer.add(p, cs, min(e, cs + room))
        result.truncated.append(p.id)
    result.passages = packer.passages()
    result.used = sum(len(p.text) for p in result.passages)
    return result
