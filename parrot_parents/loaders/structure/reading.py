"""Choosing a reader by file type, and carrying a structure through ``Document.metadata``.

A reader returns the document text and its
:class:`~parrot_parents.loaders.structure.tree.Structure` (readers by suffix:
docs/architecture.md, "Structure-aware hierarchy"); any other suffix is plain text. The
structure travels in ``metadata["structure"]`` (its JSON form) to the hierarchy builder,
which takes it out before the metadata reaches any row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from parrot_parents.errors import DocumentReadError
from parrot_parents.loaders.readers import OnBadBytes, read_text_file
from parrot_parents.loaders.structure.tree import Structure

__all__ = ["READER_VERSION", "STRUCTURE_KEY", "read_document", "reader_for", "split_structure"]

#: Metadata key of a document's structure on its way to the builder (never stored on rows).
STRUCTURE_KEY = "structure"
#: Bumped whenever a reader's output changes; part of the policy version.
READER_VERSION = 1

_READERS = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html"}
_READERS[".pdf"] = "pdf"


def reader_for(path: str | Path) -> str:
    """``"markdown"``, ``"html"``, ``"pdf"`` or ``"text"`` for a file name."""
    return _READERS.get(Path(path).suffix.lower(), "text")


def read_document(
    path: str | Path, *, on_bad_bytes: OnBadBytes = "error"
) -> tuple[str, Structure, tuple[str, ...]]:
    """Text, structure and cleaning warnings of one file (reader by suffix, see above).

    Raises:
        DocumentReadError: the file cannot be read (missing, bad bytes, broken PDF).
    """
    kind = reader_for(path)
    if kind == "pdf":
        from parrot_parents.loaders.structure.pdf import read_pdf

        text, structure = read_pdf(path)
        return text, structure, ()
    result = read_text_file(path, on_bad_bytes=on_bad_bytes)
    if kind == "html":
        from parrot_parents.loaders.structure.html import read_html

        text, structure = read_html(result.text)
        return text, structure, result.warnings
    return result.text, structure_of(result.text, kind), result.warnings


def structure_of(text: str, reader: str) -> Structure:
    """The structure of a text already read: Markdown is parsed, other text has none.

    Raises:
        DocumentReadError: ``reader`` is ``html`` or ``pdf`` (their structure comes with
            their text, from :func:`read_document`).
    """
    if reader == "markdown":
        from parrot_parents.loaders.structure.markdown import read_markdown

        return read_markdown(text)
    if reader in ("html", "pdf"):
        raise DocumentReadError(f"<{reader} text>", "its structure comes from the file")
    return Structure("text")


def split_structure(metadata: dict[str, Any] | None) -> tuple[dict[str, Any], Structure | None]:
    """``metadata`` without its structure, and the structure (None when absent).

    The structure may be a :class:`Structure` or its JSON form (:meth:`Structure.to_dict`).
    """
    meta = dict(metadata or {})
    raw = meta.pop(STRUCTURE_KEY, None)
    if raw is None or isinstance(raw, Structure):
        return meta, raw
    if isinstance(raw, dict):
        return meta, Structure.from_dict(raw)
    return meta, None
