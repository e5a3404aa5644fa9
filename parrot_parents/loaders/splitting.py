"""Character-span splitting on sentence and word boundaries.

The algorithm is langchain-text-splitters' ``RecursiveCharacterTextSplitter``
(``keep_separator="end"``, ``strip_whitespace=True``), re-stated over ``(start, end)``
offsets: every piece is a slice of the source by construction, so each stored row satisfies
``source[start_index:end_index] == text`` even when the same sentence repeats. Pieces are
never located afterwards with a text search (``str.find`` returns the first copy of a
repeated line, not the one that was cut). The piece texts equal the library's; a property
test checks it (tests/loaders/test_splitting_property.py).
"""

from __future__ import annotations

from parrot_parents.errors import ConfigurationError

__all__ = ["CHILD_SEPARATORS", "PARENT_SEPARATORS", "split_spans"]

#: Paragraph, line, sentence, clause, then word boundaries; a character cut only as a
#: last resort (a "word" longer than the chunk size).
CHILD_SEPARATORS = ["\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ", ""]
PARENT_SEPARATORS = ["\n\n", "\n", ". ", "? ", "! ", " ", ""]

Span = tuple[int, int]


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
    splitter = _SpanSplitter(text, chunk_size, chunk_overlap)
    return splitter.split(0, len(text), list(separators or CHILD_SEPARATORS))


class _SpanSplitter:
    def __init__(self, text: str, size: int, overlap: int) -> None:
        self.text, self.size, self.overlap = text, size, overlap

    def _strip(self, start: int, end: int) -> Span | None:
        t = self.text
        while start < end and t[start].isspace():
            start += 1
        while end > start and t[end - 1].isspace():
            end -= 1
        return (start, end) if start < end else None

    def _pieces(self, start: int, end: int, sep: str) -> list[Span]:
        """Splits of ``text[start:end]`` at ``sep``, each keeping its separator at its end."""
        if not sep:
            return [(i, i + 1) for i in range(start, end)]
        out: list[Span] = []
        cur = start
        while True:
            hit = self.text.find(sep, cur, end)
            if hit < 0:
                break
            out.append((cur, hit + len(sep)))
            cur = hit + len(sep)
        out.append((cur, end))
        return [(s, e) for s, e in out if e > s]

    def split(self, start: int, end: int, separators: list[str]) -> list[Span]:
        sep, rest = separators[-1], []
        for i, candidate in enumerate(separators):
            if not candidate:
                sep = candidate
                break
            if self.text.find(candidate, start, end) >= 0:
                sep, rest = candidate, separators[i + 1 :]
                break
        final: list[Span] = []
        good: list[Span] = []
        for s, e in self._pieces(start, end, sep):
            if e - s < self.size:
                good.append((s, e))
                continue
            if good:
                final.extend(self._merge(good))
                good = []
            if not rest:
                piece = self._strip(s, e)
                if piece is not None:
                    final.append(piece)
            else:
                final.extend(self.split(s, e, rest))
        if good:
            final.extend(self._merge(good))
        return final

    def _merge(self, splits: list[Span]) -> list[Span]:
        """Join neighbouring splits up to ``size``, keeping up to ``overlap`` of the tail.

        Splits are contiguous, so a run of them is the span from the first's start to the
        last's end.
        """
        docs: list[Span] = []
        current: list[Span] = []
        total = 0
        for s, e in splits:
            n = e - s
            if total + n > self.size and current:
                joined = self._strip(current[0][0], current[-1][1])
                if joined is not None:
                    docs.append(joined)
                while total > self.overlap or (total + n > self.size and total > 0):
                    total -= current[0][1] - current[0][0]
                    current = current[1:]
            current.append((s, e))
            total += n
        if current:
            joined = self._strip(current[0][0], current[-1][1])
            if joined is not None:
                docs.append(joined)
        return docs
