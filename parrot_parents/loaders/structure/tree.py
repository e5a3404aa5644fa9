"""The structure a reader finds in a document: headings and tables, with exact offsets.

Offsets are Python ``str`` indices into the document text (end exclusive). A
:class:`Structure` is plain data, stored with the document so that ``reindex`` can
re-chunk without reading the file again; :meth:`Structure.to_dict` and
:meth:`Structure.from_dict` round-trip it through JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Heading", "Structure", "Table"]

Span = tuple[int, int]


@dataclass(frozen=True)
class Heading:
    """A heading: ``level`` 1 (top) to 6, its ``title`` text, and the span of its line(s)."""

    level: int
    title: str
    start: int
    end: int


@dataclass(frozen=True)
class Table:
    """A table: its whole span, an optional ``caption``, the header row and the body rows.

    ``header`` is the span of the header row (None when the table has none) and ``columns``
    its cell texts; ``rows`` are the spans of the body rows, in order.
    """

    start: int
    end: int
    header: Span | None
    columns: tuple[str, ...]
    rows: tuple[Span, ...]
    caption: str | None = None


@dataclass(frozen=True)
class Structure:
    """Headings and tables of one document, in document order, and who read it.

    Attributes:
        reader: ``"markdown"``, ``"html"``, ``"pdf"`` or ``"text"`` (no structure).
        headings: every heading, by start offset.
        tables: every table, by start offset.
        pages: for a PDF, the span of each page's text (page ``i + 1`` is ``pages[i]``).
        title: the document's title when the source names one (HTML ``<title>``, PDF
            metadata); None otherwise.
    """

    reader: str
    headings: tuple[Heading, ...] = ()
    tables: tuple[Table, ...] = ()
    pages: tuple[Span, ...] = field(default=())
    title: str | None = None

    @property
    def empty(self) -> bool:
        """True when there is neither a heading nor a table."""
        return not self.headings and not self.tables

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (see :meth:`from_dict`)."""
        return {
            "reader": self.reader,
            "title": self.title,
            "headings": [[h.level, h.title, h.start, h.end] for h in self.headings],
            "tables": [asdict(t) for t in self.tables],
            "pages": [list(p) for p in self.pages],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Structure:
        """The inverse of :meth:`to_dict`."""
        return cls(
            reader=str(data.get("reader", "text")),
            title=data.get("title"),
            headings=tuple(
                Heading(int(a), str(b), int(c), int(d)) for a, b, c, d in data.get("headings", [])
            ),
            tables=tuple(
                Table(
                    start=int(t["start"]),
                    end=int(t["end"]),
                    header=tuple(t["header"]) if t.get("header") else None,
                    columns=tuple(t.get("columns", ())),
                    rows=tuple((int(s), int(e)) for s, e in t.get("rows", ())),
                    caption=t.get("caption"),
                )
                for t in data.get("tables", [])
            ),
            pages=tuple((int(s), int(e)) for s, e in data.get("pages", [])),
        )
