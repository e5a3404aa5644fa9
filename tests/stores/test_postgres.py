from __future__ import annotations

import random

import pytest
from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.errors import ConfigurationError, SchemaMismatchError
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.connections.dsn import to_async_dsn
from parrot_parents.stores.search_options import HNSWQueryOptions
from tests.conftest import unique_table


def _doc(text_: str, **meta: object) -> Document:
    return Document(page_content=text_, metadata=dict(meta))


async def test_parents_are_stored_without_embedding_and_excluded(store: PgVectorStore) -> None:
    await store.add_documents(
        [
            _doc(
                "Payroll runs twice a month.",
                document_id="h",
                is_full_document=True,
                start_index=0,
                end_index=27,
            ),
            _doc(
                "Payroll runs twice a month.",
                document_id="h",
                parent_document_id="h#doc:0-27",
                start_index=0,
                end_index=27,
            ),
        ]
    )
    async with store.engine.connect() as conn:
        rows = (
            await conn.execute(
                text(f"SELECT id, embedding IS NULL AS no_vec FROM {store.qualified_name}")
            )
        ).all()
    assert {r.id: r.no_vec for r in rows} == {"h#doc:0-27": True, "h#c:0-27": False}
    results = await store.similarity_search("when is payroll", limit=10)
    assert [r.id for r in results] == ["h#c:0-27"]
    assert results[0].metadata["is_chunk"] is True
    assert -1.0 <= results[0].score <= 1.0
    assert results[0].score == pytest.approx(1.0 - results[0].distance)


async def test_legacy_rows_without_markers_are_returned_and_parents_excluded(
    store: PgVectorStore, embeddings
) -> None:
    # Legacy rows written by older tooling: embedded parents, children without markers.
    vec = embeddings.embed_query("vacation days accrue monthly")
    rows = [
        ("legacy-child", "Vacation days accrue monthly.", {"document_id": "old"}),
        ("legacy-parent", "Whole handbook text.", {"document_id": "old", "is_full_document": True}),
        (
            "legacy-pchunk",
            "A parent chunk.",
            {"document_id": "old", "document_type": "parent_chunk"},
        ),
    ]
    import json

    async with store.engine.begin() as conn:
        for rid, body, meta in rows:
            await conn.execute(
                text(
                    f"INSERT INTO {store.qualified_name} (id, document, cmetadata, embedding)"
                    " VALUES (:id, :doc, CAST(:meta AS jsonb), CAST(:vec AS vector))"
                ),
                {"id": rid, "doc": body, "meta": json.dumps(meta), "vec": str(vec)},
            )
    default = await store.similarity_search("vacation accrual", limit=10)
    assert [r.id for r in default] == ["legacy-child"]
    escape = await store.similarity_search("vacation accrual", limit=10, include_parents=True)
    assert {r.id for r in escape} == {"legacy-child", "legacy-parent", "legacy-pchunk"}


async def test_exactly_limit_under_selective_filter_on_5k_children(pg_dsn: str) -> None:
    dim = 16
    store = PgVectorStore(dsn=pg_dsn, table=unique_table("scale"), dimension=dim, embedding=None)
    rng = random.Random(7)
    docs, vectors = [], []
    for i in range(5_000):
        tenant = "rare" if i % 100 == 0 else "common"  # 1 % of the rows: 50
        docs.append(
            _doc(
                f"row {i}", document_id=f"d{i // 50}", tenant=tenant, start_index=i, end_index=i + 1
            )
        )
        vectors.append([rng.gauss(0, 1) for _ in range(dim)])
    await store.connect()
    try:
        await store.add_documents(docs, embeddings=vectors)
        query = [rng.gauss(0, 1) for _ in range(dim)]
        got = await store.similarity_search_by_vector(query, limit=20, filter={"tenant": "rare"})
        assert len(got) == 20
        assert all(r.metadata["tenant"] == "rare" for r in got)
        assert [r.distance for r in got] == sorted(r.distance for r in got)
        plan = got[0].filter_plan
        assert plan is not None and plan.search == "exact"
        # Sent to the index instead (threshold 0), the scan decides the outcome: with
        # iterative scans, 20 rows from the index; without them, ef_search=40 candidates
        # hold ~1 % "rare" rows, and the exact ranking after the short scan gives the 20.
        # The planner's choice between the HNSW index and an exact scan depends on table
        # statistics; forbid the alternatives so the index plan always walks the index.
        index_only = {
            "connect_args": {
                "server_settings": {
                    "enable_seqscan": "off",
                    "enable_bitmapscan": "off",
                    "enable_indexscan": "on",
                }
            }
        }
        outcomes = {}
        for scan in ("strict_order", "off"):
            other = PgVectorStore(
                dsn=pg_dsn,
                table=store.table,
                dimension=dim,
                search_options=HNSWQueryOptions(
                    ef_search=40, iterative_scan=scan, filter_exact_below=0
                ),
                engine_kwargs=index_only,
            )
            try:
                found = await other.similarity_search_by_vector(
                    query, limit=20, filter={"tenant": "rare"}, include_parents=True
                )
            finally:
                await other.close()
            assert found[0].filter_plan is not None
            outcomes[scan] = (len(found), found[0].filter_plan.search)
        assert outcomes == {"strict_order": (20, "index"), "off": (20, "index, then exact")}
    finally:
        await store.drop()
        await store.close()


async def test_reingesting_the_same_rows_leaves_one_copy(store: PgVectorStore) -> None:
    docs = [
        _doc("Alpha paragraph.", document_id="a", start_index=0, end_index=16),
        _doc("Beta paragraph.", document_id="a", start_index=17, end_index=32),
    ]
    first = await store.add_documents(docs)
    second = await store.add_documents(docs)
    assert first == second
    assert await store.count() == 2


async def test_identical_paragraphs_keep_distinct_ids(store: PgVectorStore) -> None:
    same = "Refunds are issued within 30 days."
    ids = await store.add_documents(
        [
            _doc(same, document_id="a", start_index=0, end_index=len(same)),
            _doc(same, document_id="a", start_index=100, end_index=100 + len(same)),
            _doc(same, document_id="b", start_index=0, end_index=len(same)),
        ]
    )
    assert len(set(ids)) == 3
    assert await store.count() == 3


async def test_delete_removes_parents_and_children(store: PgVectorStore) -> None:
    await store.add_documents(
        [
            _doc("Doc A", document_id="a", is_full_document=True, start_index=0, end_index=5),
            _doc(
                "Doc A", document_id="a", parent_document_id="a#doc:0-5", start_index=0, end_index=5
            ),
            _doc("Doc B", document_id="b", start_index=0, end_index=5),
        ]
    )
    assert await store.delete("a") == 2
    remaining = await store.similarity_search("doc", limit=10, include_parents=True)
    assert [r.metadata["document_id"] for r in remaining] == ["b"]


async def test_replace_document_is_atomic_and_drops_stale_rows(store: PgVectorStore) -> None:
    await store.add_documents([_doc("old text", document_id="a", start_index=0, end_index=8)])
    await store.replace_document(
        "a", [_doc("new text", document_id="a", start_index=0, end_index=8)], embeddings=None
    )
    rows = await store.similarity_search("text", limit=5)
    assert [r.content for r in rows] == ["new text"]
    with pytest.raises(ConfigurationError, match="belongs to 'b'"):
        await store.replace_document("a", [_doc("x", document_id="b")])
    assert [r.content for r in await store.similarity_search("text", limit=5)] == ["new text"]


async def test_metadata_filter(store: PgVectorStore) -> None:
    await store.add_documents(
        [
            _doc(f"Policy {i}", document_id=f"d{i}", team="blue" if i % 2 else "red")
            for i in range(6)
        ]
    )
    got = await store.similarity_search("policy", limit=10, filter={"team": "blue"})
    assert len(got) == 3
    assert {r.metadata["team"] for r in got} == {"blue"}


@pytest.mark.parametrize("bad", [0, -1, 10_001, True, "5"])
async def test_bad_limit_is_a_clear_error(store: PgVectorStore, bad: object) -> None:
    with pytest.raises(ConfigurationError, match="limit must be an int"):
        await store.similarity_search("x", limit=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["drop table x", "1abc", "a-b", "", "x" * 64, 'a"b'])
def test_bad_identifiers_are_rejected_at_construction(name: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid collection name"):
        PgVectorStore(dsn="postgresql://x/y", table=name)
    with pytest.raises(ConfigurationError, match="invalid schema name"):
        PgVectorStore(dsn="postgresql://x/y", table="ok", schema=name)


async def test_dimension_mismatch_is_reported(store: PgVectorStore, pg_dsn: str) -> None:
    other = PgVectorStore(dsn=pg_dsn, table=store.table, dimension=8)
    with pytest.raises(SchemaMismatchError, match=r"vector\(384\)") as info:
        await other.connect()
    assert info.value.expected_dimension == 8
    assert info.value.actual_dimension == 384


async def test_wrong_vector_length_is_rejected(store: PgVectorStore) -> None:
    with pytest.raises(ConfigurationError, match="has 3 values, expected 384"):
        await store.add_documents([_doc("x", document_id="a")], embeddings=[[0.1, 0.2, 0.3]])


def test_to_async_dsn() -> None:
    assert to_async_dsn("postgresql://u:p@h:5/db").startswith("postgresql+asyncpg://u:p@h:5/db")
    with pytest.raises(ConfigurationError, match="expected a postgresql"):
        to_async_dsn("mysql://u@h/db")


async def test_close_is_safe_twice(pg_dsn: str, embeddings) -> None:
    s = PgVectorStore(dsn=pg_dsn, table=unique_table(), embedding=embeddings)
    async with s:
        assert await s.count() == 0
        await s.drop()
    await s.close()


async def test_lookup_indexes_exist_and_serve_the_store_queries(store: PgVectorStore) -> None:
    async with store.engine.connect() as conn:
        names = set(
            (
                await conn.execute(
                    text("SELECT indexname FROM pg_indexes WHERE tablename = :t"),
                    {"t": store.table},
                )
            ).scalars()
        )
    base = store.table
    assert {
        f"{base}_pkey",
        f"{base}_embedding_hnsw",
        f"{base}_parent_id_idx",
        f"{base}_document_id_idx",
        f"{base}_cmetadata_gin",
    } <= names
    # The statement fetch_children sends can use the parent index (its key is a literal).
    from sqlalchemy import select
    from sqlalchemy.dialects import postgresql

    from parrot_parents.stores.postgres.collections.schema import meta_field

    table = store.sa_table
    stmt = select(table.c.id).where(meta_field(table, "parent_document_id").in_(["p1", "p2"]))
    sql = str(stmt.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    async with store.engine.begin() as conn:
        await conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(r[0] for r in (await conn.execute(text("EXPLAIN " + sql))).all())
    assert f"{base}_parent_id_idx" in plan


async def test_concurrent_searches_on_one_store(store: PgVectorStore) -> None:
    import asyncio

    await store.add_documents([_doc(f"Fact {i}.", document_id=f"d{i}") for i in range(5)])
    results = await asyncio.gather(*(store.similarity_search("fact", limit=3) for _ in range(8)))
    assert all(len(r) == 3 for r in results)
