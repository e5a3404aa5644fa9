"""The bulk writer: binary COPY + one upsert per batch, atomic replaces, the deferred HNSW
index, numpy vectors; on the real database and model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert as pg_insert

from parrot_parents.errors import ConfigurationError, StoreError
from parrot_parents.loaders import TextLoader
from parrot_parents.loaders.hierarchy import LateChunkingProcessor
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.documents import DocumentRecord
from parrot_parents.stores.postgres.writes.writer import build_memory_kb, maintenance_work_mem_kb
from parrot_parents.stores.records.rows import prepare_rows
from parrot_parents.stores.records.values import check_vector
from parrot_parents.sync import run_sync
from tests.conftest import unique_table
from tests.stores.test_hybrid import _recount, _stats

TEXTS = {
    "pumps": "The pump must be primed with clean water before it is started. "
    "Check the seals every month. The warranty covers the seals for two years.",
    "leave": "Employees have twenty-five days of paid leave a year. Unused leave days may "
    "be carried over until the end of March. Sick leave is separate.",
    "cars": "Company cars are assigned to field staff. Mileage for private cars is "
    "reimbursed at thirty cents per kilometre.",
}


def _hierarchy(store: PgVectorStore, document_id: str, body: str, size: int = 60) -> list:
    proc = LateChunkingProcessor(child_chunk_size=size, embedding=store.embedding)
    return proc.build_hierarchy(body, document_id).documents()


def _vectors(docs: list[Document], dim: int, seed: int) -> list[np.ndarray | None]:
    rng = np.random.default_rng(seed)
    out: list[np.ndarray | None] = []
    for d in docs:
        if not d.metadata.get("is_chunk"):
            out.append(None)
            continue
        v = rng.standard_normal(dim).astype(np.float32)
        out.append(v / np.linalg.norm(v))
    return out


async def _dump(store: PgVectorStore) -> dict[str, tuple[Any, ...]]:
    """Every row: text, metadata, lexical form and the vector (as float32)."""
    async with store.engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT id, document, cmetadata, lexical::text AS lex,"
                    f" embedding::text AS vec FROM {store.qualified_name}"
                )
            )
        ).all()
    return {
        r.id: (
            r.document,
            r.cmetadata,
            r.lex,
            None if r.vec is None else np.asarray(json.loads(r.vec), dtype=np.float32),
        )
        for r in rows
    }


async def _index_definition(store: PgVectorStore) -> str | None:
    async with store.engine.connect() as conn:
        return (
            await conn.execute(
                text(
                    "SELECT indexdef FROM pg_indexes WHERE schemaname = :s AND tablename = :t"
                    " AND indexdef LIKE '%USING hnsw%'"
                ),
                {"s": store.schema, "t": store.table},
            )
        ).scalar_one_or_none()


@pytest.fixture
async def other(pg_dsn: str, embeddings) -> Any:
    """A second collection, for side-by-side comparisons."""
    s = PgVectorStore(dsn=pg_dsn, table=unique_table("w"), embedding=embeddings)
    await s.connect()
    try:
        yield s
    finally:
        try:
            await s.drop()
        finally:
            await s.close()


async def test_the_copy_path_writes_what_the_row_by_row_insert_wrote(
    store: PgVectorStore, other: PgVectorStore
) -> None:
    dim = store.dimension
    batch = []
    for i, (doc_id, body) in enumerate(TEXTS.items()):
        docs = _hierarchy(store, doc_id, body)
        batch.append((doc_id, docs, _vectors(docs, dim, i), None))
    await store.replace_documents(batch)
    # The reference: the plain way to write rows, one INSERT ... ON CONFLICT per row,
    # vectors bound as text by pgvector's SQLAlchemy type.
    table = other.sa_table
    stmt = pg_insert(table)
    stmt = stmt.on_conflict_do_update(
        index_elements=[table.c.id],
        set_={c: stmt.excluded[c] for c in ("document", "embedding", "cmetadata")},
    )
    rows = [
        {**r, "embedding": None if r["embedding"] is None else r["embedding"].tolist()}
        for _, docs, vectors, _ in batch
        for r in prepare_rows(docs, vectors, dim)
    ]
    async with other.engine.begin() as conn:
        await conn.execute(stmt, rows)
    ours, reference = await _dump(store), await _dump(other)
    assert ours.keys() == reference.keys() and len(ours) > 6
    for row_id, (document, meta, lex, vector) in reference.items():
        assert ours[row_id][:3] == (document, meta, lex)
        if vector is None:
            assert ours[row_id][3] is None
        else:
            np.testing.assert_allclose(ours[row_id][3], vector, atol=1e-6)
    assert await _stats(store) == await _stats(other)


async def test_a_failing_row_mid_batch_keeps_every_previous_version(store: PgVectorStore) -> None:
    dim = store.dimension
    first = {d: _hierarchy(store, d, b) for d, b in TEXTS.items()}
    await store.replace_documents(
        [(d, docs, _vectors(docs, dim, 0), None) for d, docs in first.items()]
    )
    before = await _dump(store)
    stats = await _stats(store)
    # A constraint only the database checks: the failure happens inside the upsert.
    async with store.engine.begin() as conn:
        await conn.execute(
            text(
                f"ALTER TABLE {store.qualified_name} ADD CONSTRAINT no_boom"
                " CHECK (document NOT LIKE '%BOOM%')"
            )
        )
    second = {
        "pumps": _hierarchy(store, "pumps", "Pumps are now described otherwise. " * 3),
        "leave": _hierarchy(store, "leave", "Leave is granted. BOOM. Leave is over."),
        "cars": _hierarchy(store, "cars", "Cars are gone."),
    }
    record = DocumentRecord("cars", "sha", "v9", "Cars are gone.", None, {})
    with pytest.raises(StoreError):
        await store.replace_documents(
            [
                (d, docs, _vectors(docs, dim, 1), record if d == "cars" else None)
                for d, docs in second.items()
            ]
        )
    assert _same(await _dump(store), before)
    assert await _stats(store) == stats
    assert await store.document_states(["cars"]) == {}


def _same(a: dict[str, tuple[Any, ...]], b: dict[str, tuple[Any, ...]]) -> bool:
    return a.keys() == b.keys() and all(
        a[k][:3] == b[k][:3]
        and (a[k][3] is None if b[k][3] is None else np.array_equal(a[k][3], b[k][3]))
        for k in b
    )


async def test_the_loader_isolates_a_document_the_database_refuses(
    store: PgVectorStore, embeddings
) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(
            text(
                f"ALTER TABLE {store.qualified_name} ADD CONSTRAINT no_boom"
                " CHECK (document NOT LIKE '%BOOM%')"
            )
        )
    loader = TextLoader(child_chunk_size=80, embedding=embeddings)
    docs = [Document(page_content=t, metadata={"document_id": d}) for d, t in TEXTS.items()]
    docs.insert(1, Document(page_content="A BOOM in the text.", metadata={"document_id": "bad"}))
    await loader.chunk_documents(docs, vector_store=store, batch_documents=4)
    assert list(loader.report.failed) == ["bad"]
    assert set(await store.document_sources([*TEXTS, "bad"])) == set(TEXTS)


async def test_concurrent_batches_over_the_same_documents_leave_one_version_each(
    store: PgVectorStore,
) -> None:
    dim = store.dimension
    a = {d: _hierarchy(store, d, "Version A. " * 20, 40) for d in ("x", "y", "z")}
    b = {d: _hierarchy(store, d, "Version B is longer. " * 15, 70) for d in ("z", "y", "x")}
    for _ in range(5):
        # Opposite orders: the sorted advisory locks keep them from deadlocking.
        await asyncio.gather(
            store.replace_documents([(d, v, _vectors(v, dim, 2), None) for d, v in a.items()]),
            store.replace_documents([(d, v, _vectors(v, dim, 3), None) for d, v in b.items()]),
        )
        found = await store.fetch_chunk_ranges([(d, 0, 10_000) for d in ("x", "y", "z")])
        for d in ("x", "y", "z"):
            versions = {r.content[:9] for r in found[d]}
            assert len(versions) == 1, versions
            expected = a[d] if versions == {"Version A"} else b[d]
            rows = await store.document_rows(d)
            assert len(rows) == len(expected)


async def test_a_bulk_load_rebuilds_the_same_index(
    store: PgVectorStore, other: PgVectorStore
) -> None:
    dim = store.dimension
    expected = (await _index_definition(other) or "").replace(other.table, store.table)
    assert "hnsw" in expected and await _index_definition(store) == expected
    async with store.bulk_load() as load:
        assert await _index_definition(store) is None
        for i, (d, body) in enumerate(TEXTS.items()):
            docs = _hierarchy(store, d, body)
            await store.replace_document(d, docs, embeddings=_vectors(docs, dim, i))
    assert await _index_definition(store) == expected
    assert load.build_seconds is not None and load.build_seconds >= 0
    assert load.rows == await store.count(include_parents=False)
    assert await store.vector_index_exists()
    hits = await store.similarity_search("seals of the pump", limit=2)
    assert len(hits) == 2


async def test_a_failed_bulk_load_still_leaves_the_index(store: PgVectorStore) -> None:
    dim = store.dimension
    docs = _hierarchy(store, "pumps", TEXTS["pumps"])
    with pytest.raises(RuntimeError, match="the load broke"):
        async with store.bulk_load():
            await store.replace_document("pumps", docs, embeddings=_vectors(docs, dim, 0))
            raise RuntimeError("the load broke")
    assert await store.vector_index_exists()
    assert "hnsw" in (await _index_definition(store) or "")


async def test_the_loader_bulk_load_reports_the_build(store: PgVectorStore, embeddings) -> None:
    loader = TextLoader(child_chunk_size=80, embedding=embeddings)
    docs = [Document(page_content=t, metadata={"document_id": d}) for d, t in TEXTS.items()]
    await loader.chunk_documents(docs, vector_store=store, bulk_load=True)
    assert loader.report.index_build_seconds is not None
    assert await store.vector_index_exists()
    assert set(await store.document_sources(list(TEXTS))) == set(TEXTS)


def test_maintenance_work_mem_is_sized_and_clamped() -> None:
    assert maintenance_work_mem_kb(10, 384, 16) == 64 * 1024
    assert maintenance_work_mem_kb(10_000_000, 384, 16) == 1024 * 1024
    mid = maintenance_work_mem_kb(100_000, 384, 16)
    assert 100 * 1024 < mid < 400 * 1024  # about 230 MB for 100k 384-d vectors


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(0, 50_000_000),
    server_kb=st.integers(64, 16 * 1024 * 1024),
    shared_kb=st.integers(128, 64 * 1024 * 1024),
)
def test_the_build_memory_fits_the_graph_up_to_shared_buffers_and_never_lowers_the_server(
    rows: int, server_kb: int, shared_kb: int
) -> None:
    memory = build_memory_kb(rows, 384, 16, server_kb=server_kb, shared_buffers_kb=shared_kb)
    needed = maintenance_work_mem_kb(rows, 384, 16, ceiling_kb=2**62)
    ceiling = max(1024 * 1024, shared_kb)
    assert memory >= server_kb  # an administrator's larger value stands
    assert memory <= max(server_kb, ceiling, 64 * 1024)
    assert memory >= min(needed, ceiling)  # the graph fits, up to the ceiling
    more = build_memory_kb(rows + 1000, 384, 16, server_kb=server_kb, shared_buffers_kb=shared_kb)
    assert more >= memory


def test_a_million_children_are_built_in_memory_on_a_server_with_3_gb_of_buffers() -> None:
    needed = maintenance_work_mem_kb(1_000_000, 384, 16, ceiling_kb=2**62)
    assert needed > 1024 * 1024  # more than the old fixed ceiling of 1 GB
    shared = 3013 * 1024
    assert build_memory_kb(1_000_000, 384, 16, server_kb=65536, shared_buffers_kb=shared) == needed


def test_check_vector_keeps_a_float32_array_and_converts_lists() -> None:
    v = np.ones(4, dtype=np.float32)
    out = check_vector(v, 4, "v")
    assert out.dtype == np.float32 and np.shares_memory(out, v)  # no copy, no list
    listed = check_vector([1, 2.5, 0, 0], 4, "v")
    assert listed.dtype == np.float32 and listed.tolist() == [1.0, 2.5, 0.0, 0.0]
    for bad, match in (
        (np.ones((2, 2), dtype=np.float32), "shape"),
        (np.ones(3), "3 values"),
        (np.array([1.0, np.nan, 0, 0]), "NaN"),
        (np.zeros(4), "zero vector"),
        (["a", "b", "c", "d"], "not a number"),
    ):
        with pytest.raises(ConfigurationError, match=match):
            check_vector(bad, 4, "v")


async def test_numpy_vectors_are_accepted_and_stored(store: PgVectorStore) -> None:
    dim = store.dimension
    docs = [
        Document(page_content=f"row {i}", metadata={"document_id": "np", "start_index": i})
        for i in range(3)
    ]
    matrix = np.eye(3, dim, dtype=np.float32)
    await store.add_documents(docs, embeddings=matrix)  # one (n, d) array
    await store.add_documents(docs[:1], embeddings=[np.eye(1, dim, 2, dtype=np.float64)[0]])
    await store.add_documents(docs[1:2], embeddings=[[0.0, 1.0] + [0.0] * (dim - 2)])
    assert len(await _dump(store)) == 3
    by_start = {int(v[1]["start_index"]): v[3] for v in (await _dump(store)).values()}
    np.testing.assert_array_equal(by_start[0], matrix[2])
    np.testing.assert_array_equal(by_start[1], matrix[1])
    np.testing.assert_array_equal(by_start[2], matrix[2])


async def test_sqlalchemy_vector_binds_still_work_on_the_writers_connection(
    pg_dsn: str, embeddings
) -> None:
    # One pooled connection: the writer's binary codec stays on it, and must take the text
    # that SQLAlchemy's Vector type binds (a search right after would fail otherwise).
    store = PgVectorStore(
        dsn=pg_dsn,
        table=unique_table("codec"),
        embedding=embeddings,
        engine_kwargs={"pool_size": 1, "max_overflow": 0},
    )
    try:
        docs = _hierarchy(store, "pumps", TEXTS["pumps"])
        await store.replace_document("pumps", docs)
        assert await store.similarity_search("pump seals", limit=1)
        await store.replace_document("pumps", docs)
        assert await store.similarity_search("pump seals", limit=1)
    finally:
        await store.drop()
        await store.close()


_WORDS = st.sampled_from(["notice", "period", "salary", "leave", "cars", "the", "of", "paid"])
_BATCHES = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.lists(_WORDS, min_size=1, max_size=25).map(" ".join),
        ),
        min_size=1,
        max_size=3,
    ),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=_BATCHES, bulk=st.booleans())
def test_statistics_stay_exact_under_batched_and_bulk_writes(
    pg_dsn: str, embeddings, batches: list[list[tuple[str, str]]], bulk: bool
) -> None:
    async def scenario() -> None:
        store = PgVectorStore(dsn=pg_dsn, table=unique_table("lexw"), embedding=embeddings)
        await store.connect()
        dim = store.dimension
        try:
            load = store.bulk_load() if bulk else None
            if load is not None:
                await load.__aenter__()
            for batch in batches:
                writes = []
                for i, (doc, words) in enumerate(batch):
                    docs = _hierarchy(store, doc, words, 30)
                    writes.append((doc, docs, _vectors(docs, dim, i), None))
                await store.replace_documents(writes)
                assert await _stats(store) == await _recount(store)
                # As sequential replaces: each document holds its last version's rows.
                last = {doc: docs for doc, docs, _, _ in writes}
                for doc, docs in last.items():
                    assert len(await store.document_rows(doc)) == len(docs)
            if load is not None:
                await load.__aexit__(None, None, None)
            assert await _stats(store) == await _recount(store)
        finally:
            await store.drop()
            await store.close()

    run_sync(scenario())


async def test_ingest_bulk_loads_an_empty_collection_only(
    store: PgVectorStore, embeddings, tmp_path
) -> None:
    (tmp_path / "a.md").write_text(TEXTS["pumps"])
    first = await TextLoader(str(tmp_path), embedding=embeddings).ingest(store)
    assert first.index_build_seconds is not None
    (tmp_path / "b.md").write_text(TEXTS["cars"])
    second = await TextLoader(str(tmp_path), embedding=embeddings).ingest(store)
    assert second.index_build_seconds is None and second.documents == 1
    assert await store.vector_index_exists()


async def test_a_row_id_taken_by_another_document_moves_as_an_upsert_would(
    store: PgVectorStore,
) -> None:
    # The direct COPY collides on the primary key; the batch falls back to the upsert
    # through the temporary table, in the same transaction, and ends as sequential writes.
    dim = store.dimension
    shared = Document(
        id="shared-row",
        page_content="Shared leave words.",
        metadata={"document_id": "a", "start_index": 0, "end_index": 19},
    )
    await store.replace_document("a", [shared], embeddings=[np.eye(1, dim, 0)[0]])
    moved = Document(
        id="shared-row",
        page_content="Moved salary words.",
        metadata={"document_id": "b", "start_index": 0, "end_index": 19},
    )
    other = Document(
        id="b-row",
        page_content="Other notice words.",
        metadata={"document_id": "b", "start_index": 20, "end_index": 39},
    )
    await store.replace_documents(
        [("b", [moved, other], [np.eye(1, dim, 1)[0], np.eye(1, dim, 2)[0]], None)]
    )
    rows = await _dump(store)
    assert set(rows) == {"shared-row", "b-row"}
    assert rows["shared-row"][0] == "Moved salary words."
    assert rows["shared-row"][1]["document_id"] == "b"
    np.testing.assert_array_equal(rows["shared-row"][3], np.eye(1, dim, 1)[0])
    assert await _stats(store) == await _recount(store)


async def test_an_integer_no_filter_can_compare_is_refused_before_anything_is_written(
    store: PgVectorStore,
) -> None:
    dim = store.dimension
    vector = [[1.0] + [0.0] * (dim - 1)]
    for meta, key in (({"id": 2**64}, "metadata['id']"), ({"ids": [1, -(2**63) - 1]}, "[1]")):
        doc = Document(page_content="wide", metadata={"document_id": "wide", **meta})
        with pytest.raises(ConfigurationError, match="64 bits") as raised:
            await store.add_documents([doc], embeddings=vector)
        assert key in raised.value.message
    assert await _dump(store) == {}
    # The widest integers kept are filtered on as numbers.
    edge = {"document_id": "edge", "id": 2**63 - 1, "low": -(2**63)}
    await store.add_documents([Document(page_content="edge", metadata=edge)], embeddings=vector)
    found = await store.similarity_search(
        "edge", limit=5, filter={"id": 2**63 - 1, "low": {"$lte": -(2**63)}}, search_mode="lexical"
    )
    assert [d.metadata["document_id"] for d in found] == ["edge"]
