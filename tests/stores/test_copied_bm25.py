"""A collection whose ``bm25`` index was copied with its database (``CREATE DATABASE ...
TEMPLATE``) is refused: pg_textsearch keeps an index's shared state under the index's oid
alone, so the copy would read the original's recent rows as its own (a search failed with
XX001, "could not read blocks ... read only 0 of 8192 bytes", before the store refused it)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from sqlalchemy.engine import make_url

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.connections.engine import make_engine
from parrot_parents.stores.postgres.search.bm25_index import bm25_unavailable
from tests.conftest import unique_table
from tests.migrations.support import create_database, drop_database

VECTOR = [0.1] * 384


def _rows(document_id: str, body: str) -> list[Document]:
    meta = {"document_id": document_id, "is_chunk": True, "start_index": 0, "end_index": len(body)}
    return [Document(id=f"{document_id}#c:0-{len(body)}", page_content=body, metadata=meta)]


async def _write(store: PgVectorStore, first: int, count: int) -> None:
    for k in range(first, first + count):
        body = f"paid leave request number {k} " + "days of leave " * 20
        await store.replace_document(f"d{k}", _rows(f"d{k}", body), embeddings=[VECTOR])


async def test_a_bm25_index_copied_with_its_database_is_refused(
    pg_dsn: str, embeddings: Any
) -> None:
    table = unique_table()
    original = create_database(pg_dsn)
    copies: list[str] = []
    try:
        store = PgVectorStore(
            dsn=original, table=table, embedding=embeddings, lexical_backend="pg_textsearch"
        )
        engine = await make_engine(original)
        async with engine.connect() as conn:
            reason = await conn.run_sync(bm25_unavailable)
        await engine.dispose()
        if reason is not None:
            pytest.skip(f"pg_textsearch: {reason}")
        await _write(store, 0, 3)
        await store.close()
        copies.append(create_database(pg_dsn, template=make_url(original).database))
        # The original's new rows sit in the memtable the copy would share.
        store = PgVectorStore(dsn=original, table=table, embedding=embeddings)
        await _write(store, 3, 60)
        copy = PgVectorStore(dsn=copies[0], table=table, embedding=embeddings)
        with pytest.raises(ConfigurationError, match="copied with its database"):
            await copy.ready()
        with pytest.raises(ConfigurationError, match="copied with its database"):
            await copy.add_documents(_rows("x", "paid leave"), embeddings=[VECTOR])
        await copy.close()
        # The original is untouched: it finds its own rows, old and new.
        hits = await store.similarity_search(
            "paid leave request number 61", limit=63, search_mode="lexical"
        )
        assert {h.metadata["document_id"] for h in hits} == {f"d{k}" for k in range(63)}
        await store.close()
    finally:
        for dsn in (*copies, original):
            drop_database(pg_dsn, dsn)
