"""An unknown collection is reported before the embedding model loads."""

from __future__ import annotations

import pytest

from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import StoreError
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import unique_table


async def test_unknown_collection_fails_before_the_model_loads(pg_dsn: str) -> None:
    emb = SentenceTransformerEmbeddings()  # a fresh instance: nothing loaded yet
    store = PgVectorStore(dsn=pg_dsn, table=unique_table("nope"), embedding=emb, create=False)
    with pytest.raises(StoreError, match="does not exist"):
        await store.similarity_search("anything", limit=3)
    assert emb._model is None
    await store.close()
