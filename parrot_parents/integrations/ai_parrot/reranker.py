"""An ai-parrot reranker (its ``AbstractReranker``) seen as a parrot-parents reranker.

The pipeline reranks the children before top K and expansion (spec FEAT-128); with this
adapter it does so with the reranker an ai-parrot bot already carries (``bot.reranker``),
so a bot keeps one reranker whichever route it retrieves by.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

from langchain_core.documents import Document

from parrot_parents.integrations.ai_parrot.framework import (
    FrameworkReranker,
    FrameworkSearchResult,
)
from parrot_parents.rerankers.abstract import AbstractReranker

__all__ = ["FrameworkRerankerAdapter"]


class FrameworkRerankerAdapter(AbstractReranker):
    """Scores children with an ai-parrot reranker.

    Args:
        reranker: an instance of ai-parrot's ``AbstractReranker`` (its
            ``LocalCrossEncoderReranker``, ``LLMReranker``, or your own).

    Scores are the wrapped reranker's ``rerank_score`` (higher is more relevant). ai-parrot
    rerankers report a failure as NaN scores rather than raising; the pipeline then keeps
    the search order and says so in ``meta.fallbacks``.

    Raises:
        TypeError: ``reranker`` is not an ai-parrot reranker.
    """

    type_name: ClassVar[str] = "ai_parrot"

    def __init__(self, reranker: Any) -> None:
        if not isinstance(reranker, FrameworkReranker):
            raise TypeError(
                f"expected an ai-parrot AbstractReranker, got {type(reranker).__name__}"
            )
        self.reranker = reranker

    @property
    def model_name(self) -> str:
        """The wrapped reranker's class name (ai-parrot's interface names no model)."""
        return type(self.reranker).__name__

    async def score(self, query: str, documents: Sequence[Document]) -> list[float]:
        candidates = [
            FrameworkSearchResult(
                id=str(doc.id or index),
                content=doc.page_content,
                metadata=dict(doc.metadata),
                score=0.0,
            )
            for index, doc in enumerate(documents)
        ]
        ranked = await self.reranker.rerank(query, candidates, top_n=None)
        scores = [math.nan] * len(candidates)
        for item in ranked:
            scores[item.original_rank] = float(item.rerank_score)
        return scores

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type_name, "reranker": type(self.reranker).__name__}
