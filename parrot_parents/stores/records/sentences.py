"""The sentences of a child and their vectors, kept on the child's row for the packer.

With late chunking the loader pools each sentence of a child from the pass that embeds the
child and stores them under :data:`SENTENCES`: ``spans`` (``[[start, end], ...]``,
character offsets into the source, end exclusive) and ``int8`` (the vectors, each row
scaled to ±127 and base64-encoded: ``dimension`` bytes a sentence, within 0.01 of the
float32 cosine). The packer scores them against the question
(:meth:`SentenceVectors.similarities`, :mod:`parrot_parents.retrieval.packing`); retrieval
takes the key out of the metadata it returns.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from parrot_parents.errors import SchemaMismatchError

__all__ = ["SENTENCES", "SENTENCE_BREAK", "SentenceVectors", "only_headings", "sentence_spans"]

#: The metadata key holding a child's sentence spans and vectors.
SENTENCES = "sentences"

Span = tuple[int, int]

# The sentence boundaries of the children's separators: a line break, or ". ", "? ", "! " (any
# whitespace after the mark). A table row is a line, so it is never cut.
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n\s*")

# A heading line: Markdown ATX (``## Title``) or wikitext (``= Title =``), the headings
# the loaders read sections from (:mod:`parrot_parents.loaders.headings`).
_HEADING_LINE = re.compile(
    r"^[ \t]{0,3}#{1,6}[ \t]+\S.*$|^[ \t]*(?:= ?){1,6} *[^=\n]+? *(?:= ?){1,6}[ \t]*$", re.M
)


def only_headings(text: str) -> bool:
    """Whether ``text`` is nothing but heading lines and whitespace (an empty text too):
    a title without the section it names answers nothing, so it is never handed over."""
    return not _HEADING_LINE.sub("", text).strip()


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """The sentences of ``text[start:end]`` as ``(start, end)`` offsets into ``text``.

    A sentence ends at a line break or after ``.``, ``?`` or ``!`` followed by whitespace
    (the sentence separators of :data:`~parrot_parents.loaders.splitting.CHILD_SEPARATORS`,
    which children are cut at); each span is stripped of surrounding whitespace, and
    whitespace-only pieces are dropped.
    So a child cut at those separators is the union of its sentences and the gaps between
    them, and every span satisfies ``start <= s < e <= end``.
    """
    stop = len(text) if end is None else end
    out: list[Span] = []
    cur = start
    for m in SENTENCE_BREAK.finditer(text, start, stop):
        if m.start() > cur:
            out.append((cur, m.start()))
        cur = m.end()
    if stop > cur:
        out.append((cur, stop))
    stripped = []
    for s, e in out:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            stripped.append((s, e))
    return stripped


@dataclass(frozen=True)
class SentenceVectors:
    """A child's sentences: spans (characters, in the source document) and unit vectors.

    Attributes:
        spans: ``(start, end)`` per sentence, in document order.
        vectors: float32 array of shape ``(len(spans), dimension)``, rows L2-normalised.
    """

    spans: tuple[Span, ...]
    vectors: np.ndarray

    @classmethod
    def build(cls, spans: Sequence[Span], vectors: Sequence[Any] | np.ndarray) -> SentenceVectors:
        """From spans and their (any-scale) vectors; rows are normalised here.

        Raises:
            ValueError: the counts differ, or no sentence is given.
        """
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or len(matrix) != len(spans) or not len(spans):
            raise ValueError(
                f"{len(spans)} sentence span(s) for {len(matrix)} vector(s): give one each"
            )
        return cls(tuple((int(s), int(e)) for s, e in spans), _normalised(matrix))

    def encode(self) -> dict[str, Any]:
        """The JSON value stored under :data:`SENTENCES`."""
        peak = np.abs(self.vectors).max(axis=1, keepdims=True)
        scaled = self.vectors / np.where(peak > 0, peak, 1.0) * 127.0
        quantised = np.clip(np.rint(scaled), -127, 127).astype(np.int8)
        return {
            "spans": [[s, e] for s, e in self.spans],
            "int8": base64.b64encode(quantised.tobytes()).decode("ascii"),
        }

    @classmethod
    def decode(cls, value: object) -> SentenceVectors | None:
        """The sentences stored under :data:`SENTENCES`; None when ``value`` is absent or
        not in the stored shape (the packer then keeps the child whole)."""
        if not isinstance(value, Mapping):
            return None
        spans, packed = value.get("spans"), value.get("int8")
        if not isinstance(spans, list) or not spans or not isinstance(packed, str):
            return None
        try:
            pairs = [(int(s), int(e)) for s, e in spans]
            raw = np.frombuffer(base64.b64decode(packed, validate=True), dtype=np.int8)
        except (TypeError, ValueError, binascii.Error):
            return None
        if any(e < s for s, e in pairs) or raw.size % len(pairs):
            return None
        matrix = raw.reshape(len(pairs), -1).astype(np.float32)
        return cls(tuple(pairs), _normalised(matrix))

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of each sentence to ``query`` (a unit vector of the same
        dimension), shape ``(len(spans),)``.

        Raises:
            SchemaMismatchError: ``query`` has another shape than ``(dimension,)``: it is
                another model's vector, and no score of it would mean anything.
        """
        dimension = self.vectors.shape[1]
        if query.shape != (dimension,):
            raise SchemaMismatchError(
                f"the question's vector has shape {query.shape!r}, the stored sentences' "
                f"vectors have {dimension} values",
                expected_dimension=int(query.size),
                actual_dimension=dimension,
                hint="embed the question with the collection's model",
            )
        scores: np.ndarray = self.vectors @ query
        return scores


def _normalised(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: np.ndarray = matrix / np.where(norms > 0, norms, 1.0)
    return out.astype(np.float32)
