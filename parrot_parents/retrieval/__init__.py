"""The query core: search children, rerank, expand, pack. No bot table, LLM or HTTP here.

Data flows one way through it (see docs/architecture.md)::

    question -> store.similarity_search -> reranker -> top K -> expander (parent searcher)
             -> packer -> Retrieval(passages, meta)
"""

from parrot_parents.retrieval.expanders import (
    AutoMergeExpander,
    Expander,
    Expansion,
    ParentExpander,
    WindowExpander,
)
from parrot_parents.retrieval.meta import RetrievalMeta
from parrot_parents.retrieval.modes import ExpansionMode, parse_mode
from parrot_parents.retrieval.options import DEFAULTS, RetrievalOptions, RetrievalOverrides
from parrot_parents.retrieval.packing import PackResult, pack
from parrot_parents.retrieval.passages import Hit, Passage, format_context
from parrot_parents.retrieval.pipeline import Retrieval, Retriever

__all__ = [
    "DEFAULTS",
    "AutoMergeExpander",
    "Expander",
    "Expansion",
    "ExpansionMode",
    "Hit",
    "PackResult",
    "ParentExpander",
    "Passage",
    "Retrieval",
    "RetrievalMeta",
    "RetrievalOptions",
    "RetrievalOverrides",
    "Retriever",
    "WindowExpander",
    "format_context",
    "pack",
    "parse_mode",
]
