"""Revision 0006: the documents table of an existing collection, backfilled from its rows."""

from __future__ import annotations

import asyncio

from langchain_core.documents import Document

from parrot_parents import migrations
from parrot_parents.loaders.reindex import reindex_stale
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import REPO_ROOT

HANDBOOK = (REPO_ROOT / "examples" / "corpus" / "employee-handbook.md").read_text("utf-8")
SHORT = (REPO_ROOT / "examples" / "corpus" / "travel-policy.md").read_text("utf-8")


async def test_backfill_rebuilds_sources_then_reindex_recuts_them(
    empty_dsn: str, embeddings
) -> None:  # type: ignore[no-untyped-def]
    store = PgVectorStore(dsn=empty_dsn, table="legacy", embedding=embeddings)
    loader = TextLoader(embedding=embeddings)
    docs = [
        Document(page_content=HANDBOOK, metadata={"document_id": "handbook.md", "source": "h"}),
        Document(page_content=SHORT, metadata={"document_id": "travel.md"}),
    ]
    await loader.chunk_documents(docs, vector_store=store)
    engine, _ = await store.ready()
    async with engine.begin() as conn:  # a collection from before the documents table
        await conn.run_sync(store.documents.drop)
    await store.close()

    await asyncio.to_thread(migrations.upgrade, empty_dsn, collections=["legacy"])

    store = PgVectorStore(dsn=empty_dsn, table="legacy", embedding=embeddings)
    try:
        records = {r.document_id: r for r in await store.stale_documents(["x"], limit=10)}
        assert set(records) == {"handbook.md", "travel.md"}
        assert records["travel.md"].source_text == SHORT  # a whole-document parent
        rebuilt = records["handbook.md"].source_text
        assert HANDBOOK[len(rebuilt) :].strip() == ""
        # Only whitespace the splitter trimmed between parent_chunks may differ.
        assert [
            c for c, o in zip(rebuilt, HANDBOOK, strict=False) if c != o and not o.isspace()
        ] == []
        assert records["handbook.md"].source == "h"
        states = await store.document_states(["handbook.md"])
        assert states["handbook.md"].policy_version is None
        report = await reindex_stale(TextLoader(embedding=embeddings), store)
        assert report.reindexed == 2 and report.finished
        assert (await reindex_stale(TextLoader(embedding=embeddings), store)).reindexed == 0
    finally:
        await store.drop()
        await store.close()
