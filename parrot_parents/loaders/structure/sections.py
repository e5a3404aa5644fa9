"""From headings to parents: the section tree, and the units that become parent rows.

The merge and split rules, and why tiny sections merge: docs/architecture.md,
"Section parents and children".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parrot_parents.loaders.structure.ordinals import section_ordinal
from parrot_parents.loaders.structure.tree import Heading

__all__ = ["PATH_SEPARATOR", "Segment", "Unit", "plan_units", "segments"]

#: Joins the headings of a ``section_path`` ("5. Leave > Vacation").
PATH_SEPARATOR = " > "


@dataclass(frozen=True)
class Segment:
    """Text from one heading to the next heading of any level (stripped of blanks)."""

    start: int
    end: int
    level: int  # 0 for the text before the first heading
    path: tuple[str, ...]
    ordinal: int
    section_ordinal: int
    #: End of the heading's line(s), trailing blanks left out (``start`` before any heading).
    heading_end: int = -1

    @property
    def section_path(self) -> str:
        return PATH_SEPARATOR.join(self.path)


@dataclass(frozen=True)
class Unit:
    """A span that becomes one parent (or is cut into parent_chunks when too long)."""

    start: int
    end: int
    first: Segment  # the segment the unit starts in: its section metadata


@dataclass
class _Node:
    level: int
    start: int
    end: int
    segment: Segment | None
    children: list[_Node] = field(default_factory=list)


def _rstrip(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _lstrip(text: str, start: int, end: int) -> int:
    while start < end and text[start].isspace():
        start += 1
    return start


def segments(text: str, headings: tuple[Heading, ...] | list[Heading]) -> list[Segment]:
    """The segments of ``text``, in order; blank ones are left out (docs/architecture.md)."""
    out: list[Segment] = []
    ordered = sorted(headings, key=lambda h: h.start)
    first = ordered[0].start if ordered else len(text)
    s, e = _span(text, 0, first)
    if e > s:
        out.append(Segment(s, e, 0, (), 0, 0))
    stack: list[Heading] = []
    for i, h in enumerate(ordered):
        while stack and stack[-1].level >= h.level:
            stack.pop()
        stack.append(h)
        nxt = ordered[i + 1].start if i + 1 < len(ordered) else len(text)
        end = _rstrip(text, h.start, nxt)
        path = tuple(x.title for x in stack)
        h_end = _rstrip(text, h.start, min(h.end, end))
        seg = Segment(h.start, end, h.level, path, i + 1, section_ordinal(h.title), h_end)
        out.append(seg)
    return out


def _tree(text: str, segs: list[Segment]) -> _Node:
    root = _Node(0, 0, len(text), None)
    stack = [root]
    for seg in segs:
        if seg.level == 0:
            continue
        while stack[-1].level >= seg.level:
            stack.pop()
        node = _Node(seg.level, seg.start, len(text), seg)
        stack[-1].children.append(node)
        stack.append(node)
    _close(root, len(text))
    return root


def _close(node: _Node, end: int) -> None:
    node.end = end
    for i, child in enumerate(node.children):
        nxt = node.children[i + 1].start if i + 1 < len(node.children) else end
        _close(child, nxt)


def plan_units(text: str, segs: list[Segment], *, min_chars: int, max_chars: int) -> list[Unit]:
    """The units of ``text`` (docs/architecture.md), in document order, without overlaps."""
    by_start = {s.start: s for s in segs}
    root = _tree(text, segs)
    preface = segs[0] if segs and segs[0].level == 0 else None
    units = _units(text, root, by_start, preface, min_chars, max_chars)
    return [u for u in units if u.end > u.start]


def _span(text: str, start: int, end: int) -> tuple[int, int]:
    s = _lstrip(text, start, end)
    return s, _rstrip(text, s, end)


def _units(
    text: str,
    node: _Node,
    by_start: dict[int, Segment],
    preface: Segment | None,
    min_chars: int,
    max_chars: int,
) -> list[Unit]:
    start, end = _span(text, node.start, node.end)
    own = node.segment or preface
    if end <= start:
        return []
    if (end - start <= max_chars and node.segment is not None) or not node.children:
        if own is None:
            own = Segment(start, end, 0, (), 0, 0)
        return [Unit(start, end, own)]
    # Open the section: its intro, then each subsection, whole or opened in turn.
    items: list[tuple[Unit, bool]] = []  # (unit, may merge with its neighbours)
    i_start, i_end = _span(text, node.start, node.children[0].start)
    if i_end > i_start and own is not None:
        items.append((Unit(i_start, i_end, own), True))
    for child in node.children:
        c_start, c_end = _span(text, child.start, child.end)
        if c_end <= c_start:
            continue
        if c_end - c_start <= max_chars or not child.children:
            items.append((Unit(c_start, c_end, by_start[child.start]), True))
        else:
            sub = _units(text, child, by_start, None, min_chars, max_chars)
            items.extend((u, False) for u in sub)
    return _merge(items, min_chars, max_chars)


def _heading_only(unit: Unit) -> bool:
    """True when the unit is its first heading's line(s) alone."""
    return unit.first.level > 0 and unit.end <= unit.first.heading_end


def _merge(items: list[tuple[Unit, bool]], min_chars: int, max_chars: int) -> list[Unit]:
    out: list[Unit] = []
    current: Unit | None = None
    current_ok = False
    for unit, ok in items:
        if current is not None and _heading_only(current):
            # A heading belongs to the text under it, whatever the sizes: a parent that
            # is a heading alone would give its one child nothing to expand to.
            current, current_ok = Unit(current.start, unit.end, current.first), ok
            continue
        if (
            current is not None
            and current_ok
            and ok
            and current.end - current.start < min_chars
            and unit.end - current.start <= max_chars
        ):
            current = Unit(current.start, unit.end, current.first)
            continue
        if current is not None:
            out.append(current)
        current, current_ok = unit, ok
    if current is not None:
        if out and _heading_only(current):
            # An empty last section stays with the text before it.
            out[-1] = Unit(out[-1].start, current.end, out[-1].first)
        else:
            out.append(current)
    return out
