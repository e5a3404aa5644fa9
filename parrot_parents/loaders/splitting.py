"""Character-span splitting on sentence and word boundaries (langchain-text-splitters).

The splitter returns strings; we recover each piece's exact character span in the source,
so that every stored row satisfies ``source[start_index:end_index] == text``.
"""

from __future__ import annotations

from langchain_text_splitters import RecursiveCharacterTextSplitter

from parrot_parents.errors import ConfigurationError

__all__ = ["CHILD_SEPARATORS", "PARENT_SEPARATORS", "split_spans"]

#: Paragraph, line, sentence, clause, then word boundaries; a character cut only as a
#: last resort (a "word" longer than the chunk size).
CHILD_SEPARATORS = ["\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ", ""]
PARENT_SEPARATORS = ["\n\n", "\n", ". ", "? ", "! ", " ", ""]


def split_spans(
    text: str,
    chunk_size: int,
    chunk_overlap: int = 0,
    *,
    separators: list[str] | None = None,
) -> list[tuple[int, int]]:
    """Cut ``text`` into pieces of at most ``chunk_size`` characters.

    Args:
        text: the source text.
        chunk_size: maximum piece length, in characters.
        chunk_overlap: characters shared by neighbouring pieces (approximate: the
            splitter overlaps whole words/sentences up to this length).
        separators: boundaries tried in order; :data:`CHILD_SEPARATORS` by default.

    Returns:
        ``(start, end)`` character spans, in order, with ``text[start:end]`` equal to the
        piece (leading/trailing whitespace stripped). Whitespace-only text gives ``[]``.

    Raises:
        ConfigurationError: ``chunk_size < 1``, ``chunk_overlap < 0`` or
            ``chunk_overlap >= chunk_size``.
    """
    if chunk_size < 1:
        raise ConfigurationError(f"chunk_size must be >= 1 character, got {chunk_size!r}")
    if chunk_overlap < 0 or chunk_overlap >= chunk_size:
        raise ConfigurationError(
            f"chunk_overlap must be in [0, chunk_size={chunk_size}), got {chunk_overlap!r}"
        )
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        separators=separators or CHILD_SEPARATORS,
        keep_separator="end",
        strip_whitespace=True,
    )
    spans: list[tuple[int, int]] = []
    cursor = 0
    for piece in splitter.split_text(text):
        if not piece:
            continue
        # Search from just after the previous piece's start: pieces are in order, and an
        # overlapping piece starts inside its predecessor.
        search_from = spans[-1][0] + 1 if spans else 0
        start = text.find(piece, max(search_from, cursor - chunk_overlap))
        if start < 0:
            start = text.find(piece, search_from)
        if start < 0:  # pragma: no cover - would be a splitter bug
            raise RuntimeError(f"splitter returned text not found in the source: {piece[:40]!r}")
        end = start + len(piece)
        spans.append((start, end))
        cursor = end
    return spans
