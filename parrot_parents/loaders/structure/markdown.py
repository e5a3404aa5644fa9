"""Markdown structure through markdown-it-py (CommonMark, plus GFM pipe tables).

The parser gives each block the source lines it covers (``token.map``); line numbers are
turned into character offsets of the original text, so every span is exact. Headings are
ATX (``## Pay``) and Setext (a line underlined with ``===`` or ``---``); headings inside
code blocks, lists quotes or HTML are what CommonMark says they are. A table's caption is
the paragraph right before it when that paragraph is short (at most 200 characters).
"""

from __future__ import annotations

import re
from typing import Any

from parrot_parents.loaders.structure.tree import Heading, Structure, Table

__all__ = ["read_markdown"]

_NEWLINE = re.compile(r"\r\n|\r|\n")
_MAX_CAPTION = 200
_parser: Any = None


def _markdown_it() -> Any:
    global _parser
    if _parser is None:
        from markdown_it import MarkdownIt

        _parser = MarkdownIt("commonmark").enable("table")
    return _parser


class _Lines:
    """Character offsets of line starts, with markdown-it's notion of a line break."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def span(self, first: int, last: int) -> tuple[int, int]:
        """Span of lines ``[first, last)``, without the final line break and trailing blanks."""
        start = self.starts[min(first, len(self.starts) - 1)]
        end = self.starts[last] if last < len(self.starts) else len(self.text)
        while end > start and self.text[end - 1] in " \t\r\n":
            end -= 1
        while start < end and self.text[start] in " \t":
            start += 1
        return start, end


def read_markdown(text: str) -> Structure:
    """Headings and pipe tables of a Markdown ``text``, with exact character offsets."""
    tokens = _markdown_it().parse(text)
    lines = _Lines(text)
    headings: list[Heading] = []
    tables: list[Table] = []
    last_paragraph: tuple[str, int] | None = None  # (text, index of its closing token)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "heading_open" and tok.map is not None and tok.level == 0:
            title = " ".join(tokens[i + 1].content.split())
            start, end = lines.span(*tok.map)
            headings.append(Heading(int(tok.tag[1]), title, start, end))
        elif tok.type == "paragraph_open" and tok.level == 0:
            last_paragraph = (tokens[i + 1].content.strip(), i + 2)
        elif tok.type == "table_open" and tok.map is not None:
            caption = None
            if (
                last_paragraph is not None
                and last_paragraph[1] == i - 1
                and 0 < len(last_paragraph[0]) <= _MAX_CAPTION
            ):
                caption = " ".join(last_paragraph[0].split())
            i, table = _table(tokens, i, lines, caption)
            tables.append(table)
            continue
        i += 1
    return Structure("markdown", tuple(headings), tuple(tables))


def _table(tokens: list[Any], i: int, lines: _Lines, caption: str | None) -> tuple[int, Table]:
    """Read the table starting at ``tokens[i]``; return the index after it and the table."""
    open_tok = tokens[i]
    header: tuple[int, int] | None = None
    columns: list[str] = []
    rows: list[tuple[int, int]] = []
    in_head = False
    i += 1
    while i < len(tokens) and tokens[i].type != "table_close":
        tok = tokens[i]
        if tok.type == "thead_open":
            in_head = True
        elif tok.type == "thead_close":
            in_head = False
        elif tok.type == "tr_open" and tok.map is not None:
            span = lines.span(*tok.map)
            if in_head:
                header = span
            else:
                rows.append(span)
        elif tok.type == "inline" and in_head:
            columns.append(" ".join(tok.content.split()))
        i += 1
    start, end = lines.span(*open_tok.map)
    return i + 1, Table(start, end, header, tuple(columns), tuple(rows), caption)
