"""The row layout of a collection (:mod:`parrot_parents.stores.postgres.collections.layout`): what
a search
reads from a child row stays in the row, and no row is refused for its size."""

from __future__ import annotations

from typing import Any

import numpy as np
from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.layout import INLINE_COLUMNS
from tests.conftest import fresh_store, unique_table


async def _storage(store: PgVectorStore) -> dict[str, str]:
    async with store.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT attname, attstorage::text FROM pg_attribute WHERE attrelid ="
                " to_regclass(:t) AND attnum > 0 AND NOT attisdropped"
            ),
            {"t": store.qualified_name},
        )
        return {str(r[0]): str(r[1]) for r in rows}


async def _out_of_line(store: PgVectorStore, column: str) -> int | None:
    """Children whose ``column`` sits in the TOAST table; None before PostgreSQL 17."""
    async with store.engine.connect() as conn:
        version = (await conn.execute(text("SHOW server_version_num"))).scalar_one()
        if int(version) < 170000:
            return None
        out = await conn.execute(
            text(
                f"SELECT count(pg_column_toast_chunk_id({column})) FROM {store.qualified_name}"
                " WHERE embedding IS NOT NULL"
            )
        )
        return int(out.scalar_one())


async def test_a_child_row_keeps_its_vector_metadata_and_tsvector_in_line(
    store: PgVectorStore,
) -> None:
    # Long enough that the row passes PostgreSQL's 2 kB TOAST threshold with its vector.
    words = " ".join(f"word{i} token{i * 7}" for i in range(150))
    docs = [
        Document(page_content=f"{words} child {i}", metadata={"tenant": f"t{i}"}) for i in range(3)
    ]
    await store.add_documents(docs)
    storage = await _storage(store)
    assert {c: storage[c] for c in INLINE_COLUMNS} == dict.fromkeys(INLINE_COLUMNS, "m")
    assert storage["document"] == "x"
    for column in INLINE_COLUMNS:
        assert await _out_of_line(store, column) in (0, None)
    hits = await store.similarity_search(docs[1].page_content, limit=1, filter={"tenant": "t1"})
    assert [h.page_content for h in hits] == [docs[1].page_content]


async def test_a_vector_too_large_to_stay_in_line_is_still_stored(
    pg_dsn: str, embeddings: Any
) -> None:
    # 2,000 dimensions (pgvector's HNSW limit) is 8 kB: no room in an 8 kB page beside the
    # rest of the row. Storage MAIN moves it out as a last resort; PLAIN would refuse it.
    store = PgVectorStore(dsn=pg_dsn, table=unique_table(), embedding=embeddings, dimension=2000)
    await store.connect()
    try:
        vector = np.random.default_rng(0).normal(size=2000).astype(np.float32)
        vector /= np.linalg.norm(vector)
        doc = Document(page_content="a wide vector " * 20, metadata={"tenant": "w"})
        await store.add_documents([doc], embeddings=[vector])
        hits = await store.similarity_search_by_vector(list(vector), limit=1)
        assert [h.page_content for h in hits] == [doc.page_content]
    finally:
        await store.drop()
        await store.close()


async def test_an_existing_collection_is_not_altered_when_a_store_opens_it(
    pg_dsn: str, embeddings: Any
) -> None:
    async with fresh_store(pg_dsn, embeddings) as store:
        async with store.engine.begin() as conn:
            sql = f"ALTER TABLE {store.qualified_name} ALTER COLUMN embedding SET STORAGE EXTERNAL"
            await conn.execute(text(sql))
        again = PgVectorStore(dsn=pg_dsn, table=store.table, embedding=embeddings)
        async with again:
            await again.add_documents([Document(page_content="opened again")])
        assert (await _storage(store))["embedding"] == "e"
