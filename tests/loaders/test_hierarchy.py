from __future__ import annotations

import itertools
import random

import pytest

from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders.hierarchy import LateChunkingProcessor
from parrot_parents.loaders.splitting import split_spans

WORDS = [
    "payroll",
    "runs",
    "on",
    "the",
    "fifteenth",
    "and",
    "last",
    "business",
    "day",
    "of",
    "each",
    "month",
    "while",
    "overtime",
    "is",
    "paid",
    "in",
    "the",
    "following",
    "cycle",
    "and",
    "receipts",
    "are",
    "due",
    "within",
    "thirty",
    "days",
]


def make_text(n_chars: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < n_chars:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize()
        sentence += "." + ("\n\n" if rng.random() < 0.2 else " ")
        out.append(sentence)
        size += len(sentence)
    return "".join(out)[:n_chars]


@pytest.fixture
def processor(embeddings) -> LateChunkingProcessor:
    return LateChunkingProcessor(child_chunk_size=400, embedding=embeddings)


def test_document_at_threshold_is_two_level(processor: LateChunkingProcessor) -> None:
    text = make_text(16000)
    h = processor.build_hierarchy(text, "doc")
    assert h.levels == 2
    assert len(h.parents) == 1
    parent = h.parents[0]
    assert parent.metadata["is_full_document"] is True
    assert parent.page_content == text
    assert "document_type" not in parent.metadata


def test_document_over_threshold_is_three_level(processor: LateChunkingProcessor) -> None:
    text = make_text(16001)
    h = processor.build_hierarchy(text, "doc")
    assert h.levels == 3
    assert len(h.parents) >= 5
    assert all(p.metadata["document_type"] == "parent_chunk" for p in h.parents)
    assert all("is_full_document" not in p.metadata for p in h.parents)
    assert all(len(p.page_content) <= 4000 for p in h.parents)
    # Neighbouring parent_chunks overlap (by up to 200 characters) and cover the text.
    spans = [(p.metadata["start_index"], p.metadata["end_index"]) for p in h.parents]
    for (s1, e1), (s2, _e2) in itertools.pairwise(spans):
        assert s1 < s2 <= e1 + 2
        assert e1 - s2 <= 200
    assert spans[0][0] <= 1 and spans[-1][1] >= len(text.rstrip())


@pytest.mark.parametrize("n_chars", [900, 16000, 40000])
def test_children_lie_inside_parents_within_size_with_exact_offsets(
    processor: LateChunkingProcessor, n_chars: int
) -> None:
    text = make_text(n_chars, seed=n_chars)
    h = processor.build_hierarchy(text, "doc")
    parents = {p.id: p for p in h.parents}
    assert h.children
    for child in h.children:
        parent = parents[child.parent_id]
        assert parent.metadata["start_index"] <= child.start_index
        assert child.end_index <= parent.metadata["end_index"]
        assert text[child.start_index : child.end_index] == child.text
        assert 0 < len(child.text) <= 400
        assert child.metadata["is_chunk"] is True
        assert child.metadata["parent_document_id"] == parent.id
    for parent in h.parents:
        meta = parent.metadata
        assert text[meta["start_index"] : meta["end_index"]] == parent.page_content
    # Children are real small chunks, not the whole text.
    assert len(h.children) >= n_chars // 400


def test_children_cut_on_sentence_boundaries(processor: LateChunkingProcessor) -> None:
    text = "First sentence is here. Second one follows it. " * 40
    h = processor.build_hierarchy(text, "doc")
    assert all(c.text.endswith(".") for c in h.children)


def test_ids_are_deterministic(processor: LateChunkingProcessor) -> None:
    text = make_text(20000)
    a = processor.build_hierarchy(text, "doc")
    b = processor.build_hierarchy(text, "doc")
    assert [d.id for d in a.documents()] == [d.id for d in b.documents()]
    assert len({d.id for d in a.documents()}) == len(a.documents())


def test_identical_paragraphs_get_distinct_ids(embeddings) -> None:
    processor = LateChunkingProcessor(child_chunk_size=70, embedding=embeddings)
    para = "The notice period is thirty days for every member of staff.\n\n"
    h = processor.build_hierarchy(para * 3, "doc")
    texts = [c.text for c in h.children]
    assert len(texts) > len(set(texts))  # the same text really occurs twice
    assert len({c.chunk_id for c in h.children}) == len(h.children)


def test_user_metadata_is_kept_but_cannot_override_markers(
    processor: LateChunkingProcessor,
) -> None:
    h = processor.build_hierarchy(
        "Some text.", "doc", {"source": "a.md", "is_chunk": "no", "document_id": "evil"}
    )
    assert h.children[0].metadata["source"] == "a.md"
    assert h.children[0].metadata["document_id"] == "doc"
    assert h.parents[0].metadata["is_chunk"] is False


def test_overlap_not_smaller_than_size_is_value_error(processor: LateChunkingProcessor) -> None:
    with pytest.raises(ValueError, match="parent_chunk_overlap_tokens must be in"):
        processor.build_hierarchy(
            "x" * 50, "doc", parent_chunk_size_tokens=100, parent_chunk_overlap_tokens=100
        )


async def test_process_document_three_level_embeds_children(
    processor: LateChunkingProcessor,
) -> None:
    text = make_text(9000)
    parents, children = await processor.process_document_three_level(
        text,
        "doc",
        {"source": "x"},
        parent_chunk_size_tokens=2000,
        parent_chunk_overlap_tokens=100,
    )
    assert len(parents) >= 5
    assert all(p.metadata["document_type"] == "parent_chunk" for p in parents)
    assert all(c.embedding is not None and len(c.embedding) == 384 for c in children)


def test_empty_document_yields_no_rows(processor: LateChunkingProcessor) -> None:
    h = processor.build_hierarchy("   \n ", "doc")
    assert h.parents == [] and h.children == []


@pytest.mark.parametrize(("size", "overlap", "msg"), [(0, 0, "chunk_size"), (10, 10, "overlap")])
def test_split_spans_validation(size: int, overlap: int, msg: str) -> None:
    with pytest.raises(ConfigurationError, match=msg):
        split_spans("abc", size, overlap)


def test_split_spans_with_overlap_and_repeats_are_exact() -> None:
    text = ("Same words again. " * 60) + "Ending here."
    spans = split_spans(text, 100, 30)
    assert spans == sorted(spans)
    for s, e in spans:
        assert e - s <= 100
    pieces = [text[s:e] for s, e in spans]
    assert all(p.strip() == p for p in pieces)
