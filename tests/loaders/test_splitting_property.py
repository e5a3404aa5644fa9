"""Offsets come from the split itself, checked on examples and by hypothesis."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_text_splitters import RecursiveCharacterTextSplitter

from parrot_parents.loaders.hierarchy import LateChunkingProcessor
from parrot_parents.loaders.splitting import CHILD_SEPARATORS, split_spans


class _NoModel:
    """build_hierarchy never embeds; a model is not needed to check the structure."""


def _processor(size: int, overlap: int) -> LateChunkingProcessor:
    return LateChunkingProcessor(
        child_chunk_size=size,
        child_chunk_overlap=overlap,
        embedding=_NoModel(),  # type: ignore[arg-type]
    )


def _check_hierarchy(text: str, size: int, overlap: int, threshold: int = 16000) -> None:
    h = _processor(size, overlap).build_hierarchy(
        text,
        "doc",
        parent_chunk_threshold_tokens=threshold,
        parent_chunk_size_tokens=max(threshold // 2, 2),
        parent_chunk_overlap_tokens=min(threshold // 8, max(threshold // 2, 2) - 1),
    )
    parents = {str(p.id): p for p in h.parents}
    for p in h.parents:
        s, e = p.metadata["start_index"], p.metadata["end_index"]
        assert text[s:e] == p.page_content
    covered = [False] * len(text)
    for c in h.children:
        assert text[c.start_index : c.end_index] == c.text
        parent = parents[c.parent_id]
        assert parent.metadata["start_index"] <= c.start_index
        assert c.end_index <= parent.metadata["end_index"]
        for i in range(c.start_index, c.end_index):
            covered[i] = True
    # Every non-whitespace character of the source is in some child.
    missed = [i for i, ch in enumerate(text) if not covered[i] and not ch.isspace()]
    assert not missed, f"characters not covered: {missed[:10]}"


def test_repeated_line_gets_its_own_offsets() -> None:
    # A repeated line: lines 2 and 3 are the same sentence; size 100, overlap 50.
    line = "Prime the pump before the first start each spring."
    text = f"Pump manual\n{line}\n{line}"
    third = text.rindex(line)
    assert split_spans(text, 100, 50) == [(0, third - 1), (third, len(text))]
    _check_hierarchy(text, 100, 50)


def test_repeated_table_rows_with_large_overlap_do_not_crash() -> None:
    # A short form whose row repeats three times, overlap 80: where a piece's offset is
    # searched for by its text, this fails ("splitter returned text not found in the source").
    sig = "| Signature: ________________ |"
    text = f"\n| Name | ________ | Date | ______ |\n{sig}\n{sig}\n{sig}\nSubmit to HR by Friday."
    _check_hierarchy(text, 100, 80)
    spans = split_spans(text, 100, 80)
    assert spans[-1][1] == len(text)


def test_pieces_equal_the_library_splitter() -> None:
    text = ("Same line here.\n" * 12) + "Last line."
    for size, overlap in [(30, 10), (50, 40), (100, 50)]:
        ref = RecursiveCharacterTextSplitter(
            chunk_size=size,
            chunk_overlap=overlap,
            separators=CHILD_SEPARATORS,
            keep_separator="end",
            strip_whitespace=True,
        ).split_text(text)
        assert [text[s:e] for s, e in split_spans(text, size, overlap)] == ref


_alphabet = st.sampled_from([*"ab .,;!?\n\r\t", "\x00", "\x07", "é", "😀", "ש", "\u200b"])
_line = st.text(alphabet=_alphabet, max_size=60) | st.sampled_from(
    ["The same sentence again.", "| a | b |", "", "x" * 300]
)


@st.composite
def _documents(draw: st.DrawFn) -> str:
    lines = draw(st.lists(_line, max_size=25))
    if lines and draw(st.booleans()):  # repeated text
        lines = lines + lines[: draw(st.integers(1, len(lines)))]
    return "\n".join(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_documents(),
    size=st.integers(20, 400),
    overlap_frac=st.floats(0, 0.95),
    threshold=st.sampled_from([16000, 200, 60]),
)
def test_hierarchy_offsets_property(
    text: str, size: int, overlap_frac: float, threshold: int
) -> None:
    overlap = min(int(size * overlap_frac), size - 1)
    _check_hierarchy(text, size, overlap, threshold)


_hostile = st.sampled_from(
    [*"ab .,;!?\n\r\t", "\x00", "\x07", "\x1b", "\ud835", "é", "😀", "ש", "\u200b", "\x85"]
)
_hostile_line = st.text(alphabet=_hostile, max_size=50) | st.sampled_from(
    ["Same line again.", "", "w" * 500, "## Empty section\n\n\n"]
)
_meta_value = st.one_of(
    st.integers(-(2**40), 2**40),
    st.text(max_size=10),
    st.just(float("nan")),
    st.just({"a", "b"}),
    st.just("bad\x00value"),
)


@st.composite
def _batches(draw: st.DrawFn) -> list[tuple[str, dict]]:
    docs = []
    for _ in range(draw(st.integers(1, 4))):
        lines = draw(st.lists(_hostile_line, max_size=15))
        if lines and draw(st.booleans()):
            lines = lines * 2
        meta = draw(st.dictionaries(st.sampled_from(["k", "year"]), _meta_value, max_size=2))
        docs.append(("\n".join(lines), meta))
    return docs


def _meta_ok(meta: dict) -> bool:
    from parrot_parents.errors import ConfigurationError
    from parrot_parents.stores.records.values import normalize_metadata

    try:
        normalize_metadata(meta)
    except ConfigurationError:
        return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=_batches(), size=st.integers(20, 300), overlap_frac=st.floats(0, 0.9))
async def test_loader_fuzz_loses_nothing_else_in_the_batch(
    batch: list[tuple[str, dict]], size: int, overlap_frac: float
) -> None:
    # Random unicode with NUL, control characters and lone surrogates, huge lines, empty
    # sections, repeated text, random sizes and metadata that is sometimes not JSON.
    from langchain_core.documents import Document

    from parrot_parents.loaders.text import TextLoader
    from parrot_parents.stores.records.values import clean_text

    overlap = min(int(size * overlap_frac), size - 1)
    loader = TextLoader(
        child_chunk_size=size,
        child_chunk_overlap=overlap,
        embedding=_NoModel(),  # type: ignore[arg-type]
    )
    docs = [
        Document(page_content=text, metadata={**meta, "document_id": f"d{i}"})
        for i, (text, meta) in enumerate(batch)
    ]
    rows = await loader.chunk_documents(docs, parent_chunk_threshold_tokens=400)
    by_doc: dict[str, list[Document]] = {}
    for r in rows:
        by_doc.setdefault(r.metadata["document_id"], []).append(r)
    for i, (text, meta) in enumerate(batch):
        name = f"d{i}"
        if not _meta_ok(meta):
            assert name in loader.report.failed and name not in by_doc
            continue
        assert name not in loader.report.failed
        cleaned = clean_text(text)[0]
        assert len(cleaned) == len(text)  # offsets into the caller's text stay valid
        assert (name in by_doc) == bool(cleaned.strip())
        parents = {r.id: r for r in by_doc.get(name, []) if not r.metadata["is_chunk"]}
        covered = [False] * len(cleaned)
        for r in by_doc.get(name, []):
            s, e = r.metadata["start_index"], r.metadata["end_index"]
            assert cleaned[s:e] == r.page_content
            assert "\x00" not in r.page_content
            if r.metadata["is_chunk"]:
                p = parents[r.metadata["parent_document_id"]]
                assert p.metadata["start_index"] <= s and e <= p.metadata["end_index"]
                for j in range(s, e):
                    covered[j] = True
        assert all(covered[j] or ch.isspace() for j, ch in enumerate(cleaned))
