"""The two plugin registries a bot row is resolved with (:mod:`parrot_parents.plugins`)."""

from __future__ import annotations

from dataclasses import dataclass

from parrot_parents.plugins import Registry
from parrot_parents.rerankers.abstract import RERANKERS, AbstractReranker
from parrot_parents.stores.parents.abstract import PARENT_SEARCHERS, AbstractParentSearcher

__all__ = ["Registries", "default_registries"]


@dataclass(frozen=True)
class Registries:
    """The registries of a row's ``parent_searcher_config`` and ``reranker_config``."""

    parent_searchers: Registry[AbstractParentSearcher]
    rerankers: Registry[AbstractReranker]


def default_registries() -> Registries:
    """The process-wide registries (built-in types plus installed entry points)."""
    return Registries(parent_searchers=PARENT_SEARCHERS, rerankers=RERANKERS)
