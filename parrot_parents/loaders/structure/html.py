"""HTML structure through the standard library's HTML parser (``html.parser``).

The document text is the page's visible text, laid out as plain text: block elements are
separated by a blank line, table rows by a line break and cells by `` | ``; whitespace is
collapsed as a browser would (kept inside ``<pre>``). ``script``, ``style``, ``template``
and ``head`` are dropped, except the ``<title>``. Headings are ``h1``–``h6``; tables are
``<table>`` with the header row taken from ``<thead>``, else from a first row made only of
``<th>`` cells, and the caption from ``<caption>``. Every offset is into that text, which
is what the rows are cut from and what is returned.
"""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser

from parrot_parents.loaders.structure.tree import Heading, Structure, Table

__all__ = ["read_html"]

_BLOCKS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "ul",
    }
)
_SKIP = frozenset({"script", "style", "template", "head", "noscript"})
_SPACE = re.compile(r"\s+")


class _TableState:
    def __init__(self, start: int) -> None:
        self.start = start
        self.caption: str | None = None
        self.header: tuple[int, int] | None = None
        self.columns: list[str] = []
        self.rows: list[tuple[int, int]] = []
        self.in_head = False
        self.row_start: int | None = None
        self.row_cells = 0
        self.row_all_th = True
        self.row_texts: list[str] = []
        self.cell_start: int | None = None


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text = ""
        self.skip = 0
        self.pre = 0
        self.title: str | None = None
        self.in_title = False
        self.headings: list[Heading] = []
        self.heading: tuple[int, int] | None = None  # (level, start)
        self.tables: list[Table] = []
        self.stack: list[_TableState] = []
        self.caption_start: int | None = None

    @property
    def length(self) -> int:
        return len(self.text)

    def _break(self, newlines: int) -> None:
        """End the current line with ``newlines`` line breaks (none at the very start)."""
        if self.length == 0:
            return
        if self.text.endswith(" "):  # no trailing space before a break
            self.text = self.text.rstrip(" ")
        tail = self.text[-newlines:]
        have = len(tail) - len(tail.rstrip("\n"))
        self.text += "\n" * max(0, newlines - have)

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title = ((self.title or "") + data).strip()
            return
        if self.skip:
            return
        if self.pre:
            self.text += data
            return
        text = _SPACE.sub(" ", data)
        if text.startswith(" ") and (self.length == 0 or self.text[-1] in (" ", "\n")):
            text = text[1:]
        self.text += text

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
            return
        if tag in _SKIP:
            self.skip += 1
            return
        if self.skip:
            return
        if tag == "br":
            self._break(1)
        elif re.fullmatch(r"h[1-6]", tag):
            self._break(2)
            self.heading = (int(tag[1]), self.length)
        elif tag == "table":
            self._break(2)
            self.stack.append(_TableState(self.length))
        elif tag == "caption" and self.stack:
            self.caption_start = self.length
        elif tag == "thead" and self.stack:
            self.stack[-1].in_head = True
        elif tag == "tr" and self.stack:
            self._break(1)
            t = self.stack[-1]
            t.row_start, t.row_cells, t.row_all_th, t.row_texts = self.length, 0, True, []
        elif tag in ("td", "th") and self.stack:
            t = self.stack[-1]
            if t.row_cells:
                self.text += " | "
            t.row_cells += 1
            t.row_all_th &= tag == "th"
            t.cell_start = self.length
        elif tag in _BLOCKS:
            self._break(2)
            if tag == "pre":
                self.pre += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in ("br", "hr"):
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
            return
        if tag in _SKIP:
            self.skip = max(0, self.skip - 1)
            return
        if self.skip:
            return
        if re.fullmatch(r"h[1-6]", tag) and self.heading is not None:
            level, start = self.heading
            self.heading = None
            title = " ".join(self.text[start:].split())
            end = _rstrip_end(self, start)
            if title:
                self.headings.append(Heading(level, title, start, end))
            self._break(2)
        elif tag == "caption" and self.stack and self.caption_start is not None:
            caption = " ".join(self.text[self.caption_start :].split())
            self.stack[-1].caption = caption or None
            self.caption_start = None
            self._break(1)
        elif tag == "thead" and self.stack:
            self.stack[-1].in_head = False
        elif tag in ("td", "th") and self.stack:
            t = self.stack[-1]
            if t.cell_start is not None:
                t.row_texts.append(" ".join(self.text[t.cell_start :].split()))
                t.cell_start = None
        elif tag == "tr" and self.stack:
            t = self.stack[-1]
            if t.row_start is not None:
                span = (t.row_start, _rstrip_end(self, t.row_start))
                is_header = t.header is None and not t.rows and (t.in_head or t.row_all_th)
                if span[1] > span[0]:
                    if is_header:
                        t.header, t.columns = span, list(t.row_texts)
                    else:
                        t.rows.append(span)
                t.row_start = None
            self._break(1)
        elif tag == "table" and self.stack:
            t = self.stack.pop()
            end = _rstrip_end(self, t.start)
            if t.rows or t.header:
                self.tables.append(
                    Table(t.start, end, t.header, tuple(t.columns), tuple(t.rows), t.caption)
                )
            self._break(2)
        elif tag in _BLOCKS:
            if tag == "pre":
                self.pre = max(0, self.pre - 1)
            self._break(2)


def _rstrip_end(reader: _Reader, start: int) -> int:
    return max(start, len(reader.text.rstrip()))


def read_html(html: str) -> tuple[str, Structure]:
    """The visible text of ``html`` and its structure (offsets into that text)."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    text = reader.text.rstrip()
    # The text only lost trailing whitespace, so every offset stays valid; clamp the ends.
    n = len(text)
    headings = tuple(Heading(h.level, h.title, h.start, min(h.end, n)) for h in reader.headings)
    tables = tuple(
        sorted((replace(t, end=min(t.end, n)) for t in reader.tables), key=lambda t: t.start)
    )
    return text, Structure("html", headings, tables, title=reader.title or None)
