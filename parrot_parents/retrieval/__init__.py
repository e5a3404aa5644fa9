"""The query core: search children, rerank, expand, pack. No bot table, LLM or HTTP here.

Data flows one way through it (see docs/architecture.md)::

    question -> store.similarity_search -> reranker -> top K -> expander (parent searcher)
             -> packer -> Retrieval(passages, meta)

The names below load on first use (:mod:`parrot_parents.lazy`): importing one module,
such as ``parrot_parents.retrieval.options``, does not import the others.
"""

from typing import TYPE_CHECKING

from parrot_parents.lazy import lazy_exports

#: Module -> the names it exports (the imports under ``TYPE_CHECKING`` name them for mypy).
_EXPORTS = {
    "parrot_parents.retrieval.expanders": (
        "AutoMergeExpander",
        "Expander",
        "Expansion",
        "ParentExpander",
        "WindowExpander",
    ),
    "parrot_parents.retrieval.meta": ("RetrievalMeta",),
    "parrot_parents.retrieval.modes": ("ExpansionMode", "parse_mode"),
    "parrot_parents.retrieval.options": ("DEFAULTS", "RetrievalOptions", "RetrievalOverrides"),
    "parrot_parents.retrieval.packing": ("PackResult", "pack"),
    "parrot_parents.retrieval.passages": ("Hit", "Passage", "format_context"),
    "parrot_parents.retrieval.pipeline": ("Retrieval", "Retriever"),
    "parrot_parents.retrieval.sections": ("Section",),
    # The question's rules live with the stores, whose searches check them too.
    "parrot_parents.stores.questions": ("check_question",),
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(
    __name__, {name: module for module, names in _EXPORTS.items() for name in names}, globals()
)

if TYPE_CHECKING:
    from parrot_parents.retrieval.expanders import AutoMergeExpander as AutoMergeExpander
    from parrot_parents.retrieval.expanders import Expander as Expander
    from parrot_parents.retrieval.expanders import Expansion as Expansion
    from parrot_parents.retrieval.expanders import ParentExpander as ParentExpander
    from parrot_parents.retrieval.expanders import WindowExpander as WindowExpander
    from parrot_parents.retrieval.meta import RetrievalMeta as RetrievalMeta
    from parrot_parents.retrieval.modes import ExpansionMode as ExpansionMode
    from parrot_parents.retrieval.modes import parse_mode as parse_mode
    from parrot_parents.retrieval.options import DEFAULTS as DEFAULTS
    from parrot_parents.retrieval.options import RetrievalOptions as RetrievalOptions
    from parrot_parents.retrieval.options import RetrievalOverrides as RetrievalOverrides
    from parrot_parents.retrieval.packing import PackResult as PackResult
    from parrot_parents.retrieval.packing import pack as pack
    from parrot_parents.retrieval.passages import Hit as Hit
    from parrot_parents.retrieval.passages import Passage as Passage
    from parrot_parents.retrieval.passages import format_context as format_context
    from parrot_parents.retrieval.pipeline import Retrieval as Retrieval
    from parrot_parents.retrieval.pipeline import Retriever as Retriever
    from parrot_parents.retrieval.sections import Section as Section
    from parrot_parents.stores.questions import check_question as check_question
