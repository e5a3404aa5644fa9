"""The lexical column indexes a child's retrieval preamble; an older collection is upgraded
(column re-created, BM25 statistics counted again) when a store opens it."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.stores.postgres import PgVectorStore
from tests.stores.test_hybrid import _recount, _stats

_OLD = (
    "CASE WHEN embedding IS NULL THEN NULL::tsvector "
    "ELSE to_tsvector('english'::regconfig, document) END"
)


def _rows() -> list[Document]:
    return [
        Document(
            id="d#c:0-30",
            page_content="Staff receive it once a year.",
            metadata={
                "document_id": "d",
                "is_chunk": True,
                "start_index": 0,
                "end_index": 30,
                "retrieval_preamble": "Guide > Uniform allowance",
            },
        ),
        Document(
            id="d#c:31-60",
            page_content="Parking is free for staff.",
            metadata={"document_id": "d", "is_chunk": True, "start_index": 31, "end_index": 60},
        ),
    ]


async def test_preamble_words_are_indexed_and_statistics_stay_exact(
    store: PgVectorStore, embeddings: Any
) -> None:
    await store.add_documents(_rows())
    hits = await store.similarity_search("uniform", limit=2, search_mode="lexical")
    assert [h.id for h in hits] == ["d#c:0-30"]
    assert hits[0].content == "Staff receive it once a year."
    assert await _stats(store) == await _recount(store)


async def test_an_older_collection_gets_the_preamble_column_on_open(
    pg_dsn: str, sql_store: PgVectorStore, embeddings: Any
) -> None:
    # Collections from before retrieval preambles rank BM25 in SQL.
    store = sql_store
    engine, _ = await store.ready()
    async with engine.begin() as conn:  # the column as it was before retrieval preambles
        await conn.execute(text(f"ALTER TABLE {store.qualified_name} DROP COLUMN lexical"))
        await conn.execute(
            text(
                f"ALTER TABLE {store.qualified_name} ADD COLUMN lexical tsvector"
                f" GENERATED ALWAYS AS ({_OLD}) STORED"
            )
        )
    await store.add_documents(_rows())
    assert await store.similarity_search("uniform", limit=2, search_mode="lexical") == []
    reopened = PgVectorStore(dsn=pg_dsn, table=store.table, embedding=embeddings)
    try:
        hits = await reopened.similarity_search("uniform", limit=2, search_mode="lexical")
        assert [h.id for h in hits] == ["d#c:0-30"]
        assert await _stats(reopened) == await _recount(reopened)
        assert (await _stats(reopened))[1][0] == 2  # both children counted once
    finally:
        await reopened.close()
