from __future__ import annotations

from langchain_core.documents import Document

from parrot_parents.retrieval.expanders import expand_hits
from parrot_parents.retrieval.passages import Hit


def hit(id_: str, rank: int, parent: str | None, score: float) -> Hit:
    meta = {"document_id": "d", "start_index": rank * 10, "end_index": rank * 10 + 5}
    if parent is not None:
        meta["parent_document_id"] = parent
    return Hit(id_, f"text {id_}", meta, score, rank)


def parent(id_: str) -> Document:
    return Document(
        id=id_,
        page_content=f"parent {id_}",
        metadata={"document_id": "d", "is_full_document": True, "start_index": 0, "end_index": 100},
    )


def test_child_standalone_child_becomes_p1_s_p2() -> None:
    hits = [
        hit("c1", 0, "P1", 0.9),
        hit("s", 1, None, 0.8),
        hit("c2", 2, "P2", 0.7),
        hit("c3", 3, "P1", 0.6),
    ]
    result = expand_hits(hits, {"P1": parent("P1"), "P2": parent("P2")})
    assert [p.id for p in result.passages] == ["P1", "s", "P2"]
    assert [p.kind for p in result.passages] == ["parent", "child", "parent"]
    assert [p.rank for p in result.passages] == [0, 1, 2]
    assert result.folded == {"P1": ["c1", "c3"], "P2": ["c2"]}


def test_two_children_of_one_parent_yield_it_once_with_best_score() -> None:
    hits = [hit("a", 0, "P", 0.5), hit("b", 1, "P", 0.9)]
    result = expand_hits(hits, {"P": parent("P")})
    assert len(result.passages) == 1
    assert result.passages[0].score == 0.5  # the best-ranked child's similarity
    assert result.passages[0].child_ids == ["a", "b"]


def test_missing_parent_keeps_all_of_its_children() -> None:
    hits = [hit("a", 0, "GONE", 0.9), hit("x", 1, "P", 0.8), hit("b", 2, "GONE", 0.7)]
    result = expand_hits(hits, {"P": parent("P")})
    assert [p.id for p in result.passages] == ["a", "P", "b"]
    assert result.missing == ["GONE"]


def test_no_hits() -> None:
    assert expand_hits([], {}).passages == []
