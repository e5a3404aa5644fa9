"""A collection you can trust: creation atomic under concurrency, derived names that never
collide, reads that never create, names that are not collections refused, and the
errors of a dropped extension, a deadlock and a lone surrogate said in words.

Vectors are given (dimension 3), so no test here loads the model.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import make_url, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from parrot_parents.errors import (
    CollectionNotFoundError,
    ConfigurationError,
    SchemaMismatchError,
    StoreError,
)
from parrot_parents.stores.identifiers import derived_name
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.creation import derived_names
from parrot_parents.stores.postgres.connections.engine import make_engine, store_error
from tests.conftest import REPO_ROOT, unique_table

DIM = 3


def _store(dsn: str, table: str, **kwargs: object) -> PgVectorStore:
    return PgVectorStore(dsn=dsn, table=table, dimension=DIM, **kwargs)  # type: ignore[arg-type]


def _doc(document_id: str, text_: str = "hello") -> Document:
    return Document(page_content=text_, metadata={"document_id": document_id})


async def _add(store: PgVectorStore, document_id: str, vector: list[float]) -> None:
    await store.add_documents([_doc(document_id)], embeddings=[vector])


async def _relation_exists(dsn: str, name: str) -> bool:
    engine = await make_engine(dsn)
    try:
        async with engine.connect() as conn:
            found = await conn.execute(text("SELECT to_regclass(:n)"), {"n": f'public."{name}"'})
            return found.scalar() is not None
    finally:
        await engine.dispose()


async def _drop(dsn: str, *tables: str) -> None:
    for table in tables:
        store = _store(dsn, table)
        try:
            await store.drop()
        finally:
            await store.close()


@pytest.fixture
async def engine_for(pg_dsn: str) -> AsyncIterator[AsyncEngine]:
    engine = await make_engine(pg_dsn)
    yield engine
    await engine.dispose()


# -- derived names --------------------------------------------------------------------


def test_derived_names_keep_short_names_and_fit_63_bytes() -> None:
    short = "a" * 40
    assert derived_name("docs", "documents") == "docs_documents"
    assert derived_name(short, "embedding_hnsw") == f"{short}_embedding_hnsw"
    one, two = "p" * 40 + "x" * 14, "p" * 40 + "y" * 14
    assert derived_name(one, "document_id_idx") != derived_name(two, "document_id_idx")
    for name in (one, "z" * 63, "é" * 31 + "x"):
        for derived in derived_names(name):
            assert len(derived.encode("utf-8")) <= 63
            derived.encode("utf-8")  # cut on a character boundary


async def test_two_long_names_sharing_40_characters_both_work(pg_dsn: str) -> None:
    prefix = f"long_{uuid.uuid4().hex}"[:40].ljust(40, "p")
    one, two = prefix + "_first_of_two", prefix + "_second_of_two"
    try:
        for i, name in enumerate((one, two)):
            store = _store(pg_dsn, name)
            try:
                await _add(store, f"d{i}", [1.0, float(i), 0.0])
            finally:
                await store.close()
        for i, name in enumerate((one, two)):
            store = _store(pg_dsn, name, create=False)
            try:
                hits = await store.similarity_search_by_vector([1.0, float(i), 0.0], limit=5)
                assert [h.metadata["document_id"] for h in hits] == [f"d{i}"]
                assert await store.document_states([f"d{i}"]) == {}  # its own documents table
            finally:
                await store.close()
    finally:
        await _drop(pg_dsn, one, two)


# -- creation under concurrency -------------------------------------------------------


async def test_concurrent_first_writes_of_a_new_collection_all_succeed(pg_dsn: str) -> None:
    table = unique_table("conc")
    stores = [_store(pg_dsn, table) for _ in range(6)]
    try:
        await asyncio.gather(
            *(_add(s, f"d{i}", [1.0, float(i), 1.0]) for i, s in enumerate(stores))
        )
        assert await stores[0].count() == 6
    finally:
        for s in stores:
            await s.close()
        await _drop(pg_dsn, table)


_WRITER = """
import asyncio, sys
from langchain_core.documents import Document
from parrot_parents.stores.postgres import PgVectorStore

async def main(dsn, table, n):
    store = PgVectorStore(dsn=dsn, table=table, dimension=3)
    try:
        await store.add_documents(
            [Document(page_content="x", metadata={"document_id": f"p{n}"})],
            embeddings=[[1.0, 2.0, float(n)]],
        )
    finally:
        await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_concurrent_first_writes_from_separate_processes_all_succeed(pg_dsn: str) -> None:
    table = unique_table("procs")
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _WRITER,
            pg_dsn,
            table,
            str(n),
            cwd=REPO_ROOT,
            stderr=subprocess.PIPE,
        )
        for n in range(3)
    ]
    try:
        results = [await p.communicate() for p in procs]
        errors = [err.decode() for _, err in results if err.strip()]
        assert [p.returncode for p in procs] == [0, 0, 0], errors
        store = _store(pg_dsn, table, create=False)
        try:
            assert await store.count() == 3
        finally:
            await store.close()
    finally:
        await _drop(pg_dsn, table)


# -- reads never create ---------------------------------------------------------------


async def test_a_read_after_drop_and_close_raises_and_creates_nothing(pg_dsn: str) -> None:
    table = unique_table("gone")
    store = _store(pg_dsn, table)
    await _add(store, "d", [1.0, 0.0, 0.0])
    await store.drop()
    await store.close()
    # The same store, reconnected by a read, and a new store on that name.
    for reader in (store, _store(pg_dsn, table)):
        with pytest.raises(CollectionNotFoundError, match="does not exist"):
            await reader.similarity_search_by_vector([1.0, 0.0, 0.0])
        with pytest.raises(CollectionNotFoundError):
            await reader.count()
        await reader.close()
    assert not await _relation_exists(pg_dsn, table)
    # A write still creates it.
    try:
        await _add(store, "again", [0.0, 1.0, 0.0])
        assert await store.count() == 1
    finally:
        await store.drop()
        await store.close()


async def test_a_read_on_a_dropped_collection_of_an_open_store_is_clear(pg_dsn: str) -> None:
    table = unique_table("dropped")
    store = _store(pg_dsn, table)
    try:
        await _add(store, "d", [1.0, 0.0, 0.0])
        await store.drop()
        with pytest.raises(CollectionNotFoundError, match=f"collection '{table}' does not"):
            await store.similarity_search_by_vector([1.0, 0.0, 0.0])
        assert not await _relation_exists(pg_dsn, table)
        await store.drop()  # dropping what is gone does nothing
    finally:
        await store.close()


# -- names that are not collections ---------------------------------------------------


def test_the_projects_own_table_names_are_not_collection_names() -> None:
    for name in ("bots", "alembic_version", "parrot_parents_backfill"):
        with pytest.raises(ConfigurationError, match="not a collection"):
            PgVectorStore(table=name)


async def test_a_table_that_is_not_a_collection_is_refused_and_left_alone(
    pg_dsn: str, engine_for: AsyncEngine
) -> None:
    table = unique_table("plain")
    engine = engine_for
    async with engine.begin() as conn:
        await conn.execute(text(f'CREATE TABLE "{table}" (name text primary key)'))
    try:
        for create in (False, True):
            store = _store(pg_dsn, table, create=create)
            try:
                with pytest.raises(SchemaMismatchError, match="is not a collection"):
                    await store.similarity_search_by_vector([1.0, 0.0, 0.0])
                with pytest.raises(SchemaMismatchError, match="is not a collection"):
                    await _add(store, "d", [1.0, 0.0, 0.0])
                with pytest.raises(SchemaMismatchError):
                    await store.drop()
            finally:
                await store.close()
        async with engine.connect() as conn:
            columns = await conn.execute(
                text("SELECT column_name FROM information_schema.columns WHERE table_name = :t"),
                {"t": table},
            )
            assert [r[0] for r in columns] == ["name"]  # no column was added
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f'DROP TABLE "{table}"'))


def test_cli_refuses_a_table_that_is_not_a_collection(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from parrot_parents.cli.main import main

    table = unique_table("notcoll")

    async def make(sql: str) -> None:
        engine = await make_engine(pg_dsn)
        try:
            async with engine.begin() as conn:
                await conn.execute(text(sql))
        finally:
            await engine.dispose()

    asyncio.run(make(f'CREATE TABLE "{table}" (name text)'))
    try:
        code = main(["ask", "pay", "--collection", table, "--dsn", pg_dsn])
        err = capsys.readouterr().err
        assert code == 2 and "is not a collection" in err, err
        corpus = str(REPO_ROOT / "examples" / "corpus")
        code = main(["ingest", corpus, "--collection", table, "--dsn", pg_dsn])
        err = capsys.readouterr().err
        assert code == 2 and "is not a collection" in err, err
        assert main(["ask", "pay", "--collection", "bots", "--dsn", pg_dsn]) == 2
        err = capsys.readouterr().err
        assert "not a collection" in err and "embedding" not in err.split("not a")[0], err
    finally:
        asyncio.run(make(f'DROP TABLE "{table}"'))


# -- a name whose derived objects are taken -------------------------------------------


async def test_a_collection_never_adopts_another_collections_objects(pg_dsn: str) -> None:
    base = unique_table("own")
    other = f"{base}_documents"  # the name of ``base``'s documents table
    first = _store(pg_dsn, other)
    try:
        await _add(first, "d", [1.0, 0.0, 0.0])
        second = _store(pg_dsn, base)
        try:
            with pytest.raises(SchemaMismatchError, match="taken"):
                await _add(second, "e", [0.0, 1.0, 0.0])
        finally:
            await second.close()
        assert await first.count() == 1
    finally:
        await first.drop()
        await first.close()


# -- errors in words ------------------------------------------------------------------


async def test_a_lone_surrogate_is_named_not_echoed_in_a_store_error(pg_dsn: str) -> None:
    table = unique_table("surr")
    store = _store(pg_dsn, table)
    try:
        await _add(store, "d", [1.0, 0.0, 0.0])
        # In a filter it is refused before any SQL, in the same words.
        with pytest.raises(ConfigurationError) as refused:
            await store.similarity_search_by_vector(
                [1.0, 0.0, 0.0], filter={"source": {"$like": "pay \ud800"}}
            )
        said = str(refused.value)
        said.encode("utf-8")
        assert "lone surrogate" in said and "pay" not in said, said
        calls = (
            lambda: store.document_rows("pay \ud800"),
            lambda: store.delete("pay \ud800"),
        )
        for call in calls:
            with pytest.raises(StoreError) as info:
                await call()
            message = str(info.value)
            message.encode("utf-8")  # printable and serialisable
            assert "lone surrogate" in message and "'\\ud800'" in message, message
            assert "pay" not in message and "query argument" not in message, message
    finally:
        await store.drop()
        await store.close()


async def test_a_deadlock_is_named_with_its_cause_and_the_fix(pg_dsn: str) -> None:
    engine = await make_engine(pg_dsn)
    a_key, b_key = 4_242_001, 4_242_002
    try:
        async with engine.connect() as one, engine.connect() as two:
            await one.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": a_key})
            await two.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": b_key})

            async def take(conn: AsyncConnection, key: int) -> None:
                await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})

            results = await asyncio.gather(
                take(one, b_key), take(two, a_key), return_exceptions=True
            )
            failures = [r for r in results if isinstance(r, DBAPIError)]
            assert len(failures) == 1
            error = store_error(failures[0], "search in public.x")
            assert error.sqlstate == "40P01"
            assert "deadlock with a concurrent" in str(error)
            assert error.hint is not None and "retry" in error.hint
    finally:
        await engine.dispose()


async def test_a_recreated_vector_extension_does_not_break_a_running_store(
    pg_dsn: str,
) -> None:
    # A private database: the extension is dropped and created again under the store.
    name = f"ext_{uuid.uuid4().hex[:10]}"
    admin = await make_engine(pg_dsn, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
        dsn = make_url(pg_dsn).set(database=name).render_as_string(hide_password=False)
        table = unique_table("ext")
        store = _store(dsn, table)
        await _add(store, "d", [1.0, 0.0, 0.0])
        assert len(await store.similarity_search_by_vector([1.0, 0.0, 0.0])) == 1
        await _drop(dsn, table)
        other = await make_engine(dsn)
        async with other.begin() as conn:
            await conn.execute(text("DROP EXTENSION vector"))
        await other.dispose()
        rebuilt = _store(dsn, table)
        await _add(rebuilt, "d", [1.0, 0.0, 0.0])
        await rebuilt.close()
        try:
            hits = await store.similarity_search_by_vector([1.0, 0.0, 0.0])
            assert [h.metadata["document_id"] for h in hits] == ["d"]
            await _add(store, "e", [0.0, 1.0, 0.0])
        except StoreError as exc:
            assert "vector extension" in str(exc), str(exc)
        await store.close()
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


# -- many names, in pairs and concurrently --------------------------------------------

_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
_FIRST = _CHARS[:52] + "_"


@st.composite
def _name_pairs(draw: st.DrawFn) -> list[str]:
    """2-4 names of 1-63 bytes of every allowed character, most sharing a long prefix."""
    prefix = draw(st.text(alphabet=_CHARS, min_size=0, max_size=62))
    names: list[str] = []
    for _ in range(draw(st.integers(2, 4))):
        head = draw(st.sampled_from(_FIRST))
        shared = draw(st.booleans())
        tail = draw(st.text(alphabet=_CHARS, min_size=0, max_size=62))
        name = (head + (prefix if shared else "") + tail)[:63]
        names.append(name)
    return list(dict.fromkeys(names))


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(names=_name_pairs())
def test_generated_names_created_concurrently_all_work_and_never_collide(
    pg_dsn: str, names: list[str]
) -> None:
    # Per run, a fresh name space: a private schema, dropped after.
    schema = f"h_{uuid.uuid4().hex[:12]}"
    derived = {n: set(derived_names(n)) for n in names}
    clash = any(
        a != b and (a in derived[b] or derived[a] & derived[b]) for a in names for b in names
    )

    async def run() -> None:
        stores = [PgVectorStore(dsn=pg_dsn, table=n, schema=schema, dimension=DIM) for n in names]
        try:
            outcome = await asyncio.gather(
                *(_add(s, f"doc{i}", [1.0, float(i), 2.0]) for i, s in enumerate(stores)),
                *(_add(s, f"doc{i}", [1.0, float(i), 2.0]) for i, s in enumerate(stores)),
                return_exceptions=True,
            )
            if not clash:
                assert not [o for o in outcome if o is not None], outcome
            for i, s in enumerate(stores):
                if clash and any(isinstance(o, SchemaMismatchError) for o in outcome):
                    continue
                hits = await s.similarity_search_by_vector([1.0, float(i), 2.0], limit=10)
                assert [h.metadata["document_id"] for h in hits] == [f"doc{i}"]
        finally:
            for s in stores:
                await s.close()
            engine = await make_engine(pg_dsn)
            async with engine.begin() as conn:
                await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            await engine.dispose()

    asyncio.run(run())


@pytest.mark.parametrize("first", ["statistics", "table"])
async def test_a_drop_racing_a_search_never_deadlocks(pg_dsn: str, first: str) -> None:
    # A lexical search reads the BM25 statistics, then the table; a hybrid one the table,
    # then the statistics. A drop holding one while it waits for the other deadlocks.
    table = unique_table("order")
    store = _store(pg_dsn, table)
    await _add(store, "d", [1.0, 0.0, 0.0])
    stats = store.lexical.q(store.lexical.stats_name)
    qt = store.lexical.q(table)
    reads = [stats, qt] if first == "statistics" else [qt, stats]
    engine = await make_engine(pg_dsn)
    try:
        async with engine.connect() as search:
            await search.begin()
            await search.execute(text(f"SELECT count(*) FROM {reads[0]}"))
            dropping = asyncio.create_task(store.drop())
            await asyncio.sleep(0.3)  # the drop now waits for a lock
            rows = await search.execute(text(f"SELECT count(*) FROM {reads[1]}"))
            assert rows.scalar() == 1
            await search.rollback()
            await dropping  # then goes through
        assert not await _relation_exists(pg_dsn, table)
    finally:
        await engine.dispose()
        await store.close()


async def test_a_first_write_that_embeds_creates_the_collection(pg_dsn: str, embeddings) -> None:  # type: ignore[no-untyped-def]
    # The store embeds the rows itself, so it checks the collection's model before the
    # write: that check must create the collection, as the write would, not read it.
    table = unique_table("embeds")
    store = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)
    try:
        await store.add_documents([_doc("first", "Salaries are paid on the 25th.")])
        assert await store.count() == 1
    finally:
        await store.drop()
        await store.close()


async def test_a_collection_dropped_while_the_collections_are_listed_is_left_out(
    pg_dsn: str,
) -> None:
    from parrot_parents.stores.postgres.collections.catalog import list_collections

    schema = f"l_{uuid.uuid4().hex[:12]}"
    stores = [PgVectorStore(dsn=pg_dsn, table=n, schema=schema, dimension=DIM) for n in "ab"]
    engine = await make_engine(pg_dsn)
    try:
        for i, s in enumerate(stores):
            await _add(s, f"doc{i}", [1.0, float(i), 2.0])
            await s.close()
        # Another client drops ``b`` in a transaction still open: the listing reads both
        # names, then its count of ``b`` waits for the drop's lock.
        async with engine.connect() as dropper:
            oid = (
                await dropper.execute(text(f'SELECT \'"{schema}"."b"\'::regclass::oid'))
            ).scalar_one()
            await dropper.execute(text(f'DROP TABLE "{schema}"."b" CASCADE'))
            listing = asyncio.create_task(list_collections(engine, schema))
            for _ in range(200):
                waiting = await dropper.execute(
                    text("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = :oid"),
                    {"oid": oid},
                )
                if waiting.scalar_one():
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the listing never waited for the drop")
            await dropper.commit()
            found = await asyncio.wait_for(listing, 30)
        assert [c.name for c in found] == ["a"]
        assert found[0].children == 1
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        await engine.dispose()
