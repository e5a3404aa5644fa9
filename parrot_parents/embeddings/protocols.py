"""What the rest of the package may ask of an embeddings object beyond LangChain's
``Embeddings`` interface."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["LoadTimed"]


@runtime_checkable
class LoadTimed(Protocol):
    """An embeddings object that loads its model on first use and times the load.

    Attributes:
        load_ms: wall time of the load, in milliseconds (``0.0`` when the process had the
            model already); None until the model is loaded.
    """

    load_ms: float | None
