"""Ingestion strategies: what is indexed and what is returned.

:func:`parse_strategy` is the one grammar; the four free strategies are query-time
expansion modes, the others add indexed rows through :class:`StrategyIndexer`, whose
model calls all go through :class:`GuardedModel`. See docs/strategies.md.
"""

from parrot_parents.strategies.cache import PromptCache
from parrot_parents.strategies.guarded import GuardedModel, ModelStats
from parrot_parents.strategies.indexer import StrategyIndexer
from parrot_parents.strategies.spec import STRATEGY_NAMES, StrategySpec, parse_strategy

__all__ = [
    "STRATEGY_NAMES",
    "GuardedModel",
    "ModelStats",
    "PromptCache",
    "StrategyIndexer",
    "StrategySpec",
    "parse_strategy",
]
