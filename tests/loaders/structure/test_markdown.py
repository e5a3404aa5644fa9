from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from parrot_parents.loaders.structure.markdown import read_markdown

DOC = """Preface line.

Title
=====

Some text.

Sub
---

Benefit costs:

| Plan | Cost |
|------|-----:|
| Basic | 10 |
| Gold | 20 |

## Chapter 2 ##

More.
"""


def test_run_atx_and_setext_headings_with_exact_spans() -> None:
    s = read_markdown(DOC)
    assert [(h.level, h.title) for h in s.headings] == [(1, "Title"), (2, "Sub"), (2, "Chapter 2")]
    assert [DOC[h.start : h.end] for h in s.headings] == [
        "Title\n=====",
        "Sub\n---",
        "## Chapter 2 ##",
    ]


def test_run_pipe_table_with_header_rows_and_caption() -> None:
    (table,) = read_markdown(DOC).tables
    assert table.columns == ("Plan", "Cost")
    assert table.caption == "Benefit costs:"
    assert DOC[table.header[0] : table.header[1]] == "| Plan | Cost |"  # type: ignore[index]
    assert [DOC[a:b] for a, b in table.rows] == ["| Basic | 10 |", "| Gold | 20 |"]
    assert DOC[table.start : table.end].endswith("| Gold | 20 |")


def test_heading_in_code_block_is_no_heading() -> None:
    text = "```\n# not a heading\n```\n\n# Real\n"
    assert [h.title for h in read_markdown(text).headings] == ["Real"]


def test_crlf_offsets() -> None:
    text = "intro\r\n\r\n## Pay\r\nPaid monthly.\r\n"
    (h,) = read_markdown(text).headings
    assert text[h.start : h.end] == "## Pay"


def test_to_dict_round_trip() -> None:
    from parrot_parents.loaders.structure.tree import Structure

    s = read_markdown(DOC)
    assert Structure.from_dict(s.to_dict()) == s


_line = st.one_of(
    st.builds(lambda n, w: "#" * n + " " + w, st.integers(1, 6), st.text("abc XIV3", min_size=1)),
    st.text("abc .\n", max_size=30),
    st.just("| a | b |\n|---|---|\n| 1 | 2 |"),
    st.just("Setext\n---"),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_line, max_size=12), st.sampled_from(["\n", "\n\n", "\r\n"]))
def test_property_spans_are_inside_the_text_and_ordered(lines: list[str], sep: str) -> None:
    text = sep.join(lines)
    s = read_markdown(text)
    previous = -1
    for h in s.headings:
        assert 0 <= h.start <= h.end <= len(text)
        assert h.start > previous
        previous = h.start
        assert h.title in " ".join(text[h.start : h.end].split()) or not h.title
    for t in s.tables:
        assert 0 <= t.start <= t.end <= len(text)
        for a, b in t.rows:
            assert t.start <= a < b <= t.end
