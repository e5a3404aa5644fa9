"""The collection records its embedding model; another model is refused on every path."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from sqlalchemy import text

from parrot_parents.cli.main import main
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import ModelMismatchError, SchemaMismatchError
from parrot_parents.loaders.reembed import reembed
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.model_contract import ModelFingerprint, ModelRecord
from parrot_parents.sync import run_sync
from tests.conftest import unique_table
from tests.stores.tiny_embedder import build_tiny_embedder

DOCS = [
    Document("The Falcon M costs 1,200 euros and weighs 3 kg.", metadata={"source": "falcon.md"}),
    Document(
        "The Heron S costs 800 euros and flies for 40 minutes.", metadata={"source": "heron.md"}
    ),
    Document("Support answers within two working days.", metadata={"source": "support.md"}),
]


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_embedder(tmp_path_factory.mktemp("tiny-embedder"))


@pytest.fixture(scope="module")
def tiny(tiny_path: Path) -> SentenceTransformerEmbeddings:
    emb = SentenceTransformerEmbeddings(str(tiny_path))
    assert emb.dimension == 384  # the case only the record can catch
    return emb


async def _ingest(store: PgVectorStore, embedding: SentenceTransformerEmbeddings) -> None:
    loader = TextLoader(embedding=embedding, late_chunking=False)
    await loader.chunk_documents(DOCS, vector_store=store)
    assert not loader.report.failed, loader.report.failed


async def test_a_same_dimension_model_is_refused_when_asking(
    pg_dsn: str, embeddings: SentenceTransformerEmbeddings, tiny: SentenceTransformerEmbeddings
) -> None:
    table = unique_table("model")
    other = PgVectorStore(dsn=pg_dsn, table=table, embedding=tiny)
    default = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)
    try:
        await _ingest(other, tiny)
        with pytest.raises(ModelMismatchError) as info:
            await default.similarity_search("What is the price of the Falcon M?")
        message = str(info.value)
        assert str(tiny.model_name) in message and embeddings.model_name in message
        assert "reindex --model" in message
        # Every embedding path: hybrid search, a store write, a loader write.
        with pytest.raises(ModelMismatchError):
            await default.similarity_search("price", search_mode="hybrid")
        with pytest.raises(ModelMismatchError):
            await default.add_documents([Document("x", metadata={"source": "x.md"})])
        loader = TextLoader(embedding=embeddings)
        with pytest.raises(ModelMismatchError):
            await loader.chunk_documents([DOCS[0]], vector_store=other)
        # A lexical search embeds nothing: it still runs.
        assert await default.similarity_search("Falcon", search_mode="lexical")
        # The collection's own model still works.
        assert await other.similarity_search("Falcon", limit=1)
    finally:
        await other.drop()
        await other.close()
        await default.close()


async def test_another_name_for_the_same_weights_is_the_same_model(
    store: PgVectorStore,
) -> None:
    await _ingest(store, store.embedding)
    alias = PgVectorStore(
        dsn=store.connections.dsn,
        table=store.table,
        embedding=SentenceTransformerEmbeddings("all-MiniLM-L6-v2"),
    )
    try:
        assert await alias.similarity_search("Falcon price", limit=1)
    finally:
        await alias.close()


async def test_a_collection_without_a_record_is_searched_and_records_at_its_next_write(
    store: PgVectorStore, tiny: SentenceTransformerEmbeddings
) -> None:
    await _ingest(store, store.embedding)
    async with store.engine.begin() as conn:  # as a collection made before the record
        await conn.execute(text(f'COMMENT ON COLUMN "public"."{store.table}".embedding IS NULL'))
    await store.close()
    assert await store.similarity_search("Falcon price", limit=1)
    await store.add_documents([Document("Spare rotors cost 20 euros.", metadata={"source": "r"})])
    stranger = PgVectorStore(dsn=store.connections.dsn, table=store.table, embedding=tiny)
    try:
        with pytest.raises(ModelMismatchError):
            await stranger.similarity_search("rotor")
    finally:
        await stranger.close()


async def test_the_record_survives_any_model_name(store: PgVectorStore) -> None:
    weird = "it's a \\path\\ $$ with\nnewline é"
    record = ModelRecord(ModelFingerprint.of_vector(weird, [0.5, -0.25, 1.0]))
    engine, _ = await store.ready()
    async with engine.begin() as conn:
        await store.model_contract.write(conn, record)
    async with engine.connect() as conn:
        assert await store.model_contract.read(conn) == record


async def test_reindex_model_rewrites_every_vector_in_a_resumable_pass(
    store: PgVectorStore, tiny: SentenceTransformerEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store reads the record again after RECHECK_S seconds; here at once.
    monkeypatch.setattr("parrot_parents.stores.postgres.collections.model_contract.RECHECK_S", 0.0)
    await _ingest(store, store.embedding)
    target = PgVectorStore(dsn=store.connections.dsn, table=store.table, embedding=tiny)
    try:
        loader = TextLoader(embedding=tiny, late_chunking=False)
        first = await reembed(loader, target, batch_size=1, max_batches=1)  # "killed"
        assert not first.finished and first.reembedded == 1
        # Two models' vectors: refused for both, naming both, until the pass finishes.
        for who in (store, target):
            with pytest.raises(ModelMismatchError, match="being re-embedded") as info:
                await who.similarity_search("Falcon price")
            assert tiny.model_name in str(info.value)
        assert await store.similarity_search("Falcon", search_mode="lexical")
        resumed = TextLoader(embedding=tiny, late_chunking=False)
        fresh = PgVectorStore(dsn=store.connections.dsn, table=store.table, embedding=tiny)
        try:
            second = await reembed(resumed, fresh, batch_size=1)
            assert second.finished and second.reembedded == 2  # resumed after the first
            assert await fresh.similarity_search("Falcon", limit=1)
        finally:
            await fresh.close()
        with pytest.raises(ModelMismatchError, match="was embedded with"):
            await store.similarity_search("Falcon price")  # the open store notices
    finally:
        await target.close()


def test_cli_reindex_model(
    tmp_path: Path, pg_dsn: str, tiny_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "falcon.md").write_text(DOCS[0].page_content, encoding="utf-8")
    table = unique_table("model")
    common = ["--collection", table, "--dsn", pg_dsn]
    assert main(["ingest", str(tmp_path), *common]) == 0
    reindex = ["reindex", "--model", str(tiny_path), "--no-late-chunking", *common]
    assert main(reindex) == 0
    assert "finished" in capsys.readouterr().out
    code = main(["ask", "Falcon price", "--search-mode", "dense", "--json", *common])
    assert code != 0
    assert "was embedded with" in capsys.readouterr().err
    assert main(["ask", "Falcon price", "--json", "--model", str(tiny_path), *common]) == 0

    async def drop() -> None:
        store = PgVectorStore(
            dsn=pg_dsn, table=table, embedding=SentenceTransformerEmbeddings(str(tiny_path))
        )
        await store.drop()
        await store.close()

    run_sync(drop())


@pytest.mark.parametrize("create", [True, False])
async def test_a_collection_is_opened_and_searched_lexically_without_loading_a_model(
    store: PgVectorStore, create: bool
) -> None:
    await _ingest(store, store.embedding)
    fresh = SentenceTransformerEmbeddings()
    reader = PgVectorStore(
        dsn=store.connections.dsn, table=store.table, embedding=fresh, create=create
    )
    try:
        got = await reader.similarity_search("Falcon price", search_mode="lexical", limit=2)
        assert got and "Falcon" in got[0].content
        assert reader.dimension == 384 and fresh.load_ms is None  # the table's
        # A search that embeds loads the model, compared with the column first.
        assert await reader.similarity_search("Falcon price", limit=1)
        assert fresh.load_ms is not None
    finally:
        await reader.close()


async def test_a_model_of_another_dimension_is_refused_before_it_embeds_or_is_recorded(
    store: PgVectorStore, tmp_path: Path
) -> None:
    await _ingest(store, store.embedding)
    async with store.engine.begin() as conn:  # no record: only the column can refuse it
        await conn.execute(text(f'COMMENT ON COLUMN "public"."{store.table}".embedding IS NULL'))
    small = SentenceTransformerEmbeddings(str(build_tiny_embedder(tmp_path, dimension=16)))
    other = PgVectorStore(dsn=store.connections.dsn, table=store.table, embedding=small)
    rows = f'SELECT count(*) FROM "public"."{store.table}"'
    try:
        async with store.engine.connect() as conn:
            before = (await conn.execute(text(rows))).scalar_one()
        assert await other.similarity_search("Falcon", search_mode="lexical")
        with pytest.raises(SchemaMismatchError, match=r"vector\(384\).*vector\(16\)") as info:
            await other.similarity_search("Falcon")
        assert info.value.expected_dimension == 16 and info.value.actual_dimension == 384
        with pytest.raises(SchemaMismatchError, match=r"vector\(16\)"):
            await other.add_documents([Document("Rotors cost 20 euros.", metadata={"source": "r"})])
        async with store.engine.connect() as conn:
            assert await store.model_contract.read(conn) is None  # nothing recorded
            assert (await conn.execute(text(rows))).scalar_one() == before
    finally:
        await other.close()


async def test_a_dropped_collection_is_made_again_with_the_models_dimension(
    store: PgVectorStore, tmp_path: Path
) -> None:
    await _ingest(store, store.embedding)
    small = SentenceTransformerEmbeddings(str(build_tiny_embedder(tmp_path, dimension=16)))
    reopened = PgVectorStore(dsn=store.connections.dsn, table=store.table, embedding=small)
    try:
        await reopened.connect()
        assert reopened.dimension == 384  # the table's, until it is dropped
        await reopened.drop()
        await reopened.add_documents([Document("Rotors cost 20 euros.", metadata={"source": "r"})])
        assert reopened.dimension == 16
        assert await reopened.similarity_search("rotors", limit=1)
    finally:
        await reopened.drop()
        await reopened.close()


async def test_a_model_that_does_not_fit_a_new_collection_is_refused_before_it_embeds(
    pg_dsn: str, embeddings: SentenceTransformerEmbeddings, tmp_path: Path
) -> None:
    # The store's model (16 values) would make the column; the loader's gives 384.
    small = SentenceTransformerEmbeddings(str(build_tiny_embedder(tmp_path, dimension=16)))
    table = unique_table("newdim")
    store = PgVectorStore(dsn=pg_dsn, table=table, embedding=small)
    try:
        with pytest.raises(SchemaMismatchError, match=r"would store .*vector\(16\).*vector\(384\)"):
            await store.check_model(embeddings, writing=True)
        raw = await asyncpg.connect(pg_dsn)
        try:  # no column was made for it
            assert await raw.fetchval("SELECT to_regclass($1)", f"public.{table}") is None
        finally:
            await raw.close()
        loader = TextLoader(embedding=embeddings, late_chunking=False)
        with pytest.raises(SchemaMismatchError, match=r"vector\(16\).*vector\(384\)"):
            await loader.chunk_documents(DOCS, vector_store=store)
        async with store.engine.connect() as conn:  # and nothing was written
            rows = await conn.execute(text(f'SELECT count(*) FROM "public"."{table}"'))
            assert rows.scalar_one() == 0
    finally:
        await store.drop()
        await store.close()


class _LangChainWrapped(Embeddings):
    """The default model behind LangChain's ``Embeddings`` interface: no ``dimension``."""

    def __init__(self, inner: SentenceTransformerEmbeddings) -> None:
        self.inner = inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


@pytest.mark.parametrize("dimension", [None, 384])
async def test_an_embeddings_object_without_a_dimension_searches_an_existing_collection(
    store: PgVectorStore, dimension: int | None
) -> None:
    await _ingest(store, store.embedding)
    wrapped = _LangChainWrapped(store.embedding)
    reader = PgVectorStore(
        dsn=store.connections.dsn,
        table=store.table,
        embedding=wrapped,
        dimension=dimension,  # type: ignore[arg-type]
    )
    try:
        got = await reader.similarity_search("What is the price of the Falcon M?", limit=1)
        assert got and "Falcon" in got[0].content
    finally:
        await reader.close()


async def test_an_empty_collection_without_a_record_is_searched_without_a_warning(
    store: PgVectorStore, caplog: pytest.LogCaptureFixture
) -> None:
    # What a first ingest whose every document was refused leaves: a collection that
    # holds nothing, so no vector of another model can be there.
    loader = TextLoader(embedding=store.embedding)
    await loader.chunk_documents([Document("x", metadata={"source": "a\x00"})], vector_store=store)
    assert loader.report.failed and await store.count() == 0
    with caplog.at_level("WARNING"):
        assert await store.similarity_search("Falcon price", limit=1) == []
    assert "records no embedding model" not in caplog.text
    await _ingest(store, store.embedding)
    async with store.engine.begin() as conn:  # as a collection made before the record
        await conn.execute(text(f'COMMENT ON COLUMN "public"."{store.table}".embedding IS NULL'))
    fresh = PgVectorStore(dsn=store.connections.dsn, table=store.table, embedding=store.embedding)
    try:
        with caplog.at_level("WARNING"):
            assert await fresh.similarity_search("Falcon price", limit=1)
        assert "records no embedding model" in caplog.text
    finally:
        await fresh.close()
