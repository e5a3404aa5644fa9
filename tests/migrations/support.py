"""Databases for the tests of migrations, bots and the service.

Each test that touches the ``bots`` table gets its own database, copied (``CREATE DATABASE
... TEMPLATE``) from one migrated template that already holds a small ``handbook``
collection embedded with the real model. A copy takes a fraction of a second and keeps the
tests independent: a bad bot row left by one test never shows up in another.

Import the ``*_fixture`` functions into a test module (or a conftest) to use the fixtures
``template_dsn``, ``bots_dsn`` and ``empty_dsn``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
from langchain_core.documents import Document
from sqlalchemy.engine import make_url

from parrot_parents import migrations

T = TypeVar("T")

COLLECTION = "handbook"
PAY = (
    "Salaries are paid monthly, on the last working day of each month, by bank transfer.",
    "Your payslip is on the staff portal two days before the payment date.",
    "Approved overtime is paid with the salary of the following month.",
)
LEAVE = (
    "Every employee has twenty-five days of paid leave per calendar year.",
    "Leave requests go through the staff portal and need two weeks of notice.",
    "Sick leave does not count against paid leave; send a medical certificate.",
)


def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in a worker thread (it may call ``asyncio.run``) and return its result."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result()


def with_database(dsn: str, name: str) -> str:
    return make_url(dsn).set(database=name).render_as_string(hide_password=False)


def _asyncpg_dsn(dsn: str) -> dict[str, Any]:
    url = make_url(dsn)
    return {
        "user": url.username,
        "password": url.password or None,
        "host": url.query.get("host") or url.host,
        "port": url.port,
        "database": url.database,
    }


async def _admin(dsn: str, sql: str) -> None:
    conn = await asyncpg.connect(**_asyncpg_dsn(dsn))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def create_database(server_dsn: str, template: str | None = None) -> str:
    """Create a uniquely named database (optionally a copy of ``template``); its DSN."""
    name = f"pp_{uuid.uuid4().hex[:12]}"
    sql = f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")
    in_thread(asyncio.run, _admin(server_dsn, sql))
    return with_database(server_dsn, name)


def drop_database(server_dsn: str, dsn: str) -> None:
    name = make_url(dsn).database
    in_thread(asyncio.run, _admin(server_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def handbook_documents() -> list[Document]:
    """Two parents (whole documents) with three children each, character offsets included."""
    docs = []
    for doc_id, sentences in (("pay", PAY), ("leave", LEAVE)):
        text = " ".join(sentences)
        source = f"{doc_id}.md"
        docs.append(
            Document(
                id=doc_id,
                page_content=text,
                metadata={
                    "document_id": doc_id,
                    "is_full_document": True,
                    "source": source,
                    "start_index": 0,
                    "end_index": len(text),
                },
            )
        )
        start = 0
        for i, sentence in enumerate(sentences):
            docs.append(
                Document(
                    id=f"{doc_id}#{i}",
                    page_content=sentence,
                    metadata={
                        "document_id": doc_id,
                        "parent_document_id": doc_id,
                        "is_chunk": True,
                        "chunk_index": i,
                        "source": source,
                        "start_index": start,
                        "end_index": start + len(sentence),
                    },
                )
            )
            start += len(sentence) + 1
    return docs


async def _fill(dsn: str, embeddings: Any) -> None:
    from parrot_parents.stores.postgres import PgVectorStore

    async with PgVectorStore(dsn=dsn, table=COLLECTION, embedding=embeddings) as store:
        await store.add_documents(handbook_documents())


@contextlib.contextmanager
def database(server_dsn: str, template_dsn: str | None = None) -> Iterator[str]:
    """A new database (a copy of ``template_dsn``'s when given), dropped after; its DSN."""
    template = None if template_dsn is None else make_url(template_dsn).database
    dsn = create_database(server_dsn, template=template)
    try:
        yield dsn
    finally:
        drop_database(server_dsn, dsn)


@pytest.fixture(scope="session", name="template_dsn")
def template_dsn_fixture(pg_dsn: str, embeddings: Any) -> Iterator[str]:
    """A migrated database holding the ``handbook`` collection (never used directly)."""
    with database(pg_dsn) as dsn:
        in_thread(migrations.upgrade, dsn, collections=[COLLECTION])
        in_thread(asyncio.run, _fill(dsn, embeddings))
        yield dsn


@pytest.fixture(name="bots_dsn")
def bots_dsn_fixture(pg_dsn: str, template_dsn: str) -> Iterator[str]:
    """A fresh copy of the template: migrated, ``handbook`` filled, no bots."""
    with database(pg_dsn, template_dsn) as dsn:
        yield dsn


@pytest.fixture(name="empty_dsn")
def empty_dsn_fixture(pg_dsn: str) -> Iterator[str]:
    """A fresh, empty database (not migrated)."""
    with database(pg_dsn) as dsn:
        yield dsn


@contextlib.contextmanager
def example_database(pg_dsn: str, template_dsn: str, embeddings: Any) -> Iterator[str]:
    """A copy of the bots template with the example corpus ingested for real (collection
    ``example``); its sources read ``examples/corpus/...``, as in the README."""
    from parrot_parents.loaders import TextLoader
    from parrot_parents.stores.postgres import PgVectorStore
    from tests.conftest import REPO_ROOT

    async def ingest(dsn: str) -> None:
        async with PgVectorStore(dsn=dsn, table="example", embedding=embeddings) as store:
            await TextLoader(Path("examples/corpus"), embedding=embeddings).ingest(store)

    with database(pg_dsn, template_dsn) as dsn:
        with contextlib.chdir(REPO_ROOT):
            in_thread(asyncio.run, ingest(dsn))
        yield dsn
