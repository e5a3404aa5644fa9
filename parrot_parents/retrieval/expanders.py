"""Parent expansion: fold the hits of each parent into that parent, once.

Rules (spec FEAT-128, with the v1 defects fixed):

* hits are grouped by ``parent_document_id``; all parents are fetched with one call;
* each group becomes its parent, placed at the rank of its best hit, scored with that
  hit's similarity; later hits of the same parent add nothing (dedup);
* a hit without a parent id stays as itself;
* when a parent is missing, *all* of its hits stay as themselves, in rank order.

Example: ``[child(P1), S, child(P2), child(P1)]`` becomes ``[P1, S, P2]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.documents import Document

from parrot_parents.bots.passages import Hit, Passage

__all__ = ["ExpansionResult", "expand_hits", "group_by_parent"]


@dataclass
class ExpansionResult:
    """Passages in rank order and how hits were folded.

    Attributes:
        passages: the expanded context units, best first.
        folded: ``{parent_id: [child ids folded into it]}``.
        missing: parent ids that were asked for but not found.
    """

    passages: list[Passage]
    folded: dict[str, list[str]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def group_by_parent(hits: Sequence[Hit]) -> dict[str, list[Hit]]:
    """``{parent_id: hits}`` in first-seen order; hits without a parent are left out."""
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        if hit.parent_id is not None:
            groups.setdefault(hit.parent_id, []).append(hit)
    return groups


def expand_hits(hits: Sequence[Hit], parents: Mapping[str, Document]) -> ExpansionResult:
    """Replace each group of hits by its parent (see module docstring).

    Args:
        hits: children in rank order.
        parents: result of :meth:`AbstractParentSearcher.fetch` for their parent ids.
    """
    groups = group_by_parent(hits)
    result = ExpansionResult(passages=[])
    emitted: set[str] = set()
    for hit in hits:
        pid = hit.parent_id
        if pid is None or pid not in parents:
            if pid is not None and pid not in result.missing:
                result.missing.append(pid)
            result.passages.append(Passage.from_hit(hit))
            continue
        if pid in emitted:
            continue
        emitted.add(pid)
        parent = parents[pid]
        group = groups[pid]
        result.passages.append(
            Passage.from_parent(pid, parent.page_content, dict(parent.metadata), group)
        )
        result.folded[pid] = [h.id for h in group]
    for rank, passage in enumerate(result.passages):
        passage.rank = rank
    return result
