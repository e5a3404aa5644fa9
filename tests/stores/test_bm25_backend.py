"""The collection's lexical backend: pg_textsearch's ``pg_textsearch`` index where the server has
it (the embedded one does), BM25 in SQL (``sql``) everywhere else; recorded by the
collection, reported in ``meta``, moved by ``reindex --lexical``."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.cli.main import main as cli_main
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.connections.engine import make_engine
from parrot_parents.stores.postgres.search.bm25_index import (
    bm25_index_name,
    bm25_unavailable,
    bm25_unsafe,
)
from parrot_parents.stores.search_options import PRF, Fusion, HNSWQueryOptions
from parrot_parents.sync import run_sync
from tests.conftest import fresh_store, unique_table
from tests.stores.test_hybrid import _reference as bm25_reference

TEXTS = {
    "a": "leave leave leave days paid",
    "b": "paid paid holiday for staff and paid leave",
    "c": "days of leave are paid days",
    "d": "nothing here at all really",
    "e": "cars cars cars cars paid",
}
VECTOR = [0.1] * 384


def _rows(texts: dict[str, str]) -> list[Document]:
    return [
        Document(
            id=f"{k}#c:0-{len(t)}",
            page_content=t,
            metadata={"document_id": k, "is_chunk": True, "start_index": 0, "end_index": len(t)},
        )
        for k, t in texts.items()
    ]


async def _write(store: PgVectorStore, texts: dict[str, str]) -> None:
    await store.add_documents(_rows(texts), embeddings=[VECTOR] * len(texts))


async def _reference(store: PgVectorStore, query: str) -> dict[str, float]:
    """BM25 of every child in Python, a row's length counted in tokens (positions), as
    pg_textsearch counts it; k1 and b the collection's."""
    return (await bm25_reference(store, query, length="tokens"))[0]


async def _has_index(store: PgVectorStore) -> bool:
    engine, _ = await store.ready()
    async with engine.connect() as conn:
        found = (
            await conn.execute(
                text("SELECT to_regclass(:n) IS NOT NULL"),
                {"n": f'"{store.schema}"."{bm25_index_name(store.table)}"'},
            )
        ).scalar_one()
    return bool(found)


async def test_auto_takes_pg_textsearch_only_where_it_is_safe(pg_dsn: str, embeddings: Any) -> None:
    def facts(conn: Any) -> tuple[str | None, str | None]:
        return bm25_unavailable(conn), bm25_unsafe(conn)

    s = PgVectorStore(dsn=pg_dsn, table=unique_table(), embedding=embeddings)
    try:
        await _write(s, TEXTS)
        engine, _ = await s.ready()
        async with engine.connect() as conn:
            unavailable, unsafe = await conn.run_sync(facts)
            version = (
                await conn.execute(
                    text("SELECT extversion FROM pg_extension WHERE extname = 'pg_textsearch'")
                )
            ).scalar()
        assert s.lexical_backend == ("sql" if unavailable or unsafe else "pg_textsearch")
        if version == "1.0.0":  # the embedded server's: it can hang concurrent writers
            assert unsafe is not None and "#370" in unsafe and s.lexical_backend == "sql"
    finally:
        await s.drop()


async def test_a_collection_asked_for_pg_textsearch_ranks_bm25_with_its_index(
    textsearch_store: PgVectorStore,
) -> None:
    store = textsearch_store
    await _write(store, TEXTS)
    assert store.lexical_backend == "pg_textsearch" and await _has_index(store)
    got = await store.similarity_search("paid leave days", limit=10, search_mode="lexical")
    want = await _reference(store, "paid leave days")
    # Every matching child, none other, each with its BM25 (a float4 in the index).
    assert {r.id: pytest.approx(r.lexical_score, rel=1e-6) for r in got} == want
    assert [r.lexical_rank for r in got] == list(range(1, len(got) + 1))
    assert [r.lexical_score for r in got] == sorted((r.lexical_score for r in got), reverse=True)
    assert await store.similarity_search("zebra", limit=5, search_mode="lexical") == []
    meta = (await Chatbot(store=store).retrieve("paid leave days")).meta
    assert meta.lexical == {"backend": "pg_textsearch"}
    assert meta.to_dict()["lexical"] == meta.lexical


async def test_deleted_or_replaced_children_leave_the_index(
    textsearch_store: PgVectorStore,
) -> None:
    store = textsearch_store
    # (Parents stay out of it: tests/stores/test_hybrid.py, on the default backend.)
    await _write(store, TEXTS)
    ids = {r.id for r in await store.similarity_search("paid", limit=20, search_mode="lexical")}
    assert len(ids) == 4
    await store.delete("e")
    await store.replace_document(
        "b", _rows({"b": "nothing about money"}), embeddings=[VECTOR]
    )  # a new text for the same document
    got = await store.similarity_search("paid", limit=20, search_mode="lexical")
    # Only live children come back. (Their scores are pg_textsearch's: after deletes its
    # statistics follow its own upkeep, not the exact counts the SQL backend keeps.)
    assert [r.id.split("#")[0] for r in got] == ["c", "a"]
    assert all(r.lexical_score and r.lexical_score > 0 for r in got)


_WORDS = st.sampled_from(["paid", "leave", "days", "staff", "cars", "notice", "period"])


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    batches=st.lists(
        st.dictionaries(
            st.sampled_from("abcdef"),
            st.lists(_WORDS, min_size=1, max_size=8).map(" ".join),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=3,
    ),
    gone=st.sets(st.sampled_from("abcdef"), max_size=2),
)
def test_the_index_agrees_with_bm25_over_every_write(
    pg_dsn: str, embeddings: Any, batches: list[dict[str, str]], gone: set[str]
) -> None:
    async def body() -> None:
        s = PgVectorStore(
            dsn=pg_dsn, table=unique_table(), embedding=embeddings, lexical_backend="pg_textsearch"
        )
        try:
            for batch in batches:
                await _write(s, batch)
            for doc in gone:
                await s.delete(doc)
            assert s.lexical_backend == "pg_textsearch"
            got = await s.similarity_search("paid leave days", limit=50, search_mode="lexical")
            want = await _reference(s, "paid leave days")
            # Exactly the live children that match, best first.
            assert {r.id for r in got} == set(want)
            scores = [r.lexical_score for r in got]
            assert scores == sorted(scores, reverse=True)
            if not gone and len(batches) == 1:  # nothing removed: BM25 to float4 precision
                assert {r.id: pytest.approx(r.lexical_score, rel=1e-5) for r in got} == want
        finally:
            await s.drop()

    run_sync(body())


async def test_a_filter_or_feedback_is_ranked_in_sql_and_meta_says_why(
    textsearch_store: PgVectorStore,
) -> None:
    store = textsearch_store
    await _write(store, TEXTS)
    assert store.lexical_ranking({"document_id": "a"}, None)[0] == "sql"
    assert store.lexical_ranking({"document_id": "a"}, None, exact_filter=False)[0] == (
        "pg_textsearch"
    )
    assert store.lexical_ranking(None, Fusion(prf=PRF()))[0] == "sql"
    assert store.lexical_ranking(None, Fusion()) == ("pg_textsearch", None)
    got = await store.similarity_search(
        "paid leave", limit=5, search_mode="lexical", filter={"document_id": "c"}
    )
    assert [r.id.split("#")[0] for r in got] == ["c"]
    bot = Chatbot(store=store)
    meta = (await bot.retrieve("paid leave", filter={"document_id": "c"})).meta
    assert meta.lexical is not None and meta.lexical["backend"] == "sql"
    assert "filter" in meta.lexical["why"]
    meta = (await bot.retrieve("paid leave", prf=True)).meta
    assert meta.lexical == {
        "backend": "sql",
        "why": "prf reads the SQL statistics",
        "candidates": "exact",
    }
    assert (await bot.retrieve("paid leave", search_mode="dense")).meta.lexical is None


async def test_a_broad_filter_is_ranked_by_the_index_as_it_scans(
    pg_dsn: str, embeddings: Any
) -> None:
    # Every filter counts as broad here (threshold 0): the bm25 index ranks, the filter
    # applied as it scans; what it returns is what the filter keeps.
    options = HNSWQueryOptions(filter_exact_below=0)
    async with fresh_store(
        pg_dsn, embeddings, lexical_backend="pg_textsearch", search_options=options
    ) as store:
        await _write(store, TEXTS)
        want = {"document_id": "c"}
        got = await store.similarity_search(
            "paid leave", limit=5, search_mode="lexical", filter=want
        )
        assert got and {r.id.split("#")[0] for r in got} == {"c"}
        assert got[0].filter_plan is not None and got[0].filter_plan.search == "index"
        bot = Chatbot(store=store)
        meta = (await bot.retrieve("paid leave", filter=want, search_mode="lexical")).meta
        assert meta.lexical == {"backend": "pg_textsearch"}
        assert meta.filter_plan == {
            "estimate": meta.filter_plan["estimate"],
            "search": "index",
            "exact_below": 0,
            "children": meta.filter_plan["children"],
            "sampled": False,
        }
        assert meta.filter_plan["children"] >= meta.filter_plan["estimate"]
        # Hybrid: the filter keeps fewer children than the search asks for, so the
        # exact ranking runs after the index, and the lexical branch with it in SQL.
        meta = (await bot.retrieve("paid leave", filter=want)).meta
        assert meta.filter_plan is not None
        assert meta.filter_plan["search"] == "index, then exact"
        assert meta.lexical is not None and meta.lexical["backend"] == "sql"


def test_the_backend_is_the_collections_own_and_reindex_moves_it(
    pg_dsn: str, embeddings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    table = unique_table()

    def store(**kwargs: Any) -> PgVectorStore:
        return PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, **kwargs)

    async def search(s: PgVectorStore) -> list[tuple[str, float | None]]:
        got = await s.similarity_search("paid leave days", limit=10, search_mode="lexical")
        return [(r.id, r.lexical_score) for r in got]

    async def opened(**kwargs: Any) -> tuple[str | None, bool, list[Any]]:
        s = store(create=False, **kwargs)
        try:
            await s.connect()
            return s.lexical_backend, await _has_index(s), await search(s)
        finally:
            await s.close()

    async def create() -> list[Any]:
        s = store(lexical_backend="sql")
        try:
            await _write(s, TEXTS)
            return await search(s)
        finally:
            await s.close()

    before = run_sync(create())
    try:
        # An existing collection keeps its backend: auto reads it, the other is refused.
        assert run_sync(opened())[:2] == ("sql", False)
        with pytest.raises(ConfigurationError, match="reindex --lexical pg_textsearch"):
            run_sync(opened(lexical_backend="pg_textsearch"))
        argv = ["reindex", "--lexical", "pg_textsearch", "--collection", table, "--dsn", pg_dsn]
        typo = [*argv[:3], "--collection", f"{table}x", "--dsn", pg_dsn]
        assert cli_main(typo) == 2
        assert "rewritten" not in capsys.readouterr().err  # nothing said of a move
        assert cli_main(argv) == 0
        said = capsys.readouterr()
        assert "sql -> pg_textsearch" in said.out and "rewritten" in said.err
        backend, indexed, after = run_sync(opened())
        assert (backend, indexed) == ("pg_textsearch", True)
        # The same children match; the index counts a row's length in tokens, not lexemes.
        assert {i for i, _ in after} == {i for i, _ in before}
        # A store may still rank such a collection in SQL: its statistics are kept too.
        assert run_sync(opened(lexical_backend="sql")) == ("pg_textsearch", True, before)
        assert cli_main(argv) == 0
        said = capsys.readouterr()
        assert "already" in said.out and "rewritten" not in said.err
        argv[2] = "sql"
        assert cli_main(argv) == 0
        assert "pg_textsearch -> sql" in capsys.readouterr().out
        assert run_sync(opened()) == ("sql", False, before)
    finally:
        run_sync(store().drop())


def test_bad_backend_names_fail_before_anything_connects() -> None:
    with pytest.raises(ConfigurationError, match="lexical backend"):
        PgVectorStore(dsn="postgresql://nowhere/x", table="t", lexical_backend="bm26")  # type: ignore[arg-type]
    from parrot_parents.stores.backends import open_store

    with pytest.raises(ConfigurationError, match="Milvus"):
        open_store("milvus:./x.db", collection="t", lexical_backend="pg_textsearch")


async def test_a_role_that_may_not_create_the_extension_gets_the_sql_backend(
    pg_dsn: str, embeddings: Any
) -> None:
    if "PARROT_PARENTS_TEST_DSN" in __import__("os").environ:
        pytest.skip("needs a superuser to create a role and a database")
    role = f"r_{uuid.uuid4().hex[:10]}"
    admin = await make_engine(pg_dsn, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f"CREATE ROLE {role} LOGIN"))
            await conn.execute(text(f"CREATE DATABASE {role} OWNER {role}"))
        dsn = re.sub(r"://[^@/]*@", f"://{role}@", pg_dsn).replace("/postgres?", f"/{role}?")
        # pgvector is not trusted either: a superuser creates it, as a managed service does.
        setup = await make_engine(re.sub(r"/postgres\?", f"/{role}?", pg_dsn))
        async with setup.begin() as conn:
            await conn.execute(text("CREATE EXTENSION vector"))
        await setup.dispose()
        s = PgVectorStore(dsn=dsn, table="docs", embedding=embeddings)
        try:
            await _write(s, TEXTS)
            assert s.lexical_backend == "sql"
            got = await s.similarity_search("paid leave", limit=3, search_mode="lexical")
            assert got and got[0].lexical_rank == 1
        finally:
            await s.close()
        forced = PgVectorStore(
            dsn=dsn, table="docs2", embedding=embeddings, lexical_backend="pg_textsearch"
        )
        with pytest.raises(ConfigurationError, match="may not create it"):
            await forced.connect()
        await forced.close()
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f"DROP DATABASE IF EXISTS {role} WITH (FORCE)"))
            await conn.execute(text(f"DROP ROLE IF EXISTS {role}"))
        await admin.dispose()


async def test_moving_to_pg_textsearch_builds_the_indexes_again_with_the_memory_hnsw_needs(
    pg_dsn: str, embeddings: Any
) -> None:
    """The ``lexical_text`` column rewrites the table, and the rewrite builds the HNSW
    graph again: it gets a bulk load's ``maintenance_work_mem``, never a smaller session
    default (with which a large graph spills to disk and takes hours)."""
    from parrot_parents.stores.postgres.collections.creation import move_lexical_backend
    from parrot_parents.stores.postgres.writes.writer import maintenance_work_mem_kb

    s = PgVectorStore(dsn=pg_dsn, table=unique_table(), embedding=embeddings, lexical_backend="sql")
    try:
        await _write(s, TEXTS)
        engine, _ = await s.ready()
        async with engine.connect() as conn:
            await conn.execute(text(f'ANALYZE "{s.schema}"."{s.table}"'))
            await conn.execute(text("SET maintenance_work_mem = '1MB'"))
            await conn.commit()
            async with conn.begin():
                before = await conn.run_sync(
                    move_lexical_backend, s.schema, s.table, "pg_textsearch"
                )
                during = (await conn.execute(text("SHOW maintenance_work_mem"))).scalar_one()
            after = (await conn.execute(text("SHOW maintenance_work_mem"))).scalar_one()
        assert before == "sql"
        assert during == f"{maintenance_work_mem_kb(len(TEXTS), 384, 16) // 1024}MB"
        assert after == "1MB"  # SET LOCAL: the session's own setting is back
        assert await _has_index(s)
    finally:
        await s.drop()
        await s.close()
