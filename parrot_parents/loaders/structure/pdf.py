"""PDF text and structure through pypdf.

The document text is each page's extracted text (``page.extract_text()``), pages joined by
a blank line; :attr:`Structure.pages` keeps each page's span, so every row can say on which
page(s) it lies (``page``, ``page_end``, 1-based). The outline (bookmarks), when the PDF
has one, gives the headings: an entry of nesting depth ``d`` is a heading of level
``d + 1`` placed where its title first appears on its target page (at the page start when
the extracted text does not contain it). Without an outline the PDF has no headings and is
chunked as plain text, page numbers still recorded. Tables are not detected in PDFs.
"""

from __future__ import annotations

import io
import logging
import threading
from pathlib import Path
from typing import Any

from parrot_parents.errors import DocumentReadError
from parrot_parents.loaders.structure.tree import Heading, Structure

__all__ = ["PAGE_SEPARATOR", "read_pdf"]

PAGE_SEPARATOR = "\n\n"

logger = logging.getLogger(__name__)


class _PypdfMessages(logging.Handler):
    """The messages pypdf logs in this thread while the handler is entered. pypdf reports
    what it repairs or gives up on through :mod:`logging`; with no handler configured,
    Python writes those records raw on stderr, where they read as the program's own lines.
    With one of ours attached they are not: a failed read gives the first as its reason, a
    read that succeeds passes them on at DEBUG level. A handler the user configured still
    gets them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.thread = threading.get_ident()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.messages.append(record.getMessage())

    def __enter__(self) -> list[str]:
        logging.getLogger("pypdf").addHandler(self)
        return self.messages

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("pypdf").removeHandler(self)


def read_pdf(source: str | Path | bytes) -> tuple[str, Structure]:
    """Text and structure of a PDF file (a path or its bytes).

    Raises:
        DocumentReadError: the file is missing, encrypted or not a readable PDF.
    """
    name = "<bytes>" if isinstance(source, bytes) else str(source)
    with _PypdfMessages() as messages:
        text, structure = _read(source, name, messages)
    for message in messages:
        logger.debug("pypdf, reading %s: %s", name, message)
    return text, structure


def _read(source: str | Path | bytes, name: str, messages: list[str]) -> tuple[str, Structure]:
    """:func:`read_pdf`, with pypdf's messages so far in ``messages``."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        data = source if isinstance(source, bytes) else Path(source).read_bytes()
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise DocumentReadError(name, "the PDF is encrypted")
        texts = [(page.extract_text() or "").replace("\x00", "") for page in reader.pages]
    except FileNotFoundError as exc:
        raise DocumentReadError(name, "no such file") from exc
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        # pypdf's first complaint says why (a header that is not a PDF's); the exception
        # only where it stopped.
        why = messages[0] if messages else str(exc) or type(exc).__name__
        raise DocumentReadError(name, f"not a readable PDF ({why})") from exc
    pages: list[tuple[int, int]] = []
    parts: list[str] = []
    pos = 0
    for i, page_text in enumerate(texts):
        if i:
            parts.append(PAGE_SEPARATOR)
            pos += len(PAGE_SEPARATOR)
        parts.append(page_text)
        pages.append((pos, pos + len(page_text)))
        pos += len(page_text)
    text = "".join(parts)
    headings: list[Heading] = []
    try:
        outline = reader.outline
    except Exception:  # a broken outline must not lose the text
        outline = []
    for level, title, page_index in _walk(reader, outline, 1):
        if page_index is None or not 0 <= page_index < len(pages):
            continue
        p_start, p_end = pages[page_index]
        found = text.find(title, p_start, p_end) if title else -1
        start = found if found >= 0 else p_start
        end = start + len(title) if found >= 0 else start
        headings.append(Heading(level, title, start, end))
    headings.sort(key=lambda h: h.start)
    meta = reader.metadata
    doc_title = str(meta.title).strip() if meta is not None and meta.title else None
    return text, Structure("pdf", tuple(headings), (), tuple(pages), doc_title or None)


def _walk(reader: Any, items: list[Any], level: int) -> list[tuple[int, str, int | None]]:
    """``(level, title, page index)`` of every outline entry, depth first."""
    out: list[tuple[int, str, int | None]] = []
    for item in items:
        if isinstance(item, list):
            out.extend(_walk(reader, item, level + 1))
            continue
        try:
            page = reader.get_destination_page_number(item)
        except Exception:
            page = None
        out.append((min(level, 6), " ".join(str(item.title or "").split()), page))
    return out
