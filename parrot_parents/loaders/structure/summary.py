"""The document layer: one extractive overview row per structured document.

The rule (``extractive_summary``), after the chunking-pipeline seed:

1. *Candidates* are the segments with text under their heading, except back matter
   (tables of contents, indexes, references...: :func:`is_back_matter`).
2. *Representative sections*: the document's opening, then candidates spread evenly over
   the rest, up to :data:`MAX_SECTIONS`; a document with more than twice
   :data:`MAX_SECTIONS` numbered headings (a novel's chapters) gets the opening only.
3. Each gives its *lead*: its first sentences, up to :data:`LEAD_CHARS` characters.
4. The text is the title, the leads (each under its section path), then a *guide*: the
   headings of the top two levels (below a single title heading), at most
   :data:`GUIDE_HEADINGS`.

The row (``layer: "document"``) is a child, embedded and lexically indexed; its text is
not a span of the source, so it has no offsets and no parent, and ``eval`` refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from parrot_parents.loaders.structure.sections import Segment

__all__ = ["GUIDE_HEADINGS", "LEAD_CHARS", "MAX_SECTIONS", "Overview", "extractive_summary"]

MAX_SECTIONS = 4
LEAD_CHARS = 300
GUIDE_HEADINGS = 30

_BACK_MATTER = re.compile(
    r"^(?:table of contents|contents|index|references?|bibliography|notes|footnotes|"
    r"see also|external links|further reading|sources|works cited|glossary|"
    r"acknowledge?ments?|appendix\b.*|about the authors?|copyright.*|colophon|credits)$",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?](?=\s)")


@dataclass(frozen=True)
class Overview:
    """An extractive overview: the chosen sections' ordinals, the text, and the guide."""

    ordinals: tuple[int, ...]
    text: str
    guide: tuple[str, ...]


def is_back_matter(seg: Segment) -> bool:
    """True for a table of contents, an index or back matter (or a section under one)."""
    return any(_BACK_MATTER.match(" ".join(title.split()).strip(" .:")) for title in seg.path)


def _lead(text: str, seg: Segment) -> str:
    body = text[seg.start : seg.end]
    if seg.level:  # drop the heading line(s)
        nl = body.find("\n")
        body = body[nl + 1 :] if nl >= 0 else ""
    body = " ".join(body.split())
    if len(body) <= LEAD_CHARS:
        return body
    cut = body[:LEAD_CHARS]
    ends = [m.end() for m in _SENTENCE_END.finditer(cut)]
    if ends:
        return cut[: ends[-1]]
    return cut.rsplit(" ", 1)[0] + " …"


def _spread(items: list[Segment], k: int) -> list[Segment]:
    if k <= 0 or not items:
        return []
    if len(items) <= k:
        return items
    step = len(items) / k
    return [items[int(i * step)] for i in range(k)]


def extractive_summary(text: str, segs: list[Segment], title: str) -> Overview:
    """The overview of a document from its segments (module docstring for the rule)."""
    candidates = [s for s in segs if not is_back_matter(s) and _lead(text, s)]
    numbered = sum(1 for s in candidates if s.section_ordinal > 0)
    limit = 1 if numbered > 2 * MAX_SECTIONS else MAX_SECTIONS
    chosen = candidates[:1] + _spread(candidates[1:], limit - 1)
    parts = [title]
    for seg in chosen:
        lead = _lead(text, seg)
        parts.append(f"{seg.section_path}: {lead}" if seg.section_path else lead)
    headed = [s for s in segs if s.level and not is_back_matter(s)]
    top = min((s.level for s in headed), default=1)
    # Under a single top heading (a title), the guide lists the two levels below it.
    if sum(1 for s in headed if s.level == top) == 1:
        top += 1
    lines = [f"{'  ' * (s.level - top)}- {s.path[-1]}" for s in headed if top <= s.level <= top + 1]
    guide = tuple(lines[:GUIDE_HEADINGS])
    if guide:
        parts.append("Sections:\n" + "\n".join(guide))
    return Overview(tuple(s.ordinal for s in chosen), "\n\n".join(parts), guide)
