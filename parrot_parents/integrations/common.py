"""What the framework adapters share: per-call options and passage metadata."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parrot_parents.retrieval.options import RetrievalOptions
from parrot_parents.retrieval.passages import Passage

__all__ = ["OPTION_NAMES", "call_options", "passage_metadata"]

#: The per-call options an adapter takes, as in ``Chatbot.get_vector_context``.
OPTION_NAMES = tuple(RetrievalOptions.model_fields)


def call_options(fixed: Mapping[str, Any], overrides: Mapping[str, Any]) -> RetrievalOptions:
    """The retriever's own options with a call's ``overrides`` over them.

    Unset (None) options fall back to the bot's settings, then the package defaults.

    Raises:
        ConfigurationError: an unknown option or a bad value (the message names it).
    """
    base = RetrievalOptions.from_overrides({k: v for k, v in fixed.items() if v is not None})
    return RetrievalOptions.from_overrides(dict(overrides)).over(base)


def passage_metadata(passage: Passage) -> dict[str, Any]:
    """Metadata of a passage handed to a framework (JSON-ready).

    Keys: ``id``, ``source``, ``document_id``, ``start_index``/``end_index`` (character
    offsets into the source), ``kind`` (``child``, ``parent``, ``parent_chunk``,
    ``window`` or ``merged``), ``score`` (best hit's cosine similarity), ``rank``
    (0-based position in the context) and ``child_ids`` (the hits it stands for).
    """
    return {
        "id": passage.id,
        "source": passage.source or passage.document_id,
        "document_id": passage.document_id,
        "start_index": passage.start_index,
        "end_index": passage.end_index,
        "kind": passage.kind,
        "score": passage.score,
        "rank": passage.rank,
        "child_ids": list(passage.child_ids),
    }
