"""What a search can bring back beside its hits, so that expansion needs no second read.

A :class:`ContextPlan` names the reads an expansion mode would make (parents, the
neighbours of a window, every child of the parents); a store that can join them to its
search statement returns them as a :class:`Context` (one round trip per query).
:class:`~parrot_parents.stores.parents.prefetched.PrefetchedParentSearcher` then answers
the expander from it. Plain data, no SQL: the retrieval layer uses these types.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from parrot_parents.stores.results import SearchResult

__all__ = ["Context", "ContextPlan", "scope_key"]


@dataclass(frozen=True)
class ContextPlan:
    """Reads to join to a search.

    Attributes:
        parents: the parents of the hits (and of the window's neighbours).
        window: read the children within ``window`` positions (``chunk_index``) of each
            hit, in its document; None for none.
        children: every child of those parents (``auto_merge`` counts them).
        scope: a bot's scope (a metadata filter, :mod:`parrot_parents.stores.filters`)
            as canonical JSON (:func:`scope_key`): every row read is judged against it
            in the same read (:attr:`Context.judged`), so a scoped bot needs no second
            read to keep its expansion inside the scope. None (default): not judged.
    """

    parents: bool = True
    window: int | None = None
    children: bool = False
    scope: str | None = None


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
        judged: with ``plan.scope``, every row read (hits, what indexed hits stand for,
            parents, neighbours, children), by id: whether the scope keeps it; empty
            without a scope.
    """

    plan: ContextPlan
    parent_ids: set[str] = field(default_factory=set)
    parents: dict[str, Document] = field(default_factory=dict)
    windows: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    neighbours: dict[str, list[SearchResult]] = field(default_factory=dict)
    children: dict[str, list[SearchResult]] = field(default_factory=dict)
    judged: dict[str, bool] = field(default_factory=dict)


def scope_key(scope: Mapping[str, Any]) -> str:
    """``scope`` as :attr:`ContextPlan.scope` holds it: JSON with sorted keys, so one
    scope is one plan (and one prepared statement)."""
    return json.dumps(scope, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
