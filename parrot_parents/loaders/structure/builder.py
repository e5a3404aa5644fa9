"""Rows of a structured document: section parents, section and table-row children.

Called by :meth:`~parrot_parents.loaders.hierarchy.LateChunkingProcessor.build_hierarchy`
when section parents are on and the reader found headings or tables; the 2-/3-level choice
and the markers are the spec's, as for plain text. Every row records ``layer``,
``section_path``, ``ordinal`` and ``section_ordinal`` (plus ``page``/``page_end`` for a
PDF); with ``preamble=True`` the children carry ``retrieval_preamble`` (title and section
path, embedded and lexically indexed, never returned). The rules for headings and tables:
docs/architecture.md, "Section parents and children".
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from langchain_core.documents import Document

from parrot_parents.loaders.chunk_info import ChunkInfo
from parrot_parents.loaders.splitting import CHILD_SEPARATORS, PARENT_SEPARATORS, split_spans
from parrot_parents.loaders.structure.sections import (
    PATH_SEPARATOR,
    Segment,
    Unit,
    plan_units,
    segments,
)
from parrot_parents.loaders.structure.summary import extractive_summary
from parrot_parents.loaders.structure.tree import Heading, Structure, Table
from parrot_parents.stores.records.ids import content_sha256, make_row_id
from parrot_parents.stores.records.markers import OFFSETS_EXACT, PARENT_CHUNK
from parrot_parents.stores.records.structure_markers import (
    LAYER,
    LAYER_DOCUMENT,
    LAYER_SECTION,
    LAYER_TABLE,
    LAYER_TABLE_ROW,
    ORDINAL,
    PAGE,
    PAGE_END,
    PARENT_TABLE_ID,
    RETRIEVAL_PREAMBLE,
    SECTION_ORDINAL,
    SECTION_PATH,
)

__all__ = ["Rows", "SectionSizes", "build_rows", "document_title"]


@dataclass(frozen=True)
class SectionSizes:
    """Sizes in characters: children, child overlap, parent_chunks and their overlap."""

    child: int
    child_overlap: int
    parent: int
    parent_overlap: int

    @property
    def min_section(self) -> int:
        return max(1, self.parent // 4)

    @property
    def max_section(self) -> int:
        return self.parent + self.parent // 4


def document_title(document_id: str, metadata: dict[str, Any], structure: Structure) -> str:
    """The title a preamble names: ``metadata["title"]``, the reader's title, or the file
    name of the document id without its suffix."""
    title = metadata.get("title") or structure.title
    if isinstance(title, str) and title.strip():
        return " ".join(title.split())
    return PurePosixPath(document_id).stem or document_id


class _Segments:
    def __init__(self, segs: list[Segment]) -> None:
        self.segs = segs
        self.starts = [s.start for s in segs]

    def at(self, pos: int) -> Segment | None:
        i = bisect.bisect_right(self.starts, pos) - 1
        return self.segs[i] if i >= 0 else (self.segs[0] if self.segs else None)

    def main(self, start: int, end: int) -> Segment | None:
        """The segment holding most of ``[start, end)``."""
        i = max(0, bisect.bisect_right(self.starts, start) - 1)
        best, best_len = self.at(start), -1
        while i < len(self.segs) and self.segs[i].start < end:
            seg = self.segs[i]
            nxt = self.starts[i + 1] if i + 1 < len(self.segs) else end
            overlap = min(end, nxt) - max(start, seg.start)
            if overlap > best_len:
                best, best_len = seg, overlap
            i += 1
        return best


def _section_meta(seg: Segment | None) -> dict[str, Any]:
    if seg is None:
        return {SECTION_PATH: "", ORDINAL: 0, SECTION_ORDINAL: 0}
    return {
        SECTION_PATH: seg.section_path,
        ORDINAL: seg.ordinal,
        SECTION_ORDINAL: seg.section_ordinal,
    }


class Rows:
    """The parents and children of one document as they are added, each a slice of
    ``text`` with its exact offsets and the keys of its level; ``base`` is the metadata
    every row starts from, ``pages`` the page spans of a PDF (rows then name their pages).
    """

    def __init__(
        self,
        text: str,
        document_id: str,
        base: dict[str, Any],
        pages: tuple[tuple[int, int], ...] = (),
    ) -> None:
        self.text = text
        self.document_id = document_id
        self.base = base
        self.page_starts = [p[0] for p in pages]
        # Parents carry the hash of the whole document, so that the same content stored
        # under another id can be found (GIN containment) and reported.
        self.digest = content_sha256(text)
        self.parents: list[Document] = []
        self.children: list[ChunkInfo] = []

    def _pages(self, start: int, end: int) -> dict[str, Any]:
        if not self.page_starts:
            return {}
        first = max(0, bisect.bisect_right(self.page_starts, start) - 1)
        last = max(first, bisect.bisect_right(self.page_starts, max(start, end - 1)) - 1)
        return {PAGE: first + 1, PAGE_END: last + 1}

    def parent(self, kind: str, start: int, end: int, meta: dict[str, Any]) -> str:
        """Add the parent ``[start, end)`` of ``kind``; its id."""
        parent_id = make_row_id(self.document_id, kind, start, end)
        row = {
            **self.base,
            **meta,
            "chunk_index": len(self.parents),
            "start_index": start,
            "end_index": end,
            "is_chunk": False,
            "content_sha256": self.digest,
            **self._pages(start, end),
        }
        self.parents.append(Document(id=parent_id, page_content=self.text[start:end], metadata=row))
        return parent_id

    def child(
        self,
        parent_id: str,
        start: int,
        end: int,
        meta: dict[str, Any],
        table: tuple[str | None, tuple[str, ...]] = (None, ()),
    ) -> None:
        """Add the child ``[start, end)`` of ``parent_id`` (``table``: the caption and
        column headers of a ``table_row`` child)."""
        i = len(self.children)
        row = {
            **self.base,
            **meta,
            "is_chunk": True,
            "parent_document_id": parent_id,
            "chunk_index": i,
            "start_index": start,
            "end_index": end,
            **self._pages(start, end),
        }
        self.children.append(
            ChunkInfo(
                make_row_id(self.document_id, "child", start, end),
                parent_id,
                self.document_id,
                i,
                start,
                end,
                self.text[start:end],
                row,
                table_caption=table[0],
                table_columns=table[1],
            )
        )


def _subtract(start: int, end: int, holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, cur = [], start
    for h_start, h_end in holes:
        if h_end <= cur or h_start >= end:
            continue
        if h_start > cur:
            out.append((cur, h_start))
        cur = max(cur, h_end)
    if cur < end:
        out.append((cur, end))
    return out


def _row_groups(table: Table, size: int) -> list[tuple[int, int]]:
    groups: list[tuple[int, int]] = []
    for r_start, r_end in table.rows:
        if groups and r_end - groups[-1][0] <= size:
            groups[-1] = (groups[-1][0], r_end)
        else:
            groups.append((r_start, r_end))
    return groups


def build_rows(
    rows: Rows,
    structure: Structure,
    sizes: SectionSizes,
    *,
    three_level: bool,
    preamble: bool,
    document_layer: bool = False,
) -> None:
    """Add the parents and children of one structured document to ``rows``
    (docs/architecture.md). Children come in document order with ``chunk_index`` 0, 1, 2…
    """
    text = rows.text
    segs = segments(text, structure.headings)
    index = _Segments(segs)
    units = plan_units(text, segs, min_chars=sizes.min_section, max_chars=sizes.max_section)
    title = document_title(rows.document_id, rows.base, structure)
    has_top = any(h.level == 1 for h in structure.headings)

    def preamble_for(seg: Segment | None) -> str | None:
        if not preamble:
            return None
        path = list(seg.path) if seg is not None else []
        parts = path if has_top and path else [title, *path]
        return PATH_SEPARATOR.join(parts) or None

    def section_row(seg: Segment | None, **meta: Any) -> dict[str, Any]:
        """``meta`` of a section row with the keys of ``seg`` and, when on, its preamble."""
        row = {LAYER: LAYER_SECTION, **meta, **_section_meta(seg)}
        if (p := preamble_for(seg)) is not None:
            row[RETRIEVAL_PREAMBLE] = p
        return row

    # (start, end, parent id) regions inside which children are cut.
    regions: list[tuple[int, int, str]] = []
    runs = _HeadingRuns(text, structure.headings)
    if three_level:
        for unit in units:
            for p_start, p_end in _pieces(text, unit, sizes, runs):
                seg = index.at(p_start) if p_start != unit.start else unit.first
                meta = section_row(seg, document_type=PARENT_CHUNK)
                regions.append((p_start, p_end, rows.parent("parent_chunk", p_start, p_end, meta)))
    else:
        doc_id = rows.parent(
            "parent",
            0,
            len(text),
            {"is_full_document": True, LAYER: LAYER_SECTION, **_section_meta(None)},
        )
        regions = [(u.start, u.end, doc_id) for u in units]

    tables = sorted(structure.tables, key=lambda t: t.start)
    holes = [(t.start, t.end) for t in tables]
    table_starts = {t.start for t in tables}
    spans: dict[tuple[int, int], tuple[str, dict[str, Any]]] = {}
    # Caption and column headers of each table_row child, for the ingestion strategies.
    headers: dict[tuple[int, int], tuple[str | None, tuple[str, ...]]] = {}
    cells = _cells(segs, max(1, sizes.child // 4))
    alone: list[tuple[int, int, str]] = []  # heading runs with no text after them
    for r_start, r_end, parent_id in regions:
        # A stretch is a region's text between tables; headings move only within one.
        for a, b in _subtract(r_start, r_end, holes):
            stretch = [
                (max(a, c_start), min(b, c_end))
                for c_start, c_end in cells
                if max(a, c_start) < min(b, c_end)
            ]
            # Headings right above a table belong to it (its rows name them), not to
            # the text before them.
            kept, dropped = runs.cut(
                stretch, sizes.child, sizes.child_overlap, glue_trailing=b not in table_starts
            )
            alone.extend((s, e, parent_id) for s, e in dropped)
            for start, end in kept:
                if (start, end) not in spans:  # overlapping parent_chunks cut it twice
                    spans[(start, end)] = (parent_id, section_row(index.main(start, end)))

    for table in tables:
        table_id = make_row_id(rows.document_id, "table", table.start, table.end)
        seg = index.main(table.start, table.end)
        holder = next((pid for s, e, pid in regions if s <= table.start and table.end <= e), None)
        if holder is None:
            meta = {"document_type": PARENT_CHUNK, LAYER: LAYER_TABLE, **_section_meta(seg)}
            holder = rows.parent("table", table.start, table.end, meta)
        header = text[table.header[0] : table.header[1]] if table.header else ""
        context = "\n".join(x for x in (preamble_for(seg), table.caption, header) if x)
        columns = tuple(c for c in table.columns if c) or ((header,) if header else ())
        for start, end in _row_groups(table, sizes.child):
            meta = {LAYER: LAYER_TABLE_ROW, PARENT_TABLE_ID: table_id, **_section_meta(seg)}
            if context:
                meta[RETRIEVAL_PREAMBLE] = context
            spans[(start, end)] = (holder, meta)
            headers[(start, end)] = (table.caption, columns)

    if not spans:
        # Headings and nothing else: they stay children, or the document could not be found.
        for start, end, parent_id in alone:
            spans[(start, end)] = (parent_id, section_row(index.main(start, end)))

    for (start, end), (parent_id, meta) in sorted(spans.items()):
        rows.child(parent_id, start, end, meta, headers.get((start, end), (None, ())))
    if document_layer:
        rows.children.append(_overview_row(rows, segs, title))


def _overview_row(rows: Rows, segs: list[Segment], title: str) -> ChunkInfo:
    """The ``document`` layer row (:mod:`.summary`): a child without parent or offsets."""
    overview = extractive_summary(rows.text, segs, title)
    meta = {
        **rows.base,
        LAYER: LAYER_DOCUMENT,
        **_section_meta(None),
        "is_chunk": True,
        OFFSETS_EXACT: False,
        "summary_sections": list(overview.ordinals),
    }
    # No parent and no span: late chunking leaves it to the store, which embeds its text.
    document_id = rows.document_id
    return ChunkInfo(f"{document_id}#document", "", document_id, -1, 0, 0, overview.text, meta)


class _HeadingRuns:
    """Moves heading lines onto the text that follows them, so no child is a heading alone.

    The splitter sees a heading line as a short line like any other: when the paragraph
    after it does not fit beside it, the heading (or a run of nested headings) ends one
    piece and its text starts the next. :meth:`cut` gives such a run to the next piece.
    """

    def __init__(self, text: str, headings: tuple[Heading, ...]) -> None:
        self.text = text
        # The end of a heading's line(s), trailing blanks left out -> its start.
        self.starts = {_rstrip(text, h.start, h.end): h.start for h in headings}

    def _tail(self, start: int, end: int) -> int:
        """Start of the run of whole headings that ends ``[start, end)`` (``end``: none)."""
        tail = end
        while (h := self.starts.get(_rstrip(self.text, start, tail))) is not None:
            if h < start or h >= tail:
                break
            tail = h
        return tail

    def _split(
        self, start: int, end: int, size: int, overlap: int, separators: list[str]
    ) -> list[tuple[int, int]]:
        return [
            (start + s, start + e)
            for s, e in split_spans(self.text[start:end], size, overlap, separators=separators)
        ]

    def cut(
        self,
        cells: list[tuple[int, int]],
        size: int,
        overlap: int,
        *,
        separators: list[str] | None = None,
        bounded: bool = True,
        glue_trailing: bool = True,
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """``(kept, dropped)``: the pieces of consecutive ``cells`` of one stretch of text
        (cells are never crossed by the splitter), at most ``size`` characters each.

        A piece's trailing headings start the next piece instead. With ``bounded``, that
        piece is cut again so that headings and text together stay within ``size`` (unless
        the headings leave less than a quarter of it, then it exceeds ``size`` by their
        length); the rest of its cell is cut afresh after it. Headings with no text after
        them in the stretch (an empty last section) stay with the text before them when
        ``glue_trailing``; otherwise (a heading right above a table), or when there is no
        text before them, they are ``dropped``: they remain in the parent, and a table
        below them names them in its rows' section path.
        """
        seps = list(separators or CHILD_SEPARATORS)
        kept: list[tuple[int, int]] = []
        carry: int | None = None
        end = 0
        for lo, hi in cells:
            pieces = deque(self._split(lo, hi, size, overlap, seps))
            while pieces:
                start, end = pieces.popleft()
                if carry is not None:
                    room = size - (start - carry)
                    if bounded and end - carry > size and room >= max(1, size // 4):
                        start, end = self._split(start, hi, room, 0, seps)[0]
                        pieces = deque(self._split(end, hi, size, overlap, seps))
                    start = min(start, carry)
                tail = self._tail(start, end)
                carry = tail if tail < end else None
                body = _rstrip(self.text, start, tail)
                if body > start:
                    kept.append((start, body))
        if carry is None:
            return kept, []
        if kept and glue_trailing:
            kept[-1] = (kept[-1][0], end)
            return kept, []
        return kept, [(carry, end)]


def _rstrip(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _cells(segs: list[Segment], min_chars: int) -> list[tuple[int, int]]:
    """Spans that children never cross: one per segment, a segment shorter than
    ``min_chars`` (a heading alone, a one-line section) glued to the next one."""
    cells: list[tuple[int, int]] = []
    glue = False
    for seg in segs:
        if glue and cells:
            cells[-1] = (cells[-1][0], seg.end)
        else:
            cells.append((seg.start, seg.end))
        glue = cells[-1][1] - cells[-1][0] < min_chars
    return cells


def _pieces(
    text: str, unit: Unit, sizes: SectionSizes, runs: _HeadingRuns
) -> list[tuple[int, int]]:
    """The parent_chunks of a unit: itself, or overlapping pieces when it is too long (a
    heading never ends a piece: it starts the next one, as for children)."""
    if unit.end - unit.start <= sizes.max_section:
        return [(unit.start, unit.end)]
    kept, dropped = runs.cut(
        [(unit.start, unit.end)],
        sizes.parent,
        sizes.parent_overlap,
        separators=PARENT_SEPARATORS,
        bounded=False,
    )
    return kept or dropped
