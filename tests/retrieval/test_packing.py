from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parrot_parents.retrieval.packing import SourceIndex, pack
from parrot_parents.retrieval.passages import Hit, Passage
from parrot_parents.stores.records.sentences import (
    SENTENCES,
    SentenceVectors,
    only_headings,
    sentence_spans,
)
from parrot_parents.stores.results import SearchResult

SOURCE = "".join(f"Sentence {i:03d} of the source text. " for i in range(200))  # 6000 chars


def child(i: int, start: int, end: int, rank: int, parent: str = "P") -> Hit:
    return Hit(
        f"c{i}",
        SOURCE[start:end],
        {"document_id": "d", "start_index": start, "end_index": end, "parent_document_id": parent},
        0.9 - rank / 100,
        rank,
    )


def parent_passage(start: int, end: int, hits: list[Hit], rank: int = 0) -> Passage:
    return Passage(
        f"P{start}",
        SOURCE[start:end],
        "parent_chunk",
        0.9,
        rank,
        "d",
        start,
        end,
        None,
        [h.id for h in hits],
    )


def test_a_parent_that_fits_is_taken_whole() -> None:
    h = child(1, 100, 200, 0)
    result = pack([parent_passage(0, 1000, [h])], [h], 1500)
    assert [(p.start_index, p.end_index, p.kind) for p in result.passages] == [
        (0, 1000, "parent_chunk")
    ]
    assert result.used == 1000 and not result.substituted


@pytest.mark.parametrize("budget", [150, 400, 999])
def test_a_parent_that_does_not_fit_becomes_a_window_around_its_hits(budget: int) -> None:
    hits = [child(1, 2000, 2100, 0), child(2, 2300, 2400, 1)]
    result = pack([parent_passage(0, 4000, hits)], hits, budget)
    assert result.used <= budget
    assert result.substituted == ["P0"]
    assert all(p.kind == "window" for p in result.passages)
    for p in result.passages:
        assert p.text == SOURCE[p.start_index : p.end_index]
    spans = [(p.start_index, p.end_index) for p in result.passages]
    # The best hit is always inside a window; growth is symmetric around the hits.
    assert any(s <= 2000 and e >= 2100 for s, e in spans)
    if budget >= 400:
        assert any(s <= 2300 and e >= 2400 for s, e in spans)  # the second hit too
        # Windows end on sentence boundaries: less than a sentence (33 characters) per
        # side of each of the two windows.
        assert result.used >= budget - 4 * 33
    if budget == 999:
        assert len(spans) == 1  # the two windows grew into each other


@pytest.mark.parametrize("budget", [150, 400, 999])
def test_windows_around_hits_start_and_end_on_sentence_boundaries(budget: int) -> None:
    hits = [child(1, 2000, 2100, 0), child(2, 2300, 2400, 1)]
    result = pack([parent_passage(0, 4000, hits)], hits, budget)
    assert result.passages and "mid_sentence" not in result.meta()
    for p in result.passages:
        assert p.start_index is not None and p.end_index is not None
        # Every window reaches past its hits here, so each side is a sentence boundary.
        assert p.text.startswith("Sentence ") and p.text.endswith("text."), p.text


def test_a_window_inside_one_long_sentence_says_it_cuts_the_sentence() -> None:
    text = "word " * 400  # one sentence of 2000 characters
    hit = Hit(
        "c", text[900:1000], {"document_id": "d", "start_index": 900, "end_index": 1000}, 0.9, 0
    )
    parent = Passage("P", text, "parent", 0.9, 0, "d", 0, len(text), None, ["c"])
    result = pack([parent], [hit], 300)
    assert result.used <= 300
    assert result.meta()["mid_sentence"] == [
        f"d:{p.start_index}-{p.end_index}" for p in result.passages
    ]


def test_overlapping_and_touching_spans_are_merged_never_repeated() -> None:
    a, b = child(1, 0, 300, 0), child(2, 200, 500, 1)
    c = child(3, 500, 700, 2)
    passages = [Passage.from_hit(h) for h in (a, b, c)]
    result = pack(passages, [a, b, c], 10_000)
    assert [(p.start_index, p.end_index) for p in result.passages] == [(0, 700)]
    assert result.passages[0].text == SOURCE[0:700]
    assert result.passages[0].kind == "merged"
    assert result.used == 700


def test_nothing_beyond_the_budget_and_cut_children_are_reported() -> None:
    hits = [child(i, i * 1000, i * 1000 + 400, i) for i in range(5)]
    result = pack([Passage.from_hit(h) for h in hits], hits, 1000)
    assert 1000 - 40 <= result.used <= 1000
    assert sum(len(p.text) for p in result.passages) == result.used
    assert result.truncated == ["c2"]
    assert result.cut == ["c3", "c4"]
    third = result.passages[2]
    assert third.text == SOURCE[third.start_index : third.end_index]


def test_overlapping_parent_chunks_join_into_one_source() -> None:
    idx = SourceIndex()
    idx.add("d", 0, SOURCE[0:4000])
    idx.add("d", 3800, SOURCE[3800:6000])
    assert idx.slice("d", 3500, 4500) == SOURCE[3500:4500]
    assert idx.slice("x", 0, 10) is None


def test_rank_order_is_kept() -> None:
    a, b = child(1, 3000, 3100, 0), child(2, 100, 200, 1)
    result = pack([Passage.from_hit(a), Passage.from_hit(b)], [a, b], 5000)
    assert [p.start_index for p in result.passages] == [3000, 100]


def test_windows_and_cuts_end_on_word_boundaries() -> None:
    hits = [child(1, 2003, 2100, 0), child(2, 2307, 2400, 1)]
    for budget in (150, 333, 777):
        result = pack([parent_passage(0, 4000, hits)], hits, budget)
        for p in result.passages:
            before = SOURCE[p.start_index - 1] if p.start_index else " "
            after = SOURCE[p.end_index] if p.end_index < len(SOURCE) else " "
            assert before.isspace() or p.text[0].isspace() or not p.text[0].isalnum()
            assert after.isspace() or p.text[-1].isspace() or not after.isalnum()


def test_every_hit_is_in_a_passage_or_cut() -> None:
    # The shape of `ask "How will I be paid, and when?" --budget 1500`: five hits of one
    # parent, the last far from the others. The window cannot reach it, so it must not be
    # listed in the window's child_ids, and it must be reported as cut.
    spans = [(4610, 5004), (5301, 5461), (5006, 5300), (5463, 5744), (5896, 6000)]
    hits = [child(i, s, e, i) for i, (s, e) in enumerate(spans)]
    result = pack([parent_passage(3797, 6000, hits)], hits, 1500)
    listed = {c for p in result.passages for c in p.child_ids}
    for p in result.passages:
        for c in p.child_ids:
            h = next(h for h in hits if h.id == c)
            assert p.start_index <= h.start_index and h.end_index <= p.end_index, (p, c)
    for h in hits:
        assert (h.id in listed) != (h.id in result.cut), h.id
    assert "c4" in result.cut


def test_hits_in_a_whole_parent_are_not_cut() -> None:
    hits = [child(1, 100, 200, 0), child(2, 600, 700, 1)]
    result = pack([parent_passage(0, 1000, hits)], hits, 1500)
    assert result.passages[0].child_ids == ["c1", "c2"] and result.cut == []


def _sections(seed: int, n: int) -> tuple[str, list[Hit], list[Passage], np.ndarray]:
    """A Markdown document of ``n`` sections; one child per section (its heading line
    alone, its heading with its text, or its text alone), best first in a random order;
    a parent per two sections; the question's unit vector (sentence vectors are random)."""
    rng = np.random.default_rng(seed)
    words = ["pay", "day", "leave", "sick", "rate", "fund", "claim", "rule"]
    parts, spans, pos = [], [], 0
    for k in range(n):
        heading = "#" * int(rng.integers(1, 4)) + f" Section {k} " + str(rng.choice(words))
        body = " ".join(
            " ".join(rng.choice(words, size=int(rng.integers(2, 9)))).capitalize() + "."
            for _ in range(int(rng.integers(0, 4)))
        )
        section = f"{heading}\n\n{body}" if body else heading
        shape = int(rng.integers(0, 3)) if body else 0
        if shape == 0:  # the heading alone (and nothing else when the section is empty)
            spans.append((pos, pos + len(heading)))
        elif shape == 1:
            spans.append((pos, pos + len(section)))
        else:
            spans.append((pos + len(heading) + 2, pos + len(section)))
        parts.append(section)
        pos += len(section) + 2
    text = "\n\n".join(parts)
    hits = []
    for rank, i in enumerate(rng.permutation(n)):
        s, e = spans[i]
        sents = sentence_spans(text, s, e)
        meta = {"document_id": "d", "start_index": s, "end_index": e}
        meta["parent_document_id"] = f"P{i // 2}"
        meta[SENTENCES] = SentenceVectors.build(sents, rng.normal(size=(len(sents), 8))).encode()
        result = SearchResult(f"c{i}", text[s:e], meta, score=0.9 - rank / 100)
        hits.append(Hit.from_result(result, rank))
    parents = []
    for j in range(0, n, 2):
        s, e = spans[j][0], spans[min(j + 1, n - 1)][1]
        held = [h.id for h in hits if h.metadata["parent_document_id"] == f"P{j // 2}"]
        parents.append(Passage(f"P{j // 2}", text[s:e], "parent", 0.9, j, "d", s, e, None, held))
    query = rng.normal(size=8).astype(np.float32)
    return text, hits, parents, query / np.linalg.norm(query)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 10),
    budget=st.integers(1, 1200),
    trim=st.booleans(),
    expand=st.booleans(),
)
def test_no_packed_passage_is_only_headings(
    seed: int, n: int, budget: int, trim: bool, expand: bool
) -> None:
    text, hits, parents, query = _sections(seed, n)
    passages = parents if expand else [Passage.from_hit(h) for h in hits]
    result = pack(passages, hits, budget, trim=trim, query=query)
    assert sum(len(p.text) for p in result.passages) == result.used <= budget
    for p in result.passages:
        assert not only_headings(p.text), p.text
        assert p.start_index is not None and text[p.start_index : p.end_index] == p.text
    held = {c for p in result.passages for c in p.child_ids}
    assert all(h.id in held or h.id in result.cut for h in hits)


def test_a_heading_alone_gives_its_room_to_the_next_hit() -> None:
    text = "### Sick Leave\n\nEvery employee gets ten days.\n\n## Pay\n\nPay day is the 15th."
    spans = [
        (0, 14),
        (text.index("Every"), text.index("days.") + 5),
        (text.index("Pay day"), len(text)),
    ]
    hits = [
        Hit(f"c{i}", text[s:e], {"document_id": "d", "start_index": s, "end_index": e}, 0.9, i)
        for i, (s, e) in enumerate(spans)
    ]
    result = pack([Passage.from_hit(h) for h in hits], hits, 60)
    assert [p.text for p in result.passages] == [
        "Every employee gets ten days.",
        "Pay day is the 15th.",
    ]
    assert "c0" in result.cut
