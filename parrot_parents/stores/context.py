"""What a search can bring back beside its hits, so that expansion needs no second read.

A :class:`ContextPlan` names the reads an expansion mode would make (parents, the
neighbours of a window, every child of the parents); a store that can join them to its
search statement returns them as a :class:`Context` (one round trip per query).
:class:`~parrot_parents.stores.parents.prefetched.PrefetchedParentSearcher` then answers
the expander from it. Plain data, no SQL: the retrieval layer uses these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.documents import Document

from parrot_parents.stores.results import SearchResult

__all__ = ["Context", "ContextPlan"]


@dataclass(frozen=True)
class ContextPlan:
    """Reads to join to a search.

    Attributes:
        parents: the parents of the hits (and of the window's neighbours).
        window: read the children within ``window`` positions (``chunk_index``) of each
            hit, in its document; None for none.
        children: every child of those parents (``auto_merge`` counts them).
    """

    parents: bool = True
    window: int | None = None
    children: bool = False


@dataclass
class Context:
    """Rows read with a search, for a :class:`ContextPlan`.

    Attributes:
        plan: what was read.
        parent_ids: every parent id the read looked for (found or not), so that an absent
            parent is known to be missing rather than unread.
        parents: the parents found, by id.
        windows: per document id, the ``(lo, hi)`` ``chunk_index`` ranges read.
        neighbours: per document id, the children read in those ranges, by ``chunk_index``.
        children: per parent id, its children ordered by ``start_index`` (``plan.children``).
    """

    plan: ContextPlan
    parent_ids: set[str] = field(default_factory=set)
    parents: dict[str, Document] = field(default_factory=dict)
    windows: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    neighbours: dict[str, list[SearchResult]] = field(default_factory=dict)
    children: dict[str, list[SearchResult]] = field(default_factory=dict)
