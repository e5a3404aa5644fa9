"""Every passage carries its section (path, ordinals, layer, pages) and its branch scores,
whatever built it: a child, a parent, a window, a packed span. Pure: no database."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from parrot_parents.retrieval.expanders import WindowExpander, expand_hits
from parrot_parents.retrieval.packing import pack
from parrot_parents.retrieval.passages import Hit, Passage, format_context
from parrot_parents.retrieval.sections import Section
from parrot_parents.stores.results import SearchResult

TEXT = "# Handbook\n\n## 4. Pay and Payroll\n\nPaid twice a month.\n\nOvertime next cycle.\n"
PAY = "Handbook > 4. Pay and Payroll"


def _section(path: str, ordinal: int, section_ordinal: int, **extra: Any) -> dict[str, Any]:
    return {
        "section_path": path,
        "ordinal": ordinal,
        "section_ordinal": section_ordinal,
        "layer": "section",
        **extra,
    }


def _child(index: int, start: int, end: int, **extra: Any) -> dict[str, Any]:
    return {
        "document_id": "h.md",
        "parent_document_id": "P",
        "is_chunk": True,
        "chunk_index": index,
        "start_index": start,
        "end_index": end,
        **_section(PAY, 2, 4),
        **extra,
    }


PARENT_META = {
    "document_id": "h.md",
    "document_type": "parent_chunk",
    "is_chunk": False,
    "start_index": 12,
    "end_index": len(TEXT),
    **_section(PAY, 2, 4, page=3, page_end=3),
}


def _hit(index: int, rank: int, **extra: Any) -> Hit:
    start = TEXT.index("Paid") if index == 0 else TEXT.index("Overtime")
    end = TEXT.index("\n", start)
    return Hit(
        f"c{index}",
        TEXT[start:end],
        _child(index, start, end, **extra),
        0.03,
        rank,
        dense_rank=rank + 1,
        lexical_rank=None,
        dense_score=0.61,
        lexical_score=None,
    )


def test_section_reads_the_stored_keys_and_cites_them() -> None:
    s = Section.from_metadata(_section(PAY, 2, 4, page=12, page_end=13))
    assert s.path == ("Handbook", "4. Pay and Payroll")
    assert (s.section_ordinal, s.ordinal, s.layer, s.page, s.page_end) == (4, 2, "section", 12, 13)
    assert s.citation() == "Handbook › 4. Pay and Payroll, pages 12-13"
    assert Section.from_metadata({"section_path": ""}).path == ()
    assert Section.from_metadata({}).citation() is None
    assert Section.from_metadata({"page": 2}).to_dict() == {
        "section_path": [],
        "section_ordinal": None,
        "ordinal": None,
        "layer": None,
        "page": 2,
        "page_end": 2,
    }


def test_child_and_parent_passages_carry_section_and_branch_scores() -> None:
    child = Passage.from_hit(_hit(0, 0, page=3, page_end=3))
    assert child.section_path == ["Handbook", "4. Pay and Payroll"]
    assert (child.section_ordinal, child.ordinal, child.layer) == (4, 2, "section")
    assert (child.page, child.page_end) == (3, 3)
    assert (child.dense_rank, child.dense_score, child.lexical_rank) == (1, 0.61, None)
    out = child.to_dict()
    assert out["section_path"] == ["Handbook", "4. Pay and Payroll"]
    assert out["section_ordinal"] == 4 and out["dense_rank"] == 1 and out["lexical_score"] is None

    # A parent: its own section; here it starts in the pay section too.
    parents = {"P": Document(id="P", page_content=TEXT[12:], metadata=PARENT_META)}
    (parent,) = expand_hits([_hit(0, 0), _hit(1, 1)], parents).passages
    assert parent.kind == "parent_chunk"
    assert parent.section_path[-1] == "4. Pay and Payroll" and parent.section_ordinal == 4
    assert (parent.page, parent.page_end, parent.dense_rank) == (3, 3, 1)


def test_window_carries_its_hits_section_and_the_pages_of_its_children() -> None:
    hit = _hit(1, 0, page=4, page_end=4)
    first = TEXT.index("Paid")
    neighbour = SearchResult(
        "c0",
        TEXT[first : TEXT.index("\n", first)],
        _child(0, first, TEXT.index("\n", first), page=3, page_end=3),
    )
    parents = {"P": Document(id="P", page_content=TEXT[12:], metadata=PARENT_META)}
    fetched = ({"h.md": [neighbour]}, parents)
    (passage,) = WindowExpander(1).expand([hit], fetched, packed=False).passages
    assert passage.kind == "window"
    assert passage.section_path == ["Handbook", "4. Pay and Payroll"]
    assert (passage.section_ordinal, passage.page, passage.page_end) == (4, 3, 4)
    assert passage.dense_score == 0.61


def test_a_packed_cut_keeps_the_section_and_branch_scores() -> None:
    parents = {"P": Document(id="P", page_content=TEXT[12:], metadata=PARENT_META)}
    hits = [_hit(0, 0)]
    expanded = expand_hits(hits, parents).passages
    packed = pack(expanded, hits, 25).passages
    assert packed and all(p.section_path == ["Handbook", "4. Pay and Payroll"] for p in packed)
    assert all(p.dense_rank == 1 and p.section_ordinal == 4 for p in packed)


def test_citations_are_off_by_default_and_on_when_asked() -> None:
    passages = [Passage.from_hit(_hit(0, 0, page=3, page_end=3))]
    plain = format_context(passages)
    assert "Section:" not in plain and "›" not in plain
    assert format_context(passages, "tags").count("cite=") == 0
    cited = format_context(passages, citations=True)
    assert cited.splitlines()[1] == "Section: Handbook › 4. Pay and Payroll, page 3"
    assert cited.replace("\nSection: Handbook › 4. Pay and Payroll, page 3", "") == plain
    tagged = format_context(passages, "tags", citations=True)
    assert 'cite="Handbook › 4. Pay and Payroll, page 3"' in tagged
