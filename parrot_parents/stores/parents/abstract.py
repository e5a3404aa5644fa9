"""Interface of a parent searcher: turns parent ids into parent documents."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

__all__ = ["AbstractParentSearcher"]


class AbstractParentSearcher(ABC):
    """Fetches parents (whole documents or parent_chunks) by id.

    Implementations hold whatever they need (a store, a client) and are shared by bots.
    """

    @abstractmethod
    async def fetch(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        """Fetch parent documents by id.

        Args:
            parent_ids: ids as carried by children in ``parent_document_id``;
                duplicates are allowed.

        Returns:
            ``{parent_id: Document}``. Missing ids are absent from the result; an empty
            input returns ``{}`` without touching the backend.
        """

    async def health_check(self) -> bool:
        """Readiness probe used by ``GET /health``. Default: True."""
        return True

    def to_dict(self) -> dict[str, Any]:
        """Configuration of this searcher, for the bots table (``parent_searcher_config``)."""
        return {"type": type(self).__name__}
