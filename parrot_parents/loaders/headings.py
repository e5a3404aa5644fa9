"""Headings of a document, for the default (extractive) indexer of :mod:`.extractive`.

Without a structure tree the section of a chunk is read from the text itself: Markdown
ATX headings (``## Title``) and wikitext headings (``= Title =``, ``= = Section = =``),
the level being the number of ``#`` or ``=``. The path of a chunk is the chain of the
headings above it, nearest last.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

__all__ = ["HeadingIndex"]

_ATX = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
# wikitext: "= Title =" or "= = Section = =" (levels written with spaces between marks)
_WIKI = re.compile(r"^[ \t]*((?:= ?){1,6}) *([^=\n]+?) *(?:= ?){1,6}[ \t]*$", re.M)


@dataclass(frozen=True)
class _Heading:
    start: int
    level: int
    title: str


class HeadingIndex:
    """The headings of one text, searchable by character offset."""

    def __init__(self, text: str) -> None:
        found: dict[int, _Heading] = {}
        for m in _ATX.finditer(text):
            found[m.start()] = _Heading(m.start(), len(m.group(1)), m.group(2).strip())
        for m in _WIKI.finditer(text):
            level = m.group(1).count("=")
            found.setdefault(m.start(), _Heading(m.start(), level, m.group(2).strip()))
        self._headings = [found[k] for k in sorted(found) if found[k].title]
        self._starts = [h.start for h in self._headings]

    def path(self, offset: int) -> list[str]:
        """Titles of the headings that start before ``offset`` and enclose it, outermost
        first (a deeper heading is dropped by the next one of its level or above)."""
        stack: list[_Heading] = []
        for h in self._headings[: bisect.bisect_left(self._starts, offset)]:
            while stack and stack[-1].level >= h.level:
                stack.pop()
            stack.append(h)
        return [h.title for h in stack]
