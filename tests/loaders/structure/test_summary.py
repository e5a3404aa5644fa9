from __future__ import annotations

from parrot_parents.loaders.hierarchy import LateChunkingProcessor
from parrot_parents.loaders.structure.markdown import read_markdown
from parrot_parents.loaders.structure.sections import segments
from parrot_parents.loaders.structure.summary import MAX_SECTIONS, extractive_summary
from parrot_parents.stores.records.markers import OFFSETS_EXACT

REPORT = """# Tide report

Tides along the coast were higher than usual this year. Storm surges added to them.

## Methods

Gauges at nine harbours recorded the water level every six minutes.

## Results

The mean high water rose by four centimetres. Two records fell in February.

## Contents

1. Methods .... 2
2. Results .... 3

## References

Smith, J. (2020). Tides. Journal of Water.
"""


def overview(text: str):  # type: ignore[no-untyped-def]
    return extractive_summary(text, segments(text, read_markdown(text).headings), "Tides")


def test_run_leads_of_representative_sections_and_a_guide() -> None:
    o = overview(REPORT)
    assert o.text.startswith("Tides\n\nTide report: Tides along the coast were higher")
    assert "Tide report > Results: The mean high water rose" in o.text
    assert o.guide == ("- Methods", "- Results")


def test_toc_index_and_back_matter_are_skipped() -> None:
    o = overview(REPORT)
    assert "Methods .... 2" not in o.text and "Smith, J." not in o.text
    assert "Contents" not in o.text and "References" not in o.text


def test_long_narrative_sequence_keeps_the_opening_only() -> None:
    chapters = "".join(
        f"## Chapter {i}\n\nIn chapter {i} the boat sails on to harbour {i}.\n\n"
        for i in range(1, 2 * MAX_SECTIONS + 3)
    )
    o = overview("# The Voyage\n\nA story of a boat.\n\n" + chapters)
    assert len(o.ordinals) == 1
    assert "In chapter 3" not in o.text
    short = "# Short\n\nIntro.\n\n" + chapters[: chapters.index("## Chapter 4")]
    assert len(overview(short).ordinals) == 4  # the opening and three chapters


def test_document_row_is_a_child_without_span_or_parent() -> None:
    p = LateChunkingProcessor(document_layer=True, embedding=object())  # type: ignore[arg-type]
    h = p.build_hierarchy(REPORT, "tides.md", structure=read_markdown(REPORT))
    doc = h.children[-1]
    assert doc.chunk_id == "tides.md#document"
    assert doc.metadata["layer"] == "document" and doc.metadata["is_chunk"] is True
    assert "start_index" not in doc.metadata and "parent_document_id" not in doc.metadata
    # Its text is not a slice of the source, under the key every other such row carries.
    assert doc.metadata[OFFSETS_EXACT] is False and "offset_exact" not in doc.metadata
    assert doc.text == overview(REPORT).text.replace("Tides\n\n", "tides\n\n", 1)
    without = LateChunkingProcessor(embedding=object())  # type: ignore[arg-type]
    h2 = without.build_hierarchy(REPORT, "tides.md", structure=read_markdown(REPORT))
    assert all(c.metadata["layer"] != "document" for c in h2.children)
