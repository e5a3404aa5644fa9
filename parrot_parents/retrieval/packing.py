"""Budget-aware context packing: hits first, then the text around them.

The budget is in **characters of passage text** (the unit of the shared scorer's
``recall@Bc``); the source headers added by :func:`format_context` are not counted.
The phases and ``context_share=0.25``: docs/architecture.md, "Packing a budget".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from parrot_parents.errors import ConfigurationError
from parrot_parents.retrieval.passages import Hit, Passage, PassageKind, branch_scores
from parrot_parents.retrieval.trimming import (
    RANK_DECAY,
    WHOLE_SHARE,
    Candidate,
    choose_sentences,
)
from parrot_parents.stores.records.sentences import SENTENCE_BREAK, only_headings

__all__ = ["CONTEXT_SHARE", "MIN_PIECE", "PackResult", "SourceIndex", "pack"]

Span = tuple[int, int]
#: Fraction of the budget kept for text around the hits (docs/benchmarks.md).
CONTEXT_SHARE = 0.25
#: The smallest cut worth handing over, in characters.
MIN_PIECE = 40


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
        segs = sorted([*self._segments.get(document_id, []), (start, text)], key=lambda s: s[0])
        merged: list[tuple[int, str]] = []
        for s, t in segs:
            if merged and s <= merged[-1][0] + len(merged[-1][1]):
                ms, mt = merged[-1]
                merged[-1] = (ms, mt + t[ms + len(mt) - s :])
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
    """Packed passages and what packing did (reported in ``meta["packing"]``).

    ``substituted``: wider passages handed over as windows of their hits;
    ``truncated``: passages cut to fit; ``cut``: passages left out entirely, and every
    hit that is in no returned passage (a hit of a parent whose window could not reach
    it). Each hit is either in some passage's ``child_ids`` or in ``cut``.

    ``trim``: ``"off"``, ``"sentences"`` (the hits were trimmed to sentences), or
    ``"skipped: <why>"``; ``trimmed``: per hit handed over in part, its ``id``, the
    ``kept`` spans, the ``dropped`` sentences' spans (characters in the document), their
    ``dropped_chars`` and ``dropped_text``; ``mid_sentence``: windows
    (``document:start-end``) that begin or end inside a sentence, because the sentence
    around their hits is longer than the room the budget left.
    """

    passages: list[Passage]
    budget: int
    used: int
    substituted: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)
    trim: str = "off"
    trimmed: list[dict[str, Any]] = field(default_factory=list)
    mid_sentence: list[str] = field(default_factory=list)

    def meta(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del out["passages"]
        for key in ("trimmed", "mid_sentence"):  # only when packing did it
            if not out[key]:
                del out[key]
        return out


def union_length(spans: Sequence[Span]) -> int:
    """Characters covered by ``spans`` (overlaps counted once)."""
    total, cur_s, cur_e = 0, 0, -1
    for s, e in sorted(spans):
        if s > cur_e:
            total += max(cur_e - cur_s, 0)
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + max(cur_e - cur_s, 0)


@dataclass
class _Piece:
    doc: str
    span: Span
    bounds: Span  # how far phase 2 may grow it: its passage's extent
    owner: Passage
    whole: bool  # the owner passage taken as it is
    hit: str | None = None  # the hit this piece was cut from (None: a whole passage)


def _grow(p: _Piece, g: int) -> Span:
    if p.whole:
        return p.span
    (s, e), (lo, hi) = p.span, p.bounds
    return max(lo, s - g), min(hi, e + g)


class _Packer:
    """Phase state: the selected pieces, rows without offsets, and passages already used.

    Costs are characters: a document's pieces cost the union of their spans.
    """

    def __init__(self, owner: dict[str, Passage], min_piece: int) -> None:
        self.owner = owner
        self.min_piece = min_piece
        self.pieces: list[_Piece] = []
        self.loose: list[Passage] = []
        self.taken: set[str] = set()

    def used(self, grown: int = 0) -> int:
        """Characters of the selection, its pieces grown by ``grown`` on each side."""
        by_doc: dict[str, list[Span]] = {}
        for p in self.pieces:
            by_doc.setdefault(p.doc, []).append(_grow(p, grown))
        return sum(map(union_length, by_doc.values())) + sum(len(p.text) for p in self.loose)

    def cost(self, doc: str, span: Span) -> int:
        spans = [p.span for p in self.pieces if p.doc == doc]
        return union_length([*spans, span]) - union_length(spans)

    def is_whole(self, p: Passage) -> bool:
        return any(x.owner is p and x.whole for x in self.pieces)

    def take(
        self, hits: Sequence[Hit], start: int, limit: int, *, cut: bool, result: PackResult
    ) -> int:
        """Take hits from ``start`` while they fit under ``limit``; return where it stopped.

        A fitting wider passage is taken whole, otherwise the hit's own span. The first
        hit that does not fit stops the walk; with ``cut`` it is first cut around its
        centre to what is left (when that is at least ``min_piece``).
        """
        for i in range(start, len(hits)):
            hit = hits[i]
            p = self.owner.get(hit.id)
            if p is None or self.is_whole(p):
                continue
            room = limit - self.used()
            span = _span(p)
            if span is None:  # a legacy row without offsets: whole or a prefix
                if p.id not in self.taken and room >= min(self.min_piece, len(p.text)):
                    text = p.text[:room]
                    self.loose.append(
                        dataclasses.replace(
                            p,
                            text=text,
                            start_index=None,
                            end_index=None,
                            child_ids=list(p.child_ids),
                            metadata=dict(p.metadata),
                        )
                    )
                    self.taken.add(p.id)
                    if len(text) < len(p.text):
                        result.truncated.append(p.id)
                continue
            doc = p.document_id or ""
            if p.kind != "child" and p.id not in self.taken and self.cost(doc, span) <= room:
                self.pieces.append(_Piece(doc, span, span, p, whole=True))
                self.taken.add(p.id)
                continue
            if hit.start_index is None or hit.end_index is None:
                continue
            s, e = hit.start_index, hit.end_index
            if self.cost(doc, (s, e)) <= room:
                self.pieces.append(_Piece(doc, (s, e), span, p, whole=False, hit=hit.id))
                self.taken.add(p.id)
                continue
            if cut and room >= self.min_piece:
                cs = max(s, min((s + e) // 2 - room // 2, e - room))
                self.pieces.append(
                    _Piece(doc, (cs, min(e, cs + room)), span, p, whole=False, hit=hit.id)
                )
                self.taken.add(p.id)
                result.truncated.append(p.id)
                return i + 1
            return i
        return len(hits)

    def grow(self, limit: int) -> None:
        """Grow every non-whole piece symmetrically by the largest step that fits."""
        a, b = 0, max(p.bounds[1] - p.bounds[0] for p in self.pieces)
        while a < b:
            mid = (a + b + 1) // 2
            if self.used(mid) <= limit:
                a = mid
            else:
                b = mid - 1
        for piece in self.pieces:
            piece.span = _grow(piece, a)


def _span(p: Passage) -> Span | None:
    if p.document_id is None or p.start_index is None or p.end_index is None:
        return None
    return p.start_index, p.end_index


def pack(
    passages: Sequence[Passage],
    hits: Sequence[Hit],
    budget: int,
    *,
    trim: bool = False,
    query: np.ndarray | None = None,
    whole_share: float = WHOLE_SHARE,
    rank_decay: float = RANK_DECAY,
) -> PackResult:
    """Pack the hits and their passages into ``budget`` characters (docs/architecture.md).

    Args:
        passages: expanded passages, best first; each lists its hits in ``child_ids``.
        hits: the children in rank order.
        budget: characters of passage text, >= 1; :data:`CONTEXT_SHARE` of it is kept for
            the text around the hits, and no cut is shorter than :data:`MIN_PIECE`.
        trim: hand over the hits that do not fit whole as their best sentences
            (:mod:`parrot_parents.retrieval.trimming`); needs ``query`` and the hits'
            stored sentences, and applies when the passages are the hits themselves (no
            expansion). Otherwise packing is as without it, and ``meta["trim"]`` says why.
        query: the question's unit vector (trimming scores sentences against it).
        whole_share: trimming's share of the budget for whole hits, in [0, 1] (default
            :data:`~parrot_parents.retrieval.trimming.WHOLE_SHARE`).
        rank_decay: trimming's discount of a sentence by its hit's rank, >= 0 (default
            :data:`~parrot_parents.retrieval.trimming.RANK_DECAY`).

    Returns:
        :class:`PackResult`; its passages are exact slices of the sources, in rank order,
        none of them only headings, and their lengths add up to at most ``budget``.

    Raises:
        ConfigurationError: ``budget < 1``, or a trimming setting out of its range.
    """
    if budget < 1:
        raise ConfigurationError(f"budget must be >= 1 character, got {budget!r}")
    if not 0.0 <= whole_share <= 1.0:
        raise ConfigurationError(f"whole_share must be in [0, 1], got {whole_share!r}")
    if not rank_decay >= 0.0:
        raise ConfigurationError(f"rank_decay must be >= 0, got {rank_decay!r}")
    trimming = {"whole_share": whole_share, "rank_decay": rank_decay}
    source = SourceIndex()
    for p in passages:
        source.add(p.document_id, p.start_index, p.text)
    # A hit that is only headings is never packed for itself (another hit's window may
    # still hold it); nor is a hit whose piece came out as only headings (a cut of its
    # heading line): each is set aside and the packing run again, so that its room goes
    # to the next hits. At most one run more per hit, and none without headings.
    aside = {h.id for h in hits if only_headings(h.text)}
    while True:
        result, bare = _pack_once(
            passages, hits, aside, budget, source, trim=trim, query=query, trimming=trimming
        )
        if bare <= aside:
            return result
        aside |= bare


def _pack_once(
    passages: Sequence[Passage],
    hits: Sequence[Hit],
    aside: set[str],
    budget: int,
    source: SourceIndex,
    *,
    trim: bool,
    query: np.ndarray | None,
    trimming: dict[str, float],
) -> tuple[PackResult, set[str]]:
    """:func:`pack` of the hits not ``aside``; and the hits of the passages left out for
    being only headings (see :func:`_finish`). ``trimming``: the keywords of
    :func:`~parrot_parents.retrieval.trimming.choose_sentences`."""
    owner = {c: p for p in passages for c in p.child_ids}
    can_grow = any(p.kind != "child" for p in passages)
    result = PackResult([], budget, 0)
    active = [h for h in hits if h.id not in aside]
    if trim:
        blocker = _trim_blocker(owner, active, query, can_grow)
        if blocker is None:
            assert query is not None
            packer = _trimmed(owner, active, budget, query, result, trimming)
            if packer.pieces:
                result.trim = "sentences"
                return _finish(result, packer, passages, hits, owner, source)
            blocker = "no sentence fits the budget"
            result.trimmed.clear()
        result.trim = f"skipped: {blocker}"
    hit_budget = int(budget * (1.0 - CONTEXT_SHARE)) if can_grow else budget
    packer = _Packer(owner, MIN_PIECE)
    # Phase 1: hits in rank order into the hit share of the budget.
    nxt = packer.take(active, 0, hit_budget, cut=not can_grow, result=result)
    if can_grow and packer.pieces:
        # Phase 2: the rest of the budget becomes text around the hits.
        packer.grow(budget)
    if nxt < len(active):
        # Fill: whatever growth could not use (pieces at their bounds) goes to more hits.
        packer.take(active, nxt, budget, cut=True, result=result)
    return _finish(result, packer, passages, hits, owner, source)


def _trim_blocker(
    owner: dict[str, Passage], hits: Sequence[Hit], query: np.ndarray | None, can_grow: bool
) -> str | None:
    """Why the hits cannot be trimmed to sentences; None when they can."""
    if query is None:
        return "no question vector"
    if can_grow:
        return "the passages are wider than their hits (trimming works on children)"
    missing = [
        h.id
        for h in hits
        if h.id in owner and (h.sentences is None or h.start_index is None or h.end_index is None)
    ]
    if missing:
        return (
            f"{len(missing)} hit(s) have no stored sentences (ingested without late "
            "chunking, or before sentences were stored: reindex to add them)"
        )
    return None


def _line(text: str, start: int, end: int) -> str:
    """The line of ``text`` around ``text[start:end]`` (a sentence never spans two)."""
    stop = text.find("\n", end)
    return text[text.rfind("\n", 0, start) + 1 : len(text) if stop < 0 else stop]


def _trimmed(
    owner: dict[str, Passage],
    hits: Sequence[Hit],
    budget: int,
    query: np.ndarray,
    result: PackResult,
    trimming: dict[str, float],
) -> _Packer:
    """The pieces of :func:`~parrot_parents.retrieval.trimming.choose_sentences`, given
    ``trimming`` as its keywords."""
    usable = [h for h in hits if h.id in owner]
    candidates = []
    for h in usable:
        assert h.sentences is not None and h.start_index is not None and h.end_index is not None
        at = h.start_index
        headings = frozenset(
            j
            for j, (s, e) in enumerate(h.sentences.spans)
            if only_headings(_line(h.text, s - at, e - at))
        )
        candidates.append(
            Candidate(
                (h.start_index, h.end_index),
                h.sentences.spans,
                h.sentences.similarities(query),
                headings,
            )
        )
    packer = _Packer(owner, 0)
    for h, choice in zip(usable, choose_sentences(candidates, budget, **trimming), strict=True):
        if not choice.spans:
            continue
        p = owner[h.id]
        span = (h.start_index or 0, h.end_index or 0)
        for piece in choice.spans:
            whole = choice.whole and piece == _span(p)
            packer.pieces.append(_Piece(p.document_id or "", piece, span, p, whole=whole, hit=h.id))
        packer.taken.add(p.id)
        if not choice.whole:
            result.trimmed.append(
                {
                    "id": h.id,
                    "kept": [list(x) for x in choice.spans],
                    "dropped": [list(x) for x in choice.dropped],
                    "dropped_chars": sum(e - s for s, e in choice.dropped),
                    "dropped_text": [h.text[s - span[0] : e - span[0]] for s, e in choice.dropped],
                }
            )
    return packer


def _finish(
    result: PackResult,
    packer: _Packer,
    passages: Sequence[Passage],
    hits: Sequence[Hit],
    owner: dict[str, Passage],
    source: SourceIndex,
) -> tuple[PackResult, set[str]]:
    """The passages of the packer's selection, and what was cut or substituted; and the
    hits of the passages left out because they came out as only headings."""
    taken = packer.taken
    hit_spans = {
        h.id: (h.start_index, h.end_index)
        for h in hits
        if h.start_index is not None and h.end_index is not None
    }
    emitted = _emit(
        packer.pieces, packer.loose, source, hit_spans, {h.id: h for h in hits}, result.mid_sentence
    )
    result.passages = [p for p in emitted if not only_headings(p.text)]
    bare = {c for p in emitted if only_headings(p.text) for c in p.child_ids}
    for i, p in enumerate(result.passages):
        p.rank = i
    result.used = sum(len(p.text) for p in result.passages)
    kept = {p.id for p in result.passages} | {c for p in result.passages for c in p.child_ids}
    for p in passages:
        if p.id not in taken and not (set(p.child_ids) & kept):
            result.cut.append(p.id)
        elif p.kind != "child" and p.id in taken and not packer.is_whole(p):
            result.substituted.append(p.id)
    # Every hit is accounted for: in a passage's child_ids, or listed as cut.
    for h in hits:
        if h.id in owner and h.id not in kept and h.id not in result.cut:
            result.cut.append(h.id)
    return result, bare


def _snap_to_words(source: SourceIndex, doc: str, start: int, end: int, reach: int = 40) -> Span:
    """Shrink a span that cuts a word in two to the nearest whitespace inside it.

    Windows and cuts end wherever the budget does; an LLM reads half-words as noise. Moves
    at most ``reach`` characters per side and never empties the span.
    """
    inner = source.slice(doc, start, end)
    if not inner:
        return start, end
    before = source.slice(doc, start - 1, start) if start > 0 else None
    if before and not before.isspace() and not inner[0].isspace():
        cut = next((i for i, ch in enumerate(inner[:reach]) if ch.isspace()), None)
        if cut is not None and start + cut + 1 < end:
            start += cut + 1
            inner = inner[cut + 1 :]
    after = source.slice(doc, end, end + 1)
    if after and not after.isspace() and not inner[-1].isspace():
        tail = inner[-reach:]
        cut = next((i for i in range(len(tail) - 1, -1, -1) if tail[i].isspace()), None)
        if cut is not None:
            new_end = end - (len(tail) - cut)
            if new_end > start:
                end = new_end
    return start, end


def _core(group: Sequence[_Piece], hit_spans: dict[str, Span]) -> Span | None:
    """The extent of the hits a group of grown pieces holds; None when a piece is whole
    or is no more than its hit (a child, or a cut of one: nothing to snap)."""
    spans = []
    for x in group:
        if x.whole or x.hit is None or x.hit not in hit_spans:
            return None
        hs, he = hit_spans[x.hit]
        if not (x.span[0] <= hs and he <= x.span[1]):
            return None
        spans.append((hs, he))
    return (min(s for s, _ in spans), max(e for _, e in spans)) if spans else None


def _at_sentence_start(source: SourceIndex, doc: str, pos: int) -> bool:
    before = source.slice(doc, max(pos - 2, 0), pos) if pos > 0 else ""
    if not before:  # the document's start, or text not known before it
        return before == ""
    return before[-1] == "\n" or (len(before) == 2 and before[0] in ".!?" and before[1].isspace())


def _at_sentence_end(source: SourceIndex, doc: str, pos: int) -> bool:
    last = source.slice(doc, pos - 1, pos) if pos > 0 else None
    after = source.slice(doc, pos, pos + 1)
    return after in (None, "", "\n") or (last in (".", "!", "?") and after.isspace())


def _snap_to_sentences(
    source: SourceIndex, doc: str, start: int, end: int, core: Span
) -> tuple[int, int, bool]:
    """Shrink a window around its hits (``core``) to whole sentences: its start to the
    first sentence start before the hits, its end to the last sentence end after them
    (the boundaries of :func:`~parrot_parents.stores.records.sentences.sentence_spans`).

    Returns ``(start, end, whole)``; ``whole`` is False when a side could not be moved to
    a boundary without cutting into the hits (a sentence longer than the room around
    them): that side is left where it was.
    """
    whole = True
    if start < core[0] and not _at_sentence_start(source, doc, start):
        head = source.slice(doc, start, core[0]) or ""
        m = SENTENCE_BREAK.search(head)
        if m is not None:
            start += m.end()
        else:
            whole = False
    if core[1] < end and not _at_sentence_end(source, doc, end):
        tail = source.slice(doc, core[1], end) or ""
        breaks = list(SENTENCE_BREAK.finditer(tail))
        if breaks:
            end = core[1] + breaks[-1].start()
        else:
            whole = False
    return start, end, whole


def _emit(
    selected: list[_Piece],
    loose: list[Passage],
    source: SourceIndex,
    hit_spans: dict[str, Span],
    hits: dict[str, Hit],
    mid_sentence: list[str],
) -> list[Passage]:
    """Merge overlapping or touching pieces per document; order by best rank.

    A window grown around hits is shrunk to whole sentences (:func:`_snap_to_sentences`);
    where a side cannot be, its ``document:start-end`` is added to ``mid_sentence``.

    A passage's score and branch scores are those of the best hit it holds (a window cut
    from a parent holds only some of the parent's hits), else its best part's.

    A passage's ``child_ids`` lists only the hits it holds: those cut from one of its
    pieces, and those whose span lies inside it. A hit of the same parent that fell outside
    the window is not listed (:func:`pack` reports it as cut).
    """
    out: list[Passage] = []
    seen: set[str] = set()
    for doc in dict.fromkeys(p.doc for p in selected):
        pieces = sorted((p for p in selected if p.doc == doc), key=lambda p: p.span)
        groups: list[list[_Piece]] = []
        for piece in pieces:
            if groups and piece.span[0] <= max(x.span[1] for x in groups[-1]):
                groups[-1].append(piece)
            else:
                groups.append([piece])
        for group in groups:
            start = min(x.span[0] for x in group)
            end = max(x.span[1] for x in group)
            core = _core(group, hit_spans)
            if core is not None and (start < core[0] or core[1] < end):
                start, end, whole = _snap_to_sentences(source, doc, start, end, core)
                if not whole:
                    mid_sentence.append(f"{doc}:{start}-{end}")
            start, end = _snap_to_words(source, doc, start, end)
            text = source.slice(doc, start, end)
            if text is None:  # pragma: no cover - every span comes from known text
                continue
            owners = list({id(x.owner): x.owner for x in group}.values())
            best = min(owners, key=lambda o: o.rank)
            kind: PassageKind
            if len(owners) > 1:
                kind, pid = "merged", f"{doc}#merged:{start}-{end}"
            elif (start, end) == _span(best):
                kind, pid = best.kind, best.id
            elif best.kind == "child":
                kind, pid = "child", best.id  # a child cut to fit
            else:
                kind, pid = "window", f"{doc}#window:{start}-{end}"
            if pid in seen:  # a second run of sentences of one child
                pid = f"{pid}#{start}-{end}"
            seen.add(pid)
            own = {x.hit for x in group if x.hit is not None}
            children = [
                c
                for c in dict.fromkeys(c for o in owners for c in o.child_ids)
                if c in own
                or (c in hit_spans and start <= hit_spans[c][0] and hit_spans[c][1] <= end)
                or (c not in hit_spans and c not in own)
            ]
            held = [hits[c] for c in children if c in hits]
            top: Hit | Passage = min(held, key=lambda h: h.rank) if held else best
            scores = [o.score for o in owners if o.score is not None]
            out.append(
                Passage(
                    pid,
                    text,
                    kind,
                    top.score if held else (max(scores) if scores else None),
                    best.rank,
                    doc or None,
                    start,
                    end,
                    best.source,
                    children,
                    # The best part's section and branch scores. Pages: those of the
                    # passages it was cut from (wider than the cut when a piece is short).
                    section=best.section.spanning(o.section for o in owners),
                    **branch_scores(top),
                )
            )
    out.extend(loose)
    out.sort(key=lambda p: p.rank)  # renumbered by _finish, once the bare ones are out
    return out
