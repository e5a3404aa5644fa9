"""Formatting passages into the context string handed to the LLM."""

from __future__ import annotations

from collections.abc import Sequence

from parrot_parents.bots.passages import Passage

__all__ = ["format_context", "passage_header"]


def passage_header(index: int, passage: Passage) -> str:
    """``[1] handbook.md, characters 120-4120 (parent_chunk)``: where a passage came from."""
    where = passage.source or passage.document_id or passage.id
    span = ""
    if passage.start_index is not None and passage.end_index is not None:
        span = f", characters {passage.start_index}-{passage.end_index}"
    return f"[{index}] {where}{span} ({passage.kind})"


def format_context(passages: Sequence[Passage]) -> str:
    """Join passages, each under its header, separated by a blank line and ``---``.

    The headers name each passage's source so that the LLM (and a reader) can cite it.
    """
    blocks = [f"{passage_header(i, p)}\n{p.text}" for i, p in enumerate(passages, 1)]
    return "\n\n---\n\n".join(blocks)
