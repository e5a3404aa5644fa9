"""The progress of an ingest, as events a progress bar can show.

:meth:`~parrot_parents.loaders.abstract.AbstractLoader.chunk_documents` reports to an
:class:`IngestProgress`: the model's load as a stage of its own, then the embedding in
fractions of a document, and each transaction as it commits. A plain callable
``progress(n)`` is told the documents stored (:class:`StoredOnly`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = [
    "EMBEDDING",
    "LOADING_MODEL",
    "PROGRESS_CHARACTERS",
    "IngestProgress",
    "StoredOnly",
    "as_progress",
]

#: Stage names, in the order they are entered.
LOADING_MODEL = "loading model"
EMBEDDING = "embedding"
#: A document whose children hold more characters than this advances in steps of at most
#: this many characters of children (one parent's children are never split: late chunking
#: embeds them in one pass); a smaller one advances once, when it is embedded.
PROGRESS_CHARACTERS = 2000


@runtime_checkable
class IngestProgress(Protocol):
    """What an ingest reports, in this order:

    * ``stage(LOADING_MODEL)`` before the embedding model loads (only when there is
      something to embed), and ``stage(EMBEDDING)`` once it is loaded;
    * ``advance(documents)`` as the model works: a fraction of a document, per document
      or per step of at most :data:`PROGRESS_CHARACTERS` characters of its children,
      whichever is finer. Over the whole call the advances add up to the number of
      documents given (those refused or unchanged count when they are found so);
    * ``stored(documents)`` after each transaction: the documents it wrote (or that
      failed, or needed no writing).
    """

    def stage(self, name: str) -> None: ...

    def advance(self, documents: float) -> None: ...

    def stored(self, documents: int) -> None: ...


class StoredOnly:
    """An :class:`IngestProgress` over a plain callable, told the documents stored."""

    def __init__(self, callback: Callable[[int], object]) -> None:
        self._callback = callback

    def stage(self, name: str) -> None:
        """Stages are not reported to a plain callable."""

    def advance(self, documents: float) -> None:
        """Neither are the model's fractions."""

    def stored(self, documents: int) -> None:
        self._callback(documents)


def as_progress(
    progress: IngestProgress | Callable[[int], object] | None,
) -> IngestProgress | None:
    """``progress`` as an :class:`IngestProgress`: a plain callable is wrapped in
    :class:`StoredOnly`; None stays None."""
    if progress is None or isinstance(progress, IngestProgress):
        return progress
    return StoredOnly(progress)
