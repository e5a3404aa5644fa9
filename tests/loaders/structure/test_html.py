from __future__ import annotations

from html import escape

from hypothesis import given, settings
from hypothesis import strategies as st

from parrot_parents.loaders.structure.html import read_html

PAGE = """<html><head><title>Benefits</title><style>p {color: red}</style></head><body>
<h1>Benefits  Guide</h1><p>Intro   text
here.</p>
<h2>Chapter 2: Health</h2>
<p>Plans below.</p>
<table><caption>Plan costs</caption>
<thead><tr><th>Plan</th><th>Cost</th></tr></thead>
<tbody><tr><td>Basic</td><td>10 &amp; more</td></tr><tr><td>Gold</td><td>20</td></tr></tbody>
</table>
<h2>Part IV</h2><ul><li>one</li><li>two</li></ul><script>var x = "<h1>no</h1>";</script>
</body></html>"""


def test_run_text_headings_and_title() -> None:
    text, s = read_html(PAGE)
    assert s.reader == "html" and s.title == "Benefits"
    assert [(h.level, h.title) for h in s.headings] == [
        (1, "Benefits Guide"),
        (2, "Chapter 2: Health"),
        (2, "Part IV"),
    ]
    assert [text[h.start : h.end] for h in s.headings] == [h.title for h in s.headings]
    assert "color" not in text and "var x" not in text
    assert "Intro text here." in text


def test_run_table_rows_keep_exact_spans_and_header() -> None:
    text, s = read_html(PAGE)
    (table,) = s.tables
    assert table.caption == "Plan costs"
    assert table.columns == ("Plan", "Cost")
    assert text[table.header[0] : table.header[1]] == "Plan | Cost"  # type: ignore[index]
    assert [text[a:b] for a, b in table.rows] == ["Basic | 10 & more", "Gold | 20"]


def test_table_without_thead_takes_a_th_first_row_as_header() -> None:
    text, s = read_html("<table><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></table>")
    (table,) = s.tables
    assert table.columns == ("A", "B")
    assert [text[a:b] for a, b in table.rows] == ["1 | 2"]


_words = st.text("abc XIV3&<é", min_size=1, max_size=12)
_block = st.one_of(
    st.builds(lambda n, w: f"<h{n}>{escape(w)}</h{n}>", st.integers(1, 6), _words),
    st.builds(lambda w: f"<p>{escape(w)}</p>", _words),
    st.builds(lambda w: f"<div> {escape(w)} <br> {escape(w)}</div>", _words),
    st.builds(
        lambda rows: (
            "<table><tr><th>H1</th><th>H2</th></tr>"
            + "".join(f"<tr><td>{escape(a)}</td><td>{escape(b)}</td></tr>" for a, b in rows)
            + "</table>"
        ),
        st.lists(st.tuples(_words, _words), min_size=1, max_size=4),
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_block, max_size=10))
def test_property_heading_and_row_spans_are_their_text(blocks: list[str]) -> None:
    text, s = read_html("<body>" + "".join(blocks) + "</body>")
    for h in s.headings:
        assert " ".join(text[h.start : h.end].split()) == h.title
    for t in s.tables:
        assert t.columns == ("H1", "H2")
        for a, b in t.rows:
            assert 0 <= t.start <= a < b <= t.end <= len(text)
            assert "|" in text[a:b]
