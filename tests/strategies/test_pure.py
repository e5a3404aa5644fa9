"""Pure parts: bounded prompts, reply parsers, heading paths, hit resolution."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from parrot_parents.loaders.headings import HeadingIndex
from parrot_parents.stores.resolve import resolve_indexed, targets_of
from parrot_parents.stores.results import SearchResult
from parrot_parents.strategies.guarded import MalformedReply
from parrot_parents.strategies.prompts import (
    contextual_messages,
    document_window,
    parse_list,
    parse_text,
)


@example(text="0000000000001", a=1, b=13, cap=12)  # a span exactly as long as the cap
@given(
    st.text(max_size=300),
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=1, max_value=120),
)
def test_document_window_is_bounded_and_holds_the_span(text: str, a: int, b: int, cap: int) -> None:
    start, end = sorted((min(a, len(text)), min(b, len(text))))
    window = document_window(text, start, end, cap)
    assert len(window) <= cap or window == text
    assert window in text
    if end - start <= cap:
        assert text[start:end] in window


def test_the_prompt_carries_no_more_than_the_window() -> None:
    text = "x" * 50_000
    user = contextual_messages(document_window(text, 25_000, 25_100, 12_000), "chunk")[-1]
    assert user["content"].count("x") == 12_000


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('["a?", "b?", "c?"]', ["a?", "b?"]),
        ('```json\n["a?", " a? ", ""]\n```', ["a?"]),
    ],
)
def test_parse_list(reply: str, expected: list[str]) -> None:
    assert parse_list(reply, 2) == expected


@pytest.mark.parametrize("reply", ["nope", '{"a": 1}', "[1, 2]", '["", "  "]', "[]"])
def test_parse_list_refuses_malformed(reply: str) -> None:
    with pytest.raises(MalformedReply):
        parse_list(reply, 3)


def test_parse_text_refuses_empty_and_overlong() -> None:
    assert parse_text("  note \n") == "note"
    for bad in ("", "x" * 5000):
        with pytest.raises(MalformedReply):
            parse_text(bad)


def test_heading_paths_of_markdown_and_wikitext() -> None:
    text = (
        " = Game = \n intro\n = = Plot = = \n story\n = = = Cast = = = \n names\n"
        " = = Reception = = \n praise\n# Other\n## Part\nbody"
    )
    index = HeadingIndex(text)
    assert index.path(text.index("intro")) == ["Game"]
    assert index.path(text.index("names")) == ["Game", "Plot", "Cast"]
    assert index.path(text.index("praise")) == ["Game", "Reception"]
    assert index.path(text.index("body")) == ["Other", "Part"]
    assert HeadingIndex("no headings here").path(5) == []


def _row(i: int, target: int | None) -> SearchResult:
    if target is None:
        return SearchResult(id=f"c{i}", content=f"child {i}", metadata={"is_chunk": True})
    meta = {"document_type": "indexed", "indexes": f"c{target}", "indexed_kind": "question"}
    return SearchResult(id=f"c{target}~q{i}", content="q?", metadata=meta, score=1.0 - i / 100)


@given(st.lists(st.one_of(st.none(), st.integers(0, 5)), max_size=30))
def test_resolution_keeps_each_row_once_at_its_best_rank(targets: list[int | None]) -> None:
    ranked = [_row(i, t) for i, t in enumerate(targets)]
    children = {f"c{t}": _row(t, None) for t in range(6)}
    known = {k: v for k, v in children.items() if k != "c5"}  # c5 was deleted
    out = resolve_indexed(ranked, known)
    ids = [r.id for r in out]
    assert len(ids) == len(set(ids))
    assert all(r.metadata.get("document_type") != "indexed" for r in out)
    expected = []
    for r in ranked:
        rid = r.metadata.get("indexes", r.id)
        dangling = rid == "c5" and r.metadata.get("document_type") == "indexed"
        if not dangling and rid not in expected:
            expected.append(rid)
    assert ids == expected
    for r in out:
        if r.via is not None:
            assert r.via.startswith(r.id + "~") and r.via_kind == "question"
            assert r.content == children[r.id].content
    assert set(targets_of(ranked)) == {f"c{t}" for t in targets if t is not None}
