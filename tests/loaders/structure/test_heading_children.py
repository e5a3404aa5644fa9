"""A heading is never a child on its own: it belongs to the text under it, offsets exact.

Properties over generated Markdown and HTML (runs of nested headings, paragraphs longer
than a child, tables right under headings, empty last sections), and the shipped corpus
read through the loader's own path (no database needed to cut rows).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from parrot_parents.loaders.hierarchy import DocumentHierarchy, LateChunkingProcessor
from parrot_parents.loaders.structure.html import read_html
from parrot_parents.loaders.structure.markdown import read_markdown
from parrot_parents.loaders.structure.reading import split_structure
from parrot_parents.loaders.structure.tree import Structure
from parrot_parents.loaders.text import TextLoader
from tests.conftest import REPO_ROOT

CORPUS = REPO_ROOT / "examples" / "corpus"
_TITLES = ["Chapter 1", "Part II", "Foreword", "Pay", "4. Leave", "Parental Leave"]


def _mask(text: str, spans: Sequence[tuple[int, int]]) -> list[bool]:
    covered = [False] * len(text)
    for start, end in spans:
        for i in range(start, end):
            covered[i] = True
    return covered


def _build(
    text: str, structure: Structure, parent_size: int, child_size: int, overlap: int
) -> DocumentHierarchy:
    p = LateChunkingProcessor(
        section_parents=True,
        preamble=True,
        child_chunk_size=child_size,
        child_chunk_overlap=overlap,
        embedding=object(),  # type: ignore[arg-type]  # no model is needed to cut rows
    )
    return p.build_hierarchy(
        text,
        "doc",
        structure=structure,
        parent_chunk_threshold_tokens=parent_size,
        parent_chunk_size_tokens=parent_size,
        parent_chunk_overlap_tokens=parent_size // 10,
    )


def heading_only(text: str, structure: Structure, start: int, end: int) -> bool:
    """True when ``text[start:end]`` is heading lines and blanks, nothing else."""
    heads = _mask(text, [(h.start, h.end) for h in structure.headings])
    return all(heads[i] or text[i].isspace() for i in range(start, end))


def check_rows(
    text: str, structure: Structure, h: DocumentHierarchy, child_size: int | None = None
) -> None:
    """Exact offsets, children inside parents, no heading alone, nothing lost; with
    ``child_size``, children within it, headings aside."""
    parents = {p.id: p.metadata for p in h.parents}
    for parent in h.parents:
        m = parent.metadata
        assert text[m["start_index"] : m["end_index"]] == parent.page_content
    for c in h.children:
        assert text[c.start_index : c.end_index] == c.text
        parent = parents[c.parent_id]
        assert parent["start_index"] <= c.start_index < c.end_index <= parent["end_index"]
    heads = _mask(text, [(x.start, x.end) for x in structure.headings])
    tables = _mask(text, [(t.start, t.end) for t in structure.tables])
    prose = any(not (heads[i] or tables[i] or ch.isspace()) for i, ch in enumerate(text))
    if prose:  # a document of headings alone keeps them as children (else unfindable)
        for c in h.children:
            assert not heading_only(text, structure, c.start_index, c.end_index), c.text
    # A heading right above a table belongs to the table (its rows' section path), never
    # to the end of the child before it.
    above_table = [
        x
        for x in structure.headings
        if any(not text[x.end : t.start].strip() for t in structure.tables if t.start >= x.end)
    ]
    for c in h.children:
        for x in above_table:
            assert not (c.start_index < x.start and x.end <= c.end_index), c.text
    if child_size is not None:
        # Headings (and the blanks around them) are what a child may hold beyond its size.
        for c in h.children:
            span = range(c.start_index, c.end_index)
            own = sum(1 for i in span if not heads[i] and not text[i].isspace())
            assert own <= child_size, c.text
    in_child = _mask(text, [(c.start_index, c.end_index) for c in h.children])
    in_parent = _mask(
        text, [(p.metadata["start_index"], p.metadata["end_index"]) for p in h.parents]
    )
    rows = _mask(text, [r for t in structure.tables for r in t.rows])
    for i, ch in enumerate(text):
        if ch.isspace():
            continue
        assert in_parent[i], (i, text[i - 20 : i + 20])
        if rows[i] or not (heads[i] or tables[i]):
            assert in_child[i], (i, text[i - 20 : i + 20])


_sizes = (
    st.sampled_from([300, 800, 2000]),
    st.sampled_from([100, 200, 400]),
    st.sampled_from([0, 10]),
)

_md_block = st.one_of(
    st.builds(lambda n, w: "#" * n + " " + w, st.integers(1, 4), st.sampled_from(_TITLES)),
    st.builds(lambda n: "Some words here. " * n, st.integers(1, 60)),
    st.builds(lambda n: "word " * n, st.integers(1, 120)),
    st.builds(lambda n: "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * n, st.integers(1, 12)),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_md_block, min_size=1, max_size=14), *_sizes)
def test_property_markdown_no_heading_alone(
    blocks: list[str], parent_size: int, child_size: int, overlap: int
) -> None:
    text = "\n\n".join(blocks)
    structure = read_markdown(text)
    h = _build(text, structure, parent_size, child_size, overlap)
    check_rows(text, structure, h, child_size)


_html_block = st.one_of(
    st.builds(lambda n, w: f"<h{n}>{w}</h{n}>", st.integers(1, 4), st.sampled_from(_TITLES)),
    st.builds(lambda n: f"<p>{'Some words here. ' * n}</p>", st.integers(1, 60)),
    st.builds(lambda n: f"<div>{'word ' * n}<br>{'more ' * n}</div>", st.integers(1, 60)),
    st.builds(
        lambda n: (
            "<table><tr><th>Name</th><th>Role</th></tr>"
            + "<tr><td>Ann</td><td>Lead</td></tr>" * n
            + "</table>"
        ),
        st.integers(1, 12),
    ),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_html_block, min_size=1, max_size=14), *_sizes)
def test_property_html_no_heading_alone(
    blocks: list[str], parent_size: int, child_size: int, overlap: int
) -> None:
    text, structure = read_html("<body>" + "".join(blocks) + "</body>")
    h = _build(text, structure, parent_size, child_size, overlap)
    check_rows(text, structure, h, child_size)


def test_run_nested_headings_start_the_text_under_them() -> None:
    body = "Full-time staff accrue vacation at a steady rate every month. " * 7
    text = f"# Handbook\n\n## 5. Leave\n\n### Vacation\n\n{body.strip()}\n\n## 6. Pay\n\nMonthly."
    structure = read_markdown(text)
    h = _build(text, structure, 300, 400, 0)
    check_rows(text, structure, h, 400)
    first = h.children[0]
    assert first.text.startswith("# Handbook\n\n## 5. Leave\n\n### Vacation\n\nFull-time")
    assert first.metadata["section_path"] == "Handbook > 5. Leave > Vacation"
    # No parent is a heading alone either: the run opens the parent of its text.
    assert h.parents[0].page_content.startswith("# Handbook\n\n## 5. Leave\n\n### Vacation")


def test_run_corpus_has_no_heading_alone() -> None:
    loader = TextLoader(CORPUS)  # the loader ingest uses, with its defaults; no model loads
    children = 0
    for doc in loader.load():
        meta, structure = split_structure(doc.metadata)
        assert structure is not None
        h = loader.processor.build_hierarchy(
            doc.page_content, meta["document_id"], meta, structure=structure
        )
        check_rows(doc.page_content, structure, h, 400)
        assert max(len(c.text) for c in h.children) <= 400
        children += len(h.children)
        if meta["document_id"] == "employee-handbook.md":
            leave = next(c for c in h.children if c.start_index == 10315)
            assert leave.text.startswith("### Parental Leave\n\n")
            assert len(leave.text) > len("### Parental Leave\n\n") + 100
    assert children == 147  # 162 before, 21 of them a heading alone


def test_a_heading_right_above_a_table_ends_no_child() -> None:
    markdown = (
        "# A\n\n## B\n\nText of section b is here.\n\n## T\n\n| h1 | h2 |\n|---|---|\n| x | y |\n"
    )
    html = (
        "<h1>A</h1><h2>B</h2><p>Text of section b is here.</p><h2>T</h2>"
        "<table><tr><th>h1</th><th>h2</th></tr><tr><td>x</td><td>y</td></tr></table>"
    )
    cases = [(markdown, read_markdown(markdown)), read_html("<body>" + html + "</body>")]
    for text, structure in cases:
        h = _build(text, structure, 2000, 400, 0)
        check_rows(text, structure, h, 400)
        prose = [c.text for c in h.children if "Text of section b" in c.text]
        assert prose and all(not c.rstrip().endswith("T") for c in prose), prose
