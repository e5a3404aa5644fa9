"""The query core: search children, rerank, expand, pack. No bot table, LLM or HTTP here.

Data flows one way through it (see docs/architecture.md)::

    question -> store.similarity_search -> reranker -> top K -> expander (parent searcher)
             -> packer -> Retrieval(passages, meta)

The names below load on first use (:mod:`parrot_parents.lazy`): importing one module,
such as ``parrot_parents.retrieval.options``, does not import the others.
"""

from typing import TYPE_CHECKING

from parrot_parents.lazy import lazy_exports

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
    "Section",
    "WindowExpander",
    "check_question",
    "format_context",
    "pack",
    "parse_mode",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AutoMergeExpander": "parrot_parents.retrieval.expanders",
        "Expander": "parrot_parents.retrieval.expanders",
        "Expansion": "parrot_parents.retrieval.expanders",
        "ParentExpander": "parrot_parents.retrieval.expanders",
        "WindowExpander": "parrot_parents.retrieval.expanders",
        "RetrievalMeta": "parrot_parents.retrieval.meta",
        "ExpansionMode": "parrot_parents.retrieval.modes",
        "parse_mode": "parrot_parents.retrieval.modes",
        "DEFAULTS": "parrot_parents.retrieval.options",
        "RetrievalOptions": "parrot_parents.retrieval.options",
        "RetrievalOverrides": "parrot_parents.retrieval.options",
        "PackResult": "parrot_parents.retrieval.packing",
        "pack": "parrot_parents.retrieval.packing",
        "Hit": "parrot_parents.retrieval.passages",
        "Passage": "parrot_parents.retrieval.passages",
        "format_context": "parrot_parents.retrieval.passages",
        "Retrieval": "parrot_parents.retrieval.pipeline",
        "Retriever": "parrot_parents.retrieval.pipeline",
        "Section": "parrot_parents.retrieval.sections",
        # The question's rules live with the stores, whose searches check them too.
        "check_question": "parrot_parents.stores.questions",
    },
    globals(),
)

if TYPE_CHECKING:
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
    from parrot_parents.retrieval.sections import Section
    from parrot_parents.stores.questions import check_question
