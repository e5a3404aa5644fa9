"""Resolving hits on indexed rows (ingestion strategies) to the rows they stand for.

An indexed row holds text an ingestion strategy wrote (a context note and the chunk,
questions, propositions, a summary) and the id of its retrievable row in ``indexes``.
Search ranks indexed rows beside the children; before anything is returned, each hit on
an indexed row becomes its retrievable row, keeping the hit's rank and scores, and a row
reached twice (directly, or through several of its indexed rows) is kept once, at its
best rank. ``via`` and ``via_kind`` tell which indexed row matched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from parrot_parents.stores.records.markers import INDEXES, is_indexed
from parrot_parents.stores.results import SearchResult

__all__ = ["INDEXED_KIND", "resolve_indexed", "targets_of"]

#: Metadata key of an indexed row naming what its text is: ``context``, ``question``,
#: ``proposition`` or ``summary``.
INDEXED_KIND = "indexed_kind"


def targets_of(results: Sequence[SearchResult]) -> list[str]:
    """Ids of the retrievable rows that the indexed rows among ``results`` stand for."""
    return list(
        dict.fromkeys(
            str(r.metadata[INDEXES])
            for r in results
            if is_indexed(r.metadata) and r.metadata.get(INDEXES)
        )
    )


def resolve_indexed(
    results: Sequence[SearchResult], targets: Mapping[str, SearchResult]
) -> list[SearchResult]:
    """Replace each indexed hit by its target row, then keep each row once (best first).

    Args:
        results: ranked search results, best first.
        targets: the retrievable rows by id (what :func:`targets_of` asked for).

    Returns:
        Retrievable rows only, best first. An indexed row whose target no longer exists
        is left out: it is not a passage of any document.
    """
    out: list[SearchResult] = []
    seen: set[str] = set()
    for r in results:
        if is_indexed(r.metadata):
            target = targets.get(str(r.metadata.get(INDEXES)))
            if target is None:
                continue
            r = dataclasses.replace(
                r,
                id=target.id,
                content=target.content,
                metadata=dict(target.metadata),
                stored_sentences=target.stored_sentences,
                via=r.id,
                via_kind=str(r.metadata.get(INDEXED_KIND) or "indexed"),
            )
        if r.id in seen:
            continue
        seen.add(r.id)
        out.append(r)
    return out
