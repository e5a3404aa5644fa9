"""Base class of the bots: configuration shared by every bot."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from parrot_parents.bots.modes import parse_mode
from parrot_parents.errors import ConfigurationError

if TYPE_CHECKING:
    from parrot_parents.rerankers.abstract import AbstractReranker
    from parrot_parents.stores.abstract import AbstractStore
    from parrot_parents.stores.parents.abstract import AbstractParentSearcher

__all__ = ["AbstractBot"]


class AbstractBot:
    """Holds a bot's retrieval configuration; validated at construction.

    Attributes:
        name: the bot's name.
        store: the vector store searched for children.
        parent_searcher: resolves ``parent_document_id`` to parents; default None.
        expand_to_parent: default of the per-call ``expand_to_parent``; default False.
        context_search_limit: children kept after search and rerank; default 10.
        reranker: optional cross-encoder reranker applied to the children.
        rerank_candidates: children searched before reranking; default 4 x limit.
        context_budget: context budget in characters of passage text (the unit of the
            shared scorer's ``recall@Bc``); None (default) means no budget.
        expansion_mode: ``parent`` (default), ``auto_merge:T`` or ``window:N``.
    """

    def __init__(
        self,
        *,
        name: str = "chatbot",
        store: AbstractStore | None = None,
        parent_searcher: AbstractParentSearcher | None = None,
        expand_to_parent: bool = False,
        context_search_limit: int = 10,
        reranker: AbstractReranker | None = None,
        rerank_candidates: int | None = None,
        context_budget: int | None = None,
        expansion_mode: str = "parent",
    ) -> None:
        if store is None and parent_searcher is not None:
            # The seed's examples inject only the searcher; it knows its store.
            store = getattr(parent_searcher, "store", None)
        if not isinstance(expand_to_parent, bool):
            raise ConfigurationError(f"expand_to_parent must be a bool, got {expand_to_parent!r}")
        if expand_to_parent and parent_searcher is None:
            raise ConfigurationError(
                "expand_to_parent=True needs a parent searcher",
                hint="pass parent_searcher=InTableParentSearcher(store=store)",
            )
        for key, value in (
            ("context_search_limit", context_search_limit),
            ("rerank_candidates", rerank_candidates),
        ):
            if value is None and key == "rerank_candidates":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{key} must be a positive int, got {value!r}")
        self.name = name
        self.store = store
        self.parent_searcher = parent_searcher
        self.expand_to_parent = expand_to_parent
        self.context_search_limit = context_search_limit
        self.reranker = reranker
        self.rerank_candidates = rerank_candidates
        self.context_budget = context_budget
        self.expansion_mode = str(parse_mode(expansion_mode))

    def config(self) -> dict[str, Any]:
        """The bot's settings as plain values (for ``meta`` and the HTTP service)."""
        return {
            "name": self.name,
            "expand_to_parent": self.expand_to_parent,
            "context_search_limit": self.context_search_limit,
            "rerank_candidates": self.rerank_candidates,
            "context_budget": self.context_budget,
            "expansion_mode": self.expansion_mode,
            "reranker": None if self.reranker is None else self.reranker.to_dict(),
            "parent_searcher": None
            if self.parent_searcher is None
            else self.parent_searcher.to_dict(),
        }
