"""One bad value never takes the batch down, and long children are never cut silently.
Real model, real database."""

from __future__ import annotations

import datetime as dt
import math
import os
from pathlib import Path

import pytest
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders.abstract import IngestReport
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore


def _doc(doc_id: str, text: str = "Salaries are paid on the 25th.", **meta: object) -> Document:
    return Document(page_content=text, metadata={"document_id": doc_id, **meta})


async def _stored(store: PgVectorStore) -> set[str]:
    sources = await store.document_sources(["good1", "bad", "good2", "good0"])
    return set(sources)


@pytest.mark.parametrize("late", [True, False])
@pytest.mark.parametrize(
    ("bad", "failed_key"),
    [
        (_doc("bad", owner="a\x00b"), "owner"),
        (_doc("bad", tags={"x", "y"}), "tags"),
        (_doc("bad", score=math.nan), "score"),
        (_doc("bad", nested={"deep": [1, object()]}), "deep"),
        (_doc("b" * 3000), "1024 bytes"),
    ],
    ids=["nul-metadata", "set", "nan", "object", "long-id"],
)
async def test_a_bad_document_fails_alone_and_is_reported(
    store: PgVectorStore, embeddings: object, late: bool, bad: Document, failed_key: str
) -> None:
    loader = TextLoader(embedding=embeddings, late_chunking=late)  # type: ignore[arg-type]
    rows = await loader.chunk_documents([_doc("good1"), bad, _doc("good2")], vector_store=store)
    assert await _stored(store) == {"good1", "good2"}
    assert {r.metadata["document_id"] for r in rows} == {"good1", "good2"}
    [(name, reason)] = loader.report.failed.items()
    assert failed_key in reason
    assert name in ("bad", "b" * 3000)


@pytest.mark.parametrize("late", [True, False])
@pytest.mark.parametrize(
    "text",
    [
        "Pay day is the 25th.\x00 Overtime follows.",
        "Math symbols \ud835 from a PDF. Pay day is the 25th.",
        "Bell\x07 and escape\x1b characters. Pay day is the 25th.",
    ],
    ids=["nul", "surrogate", "controls"],
)
async def test_bad_characters_are_cleaned_reported_and_stored(
    store: PgVectorStore, embeddings: object, late: bool, text: str
) -> None:
    loader = TextLoader(embedding=embeddings, late_chunking=late)  # type: ignore[arg-type]
    await loader.chunk_documents(
        [_doc("good0"), _doc("bad", text), _doc("good2")], vector_store=store
    )
    assert await _stored(store) == {"good0", "bad", "good2"}
    assert not loader.report.failed
    assert loader.report.warnings["bad"]
    [hit] = [
        h
        for h in await store.similarity_search("pay day", limit=10)
        if h.metadata["document_id"] == "bad"
    ]
    s, e = hit.metadata["start_index"], hit.metadata["end_index"]
    assert len(hit.content) == e - s and "\x00" not in hit.content  # offsets stay exact


async def test_metadata_keys_the_hierarchy_writes_are_reported_not_dropped_silently(
    store: PgVectorStore, embeddings: object
) -> None:
    loader = TextLoader(embedding=embeddings)  # type: ignore[arg-type]
    doc = _doc("inv", document_type="invoice", chunk_index=7, kind="invoice")
    await loader.chunk_documents([doc], vector_store=store)
    assert not loader.report.failed
    assert any(
        "'chunk_index', 'document_type'" in w and "not stored" in w
        for w in loader.report.warnings["inv"]
    ), loader.report.warnings
    [hit] = await store.similarity_search("salaries", limit=1, filter={"kind": "invoice"})
    assert hit.metadata.get("document_type") is None and hit.metadata["chunk_index"] != 7


async def test_datetimes_become_iso_8601(store: PgVectorStore, embeddings: object) -> None:
    loader = TextLoader(embedding=embeddings)  # type: ignore[arg-type]
    when = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)
    await loader.chunk_documents(
        [_doc("good1", published=when, day=dt.date(2024, 5, 1))], vector_store=store
    )
    [hit] = await store.similarity_search("salaries", limit=1)
    assert hit.metadata["published"] == "2024-05-01T12:30:00+00:00"
    assert hit.metadata["day"] == "2024-05-01"
    assert not loader.report.failed


async def test_the_store_refuses_bad_values_before_sql(store: PgVectorStore) -> None:
    dim = store.dimension
    cases = [
        ([_doc("v")], [[math.nan] * dim], "NaN"),
        ([_doc("v")], [[0.0] * dim], "zero vector"),
        ([_doc("v", when={1, 2})], None, "when"),
        ([_doc("v", "a\x00b")], None, "NUL"),
        ([_doc("x" * 2000)], None, "1024 bytes"),
    ]
    for docs, vectors, needle in cases:
        with pytest.raises(ConfigurationError, match=needle):
            await store.add_documents(docs, embeddings=vectors)
    assert await store.count() == 0


async def test_a_file_name_that_is_not_utf8_does_not_abort_the_ingest(
    tmp_path: Path, store: PgVectorStore, embeddings: object
) -> None:
    for i in range(4):
        (tmp_path / f"good{i}.md").write_text(f"Good file {i} about pay.", encoding="utf-8")
    fd = os.open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.md"), os.O_CREAT | os.O_WRONLY)
    os.write(fd, "Café menu: coffee is free on Fridays.".encode())
    os.close(fd)
    loader = TextLoader([tmp_path], embedding=embeddings)  # type: ignore[arg-type]
    report = await loader.ingest(store)
    assert report.failed == {} and report.documents == 5
    ids = {r.metadata["document_id"] for r in await store.similarity_search("coffee", limit=20)}
    assert "caf\\xe9.md" in ids and len(ids) == 5
    assert any("not valid UTF-8" in w for ws in report.warnings.values() for w in ws)


async def test_long_children_are_embedded_in_windows_not_cut(
    store: PgVectorStore, embeddings: object
) -> None:
    # 1,535 characters (about 318 tokens) in one child: past the model's 256-token window.
    body = "The pump must be primed with clean water before it is started. " * 23
    body = body[:1450]
    endings = [" Finally, the warranty covers the seals.", " Finally, the parrot eats seeds."]
    docs = [_doc(f"long{i}", body + end) for i, end in enumerate(endings)]
    chinese = _doc("zh", "泵在启动前必须用清水灌满。" * 30 + "最后一句说明保修。")
    loader = TextLoader(
        embedding=embeddings,  # type: ignore[arg-type]
        late_chunking=False,
        child_chunk_size=2000,
        indexer=None,  # the children's own vectors are searched, not indexed rows
    )
    await loader.chunk_documents([*docs, chinese], vector_store=store)
    rows = await store.fetch_chunk_ranges([("long0", 0, 0), ("long1", 0, 0)])
    assert len(rows["long0"]) == len(rows["long1"]) == 1
    query = await embeddings.aembed_query("warranty covers the seals")  # type: ignore[attr-defined]
    hits = await store.similarity_search_by_vector(query, limit=3)
    ranked = [h.metadata["document_id"] for h in hits]
    # With the tail cut off, both long children had the same vector and tied.
    assert ranked.index("long0") < ranked.index("long1")
    scores = {h.metadata["document_id"]: h.score for h in hits}
    assert scores["long0"] - scores["long1"] > 1e-3
    assert loader.report.windowed_children == 3  # the report says how many


async def test_a_reused_loaders_report_drops_a_failure_a_later_call_wrote(
    store: PgVectorStore, embeddings: object
) -> None:
    loader = TextLoader(embedding=embeddings)  # type: ignore[arg-type]
    await loader.chunk_documents([_doc("good1"), _doc("bad", owner="a\x00b")], vector_store=store)
    assert set(loader.report.failed) == {"bad"}
    assert loader.report.documents == 1 and loader.report.children >= 1
    children = loader.report.children
    rows = await loader.chunk_documents([_doc("bad", owner="ab")], vector_store=store)
    assert loader.report.failed == {}
    assert await _stored(store) == {"good1", "bad"}
    assert loader.report.documents == 2
    assert loader.report.children == children + sum(1 for r in rows if r.metadata["is_chunk"])
    report = await loader.ingest(store, documents=[_doc("bad", owner="a\x00b")])
    assert set(report.failed) == {"bad"} and report.documents == 2


async def test_a_reused_loaders_report_keeps_a_failure_of_another_document_of_the_same_name(
    store: PgVectorStore, embeddings: object
) -> None:
    loader = TextLoader(embedding=embeddings)  # type: ignore[arg-type]
    # Named by position, then by a source that two documents share.
    await loader.chunk_documents([Document("first", metadata={"k": math.nan})], vector_store=store)
    await loader.chunk_documents([Document("another text")], vector_store=store)
    assert list(loader.report.failed) == ["documents[0]"]
    shared = {"source": "shared.txt"}
    await loader.chunk_documents([_doc("x1", k=math.nan, **shared)], vector_store=store)
    await loader.chunk_documents([_doc("y1", **shared)], vector_store=store)
    assert set(loader.report.failed) == {"documents[0]", "shared.txt"}
    # A name listed as unchanged once, and no more once written again.
    again = TextLoader(embedding=embeddings)  # type: ignore[arg-type]
    for text in ("Pay day is the 25th.", "Pay day is the 25th.", "Pay day is the 25th."):
        await again.chunk_documents(
            [_doc("u", text, source="u.txt")], vector_store=store, skip_unchanged=True
        )
    assert again.report.unchanged == ["u.txt"]
    await again.chunk_documents(
        [_doc("u", "Pay day is the 26th.", source="u.txt")], vector_store=store, skip_unchanged=True
    )
    assert again.report.unchanged == [] and again.report.documents == 2
    # A caller may start a fresh report between calls.
    changed = [_doc("u", "Pay day is the 27th.", source="u.txt")]
    await again.chunk_documents(changed, vector_store=store, skip_unchanged=True)
    await again.chunk_documents(changed, vector_store=store, skip_unchanged=True)
    again.report = IngestReport()
    changed = [_doc("u", "Pay day is the 28th.", source="u.txt")]
    await again.chunk_documents(changed, vector_store=store, skip_unchanged=True)
    assert again.report.documents == 1 and again.report.unchanged == []
