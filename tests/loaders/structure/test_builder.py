from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from parrot_parents.loaders.hierarchy import LateChunkingProcessor
from parrot_parents.loaders.structure.markdown import read_markdown
from parrot_parents.loaders.structure.sections import plan_units, segments
from parrot_parents.loaders.structure.tree import Heading

HANDBOOK = Path(__file__).resolve().parents[3] / "examples" / "corpus" / "employee-handbook.md"


def processor(**kwargs: object) -> LateChunkingProcessor:
    # No model is loaded to build rows; `object()` would fail loudly if one were.
    return LateChunkingProcessor(
        section_parents=True,
        embedding=object(),
        **kwargs,  # type: ignore[arg-type]
    )


def build(text: str, **kwargs: object):  # type: ignore[no-untyped-def]
    p = processor(preamble=bool(kwargs.pop("preamble", False)))
    return p.build_hierarchy(text, "doc.md", {}, structure=read_markdown(text), **kwargs)


def test_run_pay_section_is_one_parent_from_heading_to_next_heading() -> None:
    text = HANDBOOK.read_text(encoding="utf-8")
    h = build(text)
    assert h.levels == 3
    start = text.index("## 4. Pay and Payroll")
    end = text.index("## 5. Leave")
    pay = [p for p in h.parents if p.metadata["start_index"] == start]
    assert len(pay) == 1
    assert pay[0].page_content == text[start:end].rstrip()
    assert pay[0].metadata["section_path"].endswith("4. Pay and Payroll")
    assert pay[0].metadata["section_ordinal"] == 4
    assert pay[0].metadata["layer"] == "section"
    assert pay[0].metadata["document_type"] == "parent_chunk"


def test_run_tiny_sections_merge_and_whole_chapters_fit() -> None:
    text = HANDBOOK.read_text(encoding="utf-8")
    h = build(text)
    starts = {p.metadata["start_index"]: p for p in h.parents}
    # "## 2." (784 characters) merges with its sibling "## 3."; "## 5. Leave" keeps its
    # subsections (4,177 characters, under 5/4 of the parent size).
    two = starts[text.index("## 2. Starting Work")]
    assert "## 3. Working Hours" in two.page_content
    leave = starts[text.index("## 5. Leave")]
    assert "### Other Leave" in leave.page_content
    assert all(p.metadata["ordinal"] >= 1 for p in h.parents)


def test_run_children_carry_their_own_section() -> None:
    text = HANDBOOK.read_text(encoding="utf-8")
    h = build(text, preamble=True)
    vacation = [c for c in h.children if "accrue vacation at 1.25 days" in c.text]
    assert vacation[0].metadata["section_path"].endswith("5. Leave > Vacation")
    assert vacation[0].metadata["section_ordinal"] == 0
    assert vacation[0].metadata["retrieval_preamble"].endswith("5. Leave > Vacation")
    assert "retrieval_preamble" not in build(text).children[0].metadata


def test_run_long_section_is_cut_inside_its_boundary() -> None:
    body = " ".join(f"Sentence number {i} about the long topic." for i in range(400))
    text = f"# A\n\n{body}\n\n# B\n\nShort closing section with a few words in it."
    h = build(text, parent_chunk_threshold_tokens=1000)
    b_start = text.index("# B")
    long_parents = [p for p in h.parents if p.metadata["start_index"] < b_start]
    assert len(long_parents) > 1
    assert all(p.metadata["end_index"] <= b_start for p in long_parents)


def test_run_table_rows_carry_caption_and_headers() -> None:
    rows = "\n".join(f"| Plan {i} | {i * 10} dollars |" for i in range(40))
    text = f"# Costs\n\nMonthly premiums:\n\n| Plan | Cost |\n|---|---|\n{rows}\n\n## After\n\nEnd."
    h = build(text, parent_chunk_threshold_tokens=100)
    table_rows = [c for c in h.children if c.metadata["layer"] == "table_row"]
    assert len(table_rows) > 1
    for c in table_rows:
        assert c.metadata["retrieval_preamble"] == "Monthly premiums:\n| Plan | Cost |"
        assert c.metadata["parent_table_id"].startswith("doc.md#table:")
        assert c.text.startswith("| Plan ") and len(c.text) <= 400
        parent = next(p for p in h.parents if p.id == c.parent_id)
        assert (
            parent.metadata["start_index"]
            <= c.start_index
            < c.end_index
            <= parent.metadata["end_index"]
        )
    prose = [c for c in h.children if c.metadata["layer"] == "section"]
    assert not any("| Plan 3 |" in c.text for c in prose)


def test_text_without_structure_keeps_todays_rows() -> None:
    text = "plain words " * 3000
    plain = LateChunkingProcessor(embedding=object()).build_hierarchy(text, "d")  # type: ignore[arg-type]
    structured = processor().build_hierarchy(text, "d", structure=read_markdown(text))
    assert [p.id for p in structured.parents] == [p.id for p in plain.parents]
    assert [c.chunk_id for c in structured.children] == [c.chunk_id for c in plain.children]


_block = st.one_of(
    st.builds(lambda n, w: "#" * n + " " + w, st.integers(1, 4), st.sampled_from(
        ["Chapter 1", "Part II", "Foreword", "Pay", "4. Leave"])),
    st.builds(lambda n: "Some words here. " * n, st.integers(0, 60)),
    st.builds(lambda n: "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * n, st.integers(1, 30)),
)  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(
    st.lists(_block, min_size=1, max_size=14),
    st.sampled_from([300, 800, 2000]),
    st.sampled_from([100, 200, 400]),
)
def test_property_children_inside_parents_with_exact_spans(
    blocks: list[str], parent_size: int, child_size: int
) -> None:
    text = "\n\n".join(blocks)
    p = LateChunkingProcessor(
        section_parents=True,
        preamble=True,
        child_chunk_size=child_size,
        embedding=object(),  # type: ignore[arg-type]
    )
    s = read_markdown(text)
    h = p.build_hierarchy(
        text,
        "doc.md",
        structure=s,
        parent_chunk_threshold_tokens=parent_size,
        parent_chunk_size_tokens=parent_size,
        parent_chunk_overlap_tokens=parent_size // 10,
    )
    parents = {p.id: p for p in h.parents}
    for parent in h.parents:
        m = parent.metadata
        assert text[m["start_index"] : m["end_index"]] == parent.page_content
    spans = set()
    for i, c in enumerate(h.children):
        assert c.chunk_index == i
        assert text[c.start_index : c.end_index] == c.text
        parent = parents[c.parent_id].metadata
        assert parent["start_index"] <= c.start_index < c.end_index <= parent["end_index"]
        assert (c.start_index, c.end_index) not in spans
        spans.add((c.start_index, c.end_index))
        # A child never crosses a heading, unless what precedes it in the child (headings
        # aside) is a section shorter than a quarter of the child size, glued to the next,
        # or what follows it is headings only (an empty last section).
        for heading in s.headings:
            if c.start_index < heading.start < c.end_index:
                before = _prose(text, s.headings, c.start_index, heading.start)
                after = _prose(text, s.headings, heading.start, c.end_index)
                assert len(before.strip()) < child_size // 4 or not after.strip()
    # Units never overlap, and a section parent never spans the start of a unit's
    # following higher-level heading.
    units = plan_units(text, segments(text, s.headings), min_chars=parent_size // 4,
                       max_chars=parent_size * 5 // 4)  # fmt: skip
    for a, b in itertools.pairwise(units):
        assert a.end <= b.start


def _prose(text: str, headings: Sequence[Heading], start: int, end: int) -> str:
    """``text[start:end]`` with every heading's line(s) blanked out."""
    chars = list(text[start:end])
    for h in headings:
        for i in range(max(start, h.start), min(end, h.end)):
            chars[i - start] = " "
    return "".join(chars)
