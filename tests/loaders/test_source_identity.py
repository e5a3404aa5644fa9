"""Without a document_id, a document's source names it; a content hash only without both."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

from parrot_parents.cli.main import main
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.sync import run_sync
from tests.conftest import unique_table

OLD = "Refunds are paid within 30 days of the request. The old policy applies."
NEW = "Refunds are paid within 5 days of the request. The new policy applies."


async def _texts(store: PgVectorStore) -> list[str]:
    hits = await store.similarity_search("When are refunds paid?", limit=20)
    return [h.content for h in hits]


async def test_an_edited_source_replaces_its_earlier_version(
    store: PgVectorStore, embeddings: SentenceTransformerEmbeddings
) -> None:
    for text in (OLD, NEW):
        loader = TextLoader(embedding=embeddings)
        await loader._chunk_with_late_chunking(
            [Document(text, metadata={"source": "policy.md"})], vector_store=store
        )
        assert not loader.report.warnings, loader.report.warnings
    texts = await _texts(store)
    assert texts and all("5 days" in t for t in texts), texts  # the stale text is gone
    assert await store.document_states(["policy.md"])  # named by its source
    assert (await store.document_sources(["policy.md"])) == {"policy.md": {"policy.md"}}


async def test_a_text_named_by_nothing_is_hashed_and_the_report_says_so(
    store: PgVectorStore, embeddings: SentenceTransformerEmbeddings
) -> None:
    loader = TextLoader(embedding=embeddings)
    rows = await loader.chunk_documents([Document(OLD)], vector_store=store)
    assert rows[0].metadata["document_id"].startswith("sha256-")
    (warning,) = loader.report.warnings["documents[0]"]
    assert "an edited text will be stored as a new document" in warning


async def test_store_rows_are_named_by_their_source_too(store: PgVectorStore) -> None:
    await store.add_documents([Document(OLD, metadata={"source": "notes.txt"})])
    hits = await store.similarity_search("refunds", limit=5)
    assert [h.metadata["document_id"] for h in hits] == ["notes.txt"]
    assert await store.delete("notes.txt") == 1


def test_the_cli_and_python_name_a_file_alike(
    tmp_path: Path,
    pg_dsn: str,
    embeddings: SentenceTransformerEmbeddings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ingest policy.md`` stores the file as ``policy.md``; a Python Document with that
    source is the same document, so it replaces the file's rows."""
    (tmp_path / "policy.md").write_text(OLD, encoding="utf-8")
    table = unique_table("srcid")
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", "policy.md", "--collection", table, "--dsn", pg_dsn]) == 0

    async def python_path() -> list[str]:
        store = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)
        try:
            await TextLoader(embedding=embeddings).chunk_documents(
                [Document(NEW, metadata={"source": "policy.md"})], vector_store=store
            )
            return await _texts(store)
        finally:
            await store.drop()
            await store.close()

    texts = run_sync(python_path())
    assert texts and all("5 days" in t for t in texts), texts


@pytest.mark.parametrize(
    ("metadata", "given", "expected"),
    [
        ({"document_id": "a", "source": "b"}, "c", "a"),
        ({"source": "b"}, "c", "c"),
        ({"source": "b"}, None, "b"),
        ({"document_id": "", "source": "b"}, None, "b"),
    ],
)
def test_identity_order(metadata: dict[str, str], given: str | None, expected: str) -> None:
    from parrot_parents.stores.records.ids import document_identity

    assert document_identity(metadata, given, "text") == expected
