"""Reranker interface: score (query, document) pairs and reorder retrieved documents."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from langchain_core.documents import Document
from pydantic import BaseModel

from parrot_parents.errors import ConfigurationError
from parrot_parents.plugins import RERANKERS_GROUP, Registry

__all__ = ["RERANKERS", "AbstractReranker", "RerankedDocument"]


@dataclass(frozen=True, slots=True)
class RerankedDocument:
    """One document after reranking.

    Attributes:
        document: the input document, unchanged (same object).
        score: raw model score; higher means more relevant. Its scale depends on the model
            (cross-encoders give unbounded logits) and it may be NaN if the model produced NaN.
        rank: 0-based position after reranking.
        original_rank: 0-based index of the document in the list passed to ``rerank``.
        model: name of the model that produced ``score``.
    """

    document: Document
    score: float
    rank: int
    original_rank: int
    model: str


def _sort_key(item: tuple[int, float]) -> tuple[float, int]:
    index, score = item
    # NaN compares false with everything, which would make sorted() order arbitrary:
    # rank NaN below every real score, still stable by original position.
    return (math.inf if math.isnan(score) else -score, index)


def check_int(name: str, value: object, minimum: int, *, or_none: bool = False) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` is an int >= ``minimum`` (or
    None, with ``or_none``); the message names ``name`` and the value."""
    if value is None and or_none:
        return
    also = " or None" if or_none else ""
    # bool is an int subclass; True as a batch size is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an int >= {minimum}{also}, got {value!r}")
    if value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}{also}, got {value!r}")


class AbstractReranker(ABC):
    """Base class of rerankers.

    Subclasses implement :meth:`score` (one float per document, higher is better),
    :meth:`to_dict` and set :attr:`type_name`; :meth:`rerank` does validation, ordering and
    truncation the same way for every reranker.
    """

    #: Value of ``"type"`` in :meth:`to_dict`; the key used by :meth:`from_dict`.
    type_name: ClassVar[str]
    #: Keys of a ``reranker_config`` (besides ``type``); None: from ``__init__``.
    config_model: ClassVar[type[BaseModel] | None] = None

    @property
    @abstractmethod
    def model_name(self) -> str:
        """Name of the scoring model, copied into :attr:`RerankedDocument.model`."""

    @abstractmethod
    async def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        """Return one raw score per document, in input order (higher is more relevant)."""

    async def rerank(
        self,
        query: str,
        documents: Sequence[Document],
        top_n: int | None = None,
    ) -> list[RerankedDocument]:
        """Score ``documents`` against ``query`` and return them best first.

        Args:
            query: the user's query.
            documents: candidates, e.g. the parents returned by a retriever; may be empty.
            top_n: keep only the best ``top_n``; ``None`` (default) keeps all.

        Returns:
            ``min(len(documents), top_n)`` items sorted by score descending. Equal scores keep
            their input order; NaN scores (returned as NaN, not replaced) sort last.

        Raises:
            ConfigurationError: ``top_n`` is not ``None`` or an int >= 1 (a ``ValueError``).
            Exception: whatever the model raises is propagated unchanged, so that callers can
                fall back to the un-reranked order.
        """
        check_int("top_n", top_n, 1, or_none=True)
        docs = list(documents)
        if not docs:
            return []
        scores = await self.score(query, docs)
        if len(scores) != len(docs):
            raise RuntimeError(
                f"{type(self).__name__}.score returned {len(scores)} scores "
                f"for {len(docs)} documents"
            )
        order = sorted(enumerate(float(s) for s in scores), key=_sort_key)
        if top_n is not None:
            order = order[:top_n]
        name = self.model_name
        return [
            RerankedDocument(
                document=docs[index], score=score, rank=rank, original_rank=index, model=name
            )
            for rank, (index, score) in enumerate(order)
        ]

    def warm_up(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Load models ahead of the first query. No-op unless a subclass needs it."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release what this instance holds. No-op unless a subclass needs it."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """Configuration as ``{"type": type_name, **constructor keyword arguments}``.

        The dict is JSON-serialisable and ``from_dict(to_dict())`` builds an equal reranker.
        """

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AbstractReranker:
        """Build a reranker from a :meth:`to_dict` mapping; the class is looked up in the one
        plugin registry (:data:`RERANKERS`).

        On :class:`AbstractReranker` the class is chosen by ``data["type"]`` (built-in types,
        then the ``parrot_parents.rerankers`` entry points). On a subclass ``"type"`` may be
        omitted but, if present, must match the subclass.

        Raises:
            ConfigurationError: missing or unknown type, or parameters the class does not
                accept.
        """
        params = dict(data)
        type_name = params.pop("type", None)
        if cls is AbstractReranker:
            if type_name is None:
                raise ConfigurationError(
                    f"reranker config needs a 'type' key, got keys {sorted(params)}"
                )
        elif type_name is not None and type_name != cls.type_name:
            raise ConfigurationError(
                f"reranker config has type {type_name!r}, "
                f"but {cls.__name__} has type {cls.type_name!r}"
            )
        target = RERANKERS.get(type_name) if cls is AbstractReranker else cls
        try:
            return target(**params)
        except TypeError as exc:
            # A wrong/unknown key is a config mistake, not a programming error.
            raise ConfigurationError(f"invalid {target.__name__} config {params!r}: {exc}") from exc


#: Rerankers by type name: ``cross_encoder`` plus the ``parrot_parents.rerankers`` entry points.
RERANKERS: Registry[AbstractReranker] = Registry(
    "reranker",
    RERANKERS_GROUP,
    AbstractReranker,
    {"cross_encoder": ("parrot_parents.rerankers.cross_encoder:CrossEncoderReranker", None)},
)
