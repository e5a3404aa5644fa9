"""A data directory whose catalog records a newer pgvector than the server's library (made
by an older embedded server with pgvector 0.8.2, opened by one with 0.8.1) keeps working,
and says so once."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from langchain_core.documents import Document
from sqlalchemy.engine import make_url

from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.setup import ExtensionVersions


@pytest.fixture
async def newer_catalog_dsn(pg_dsn: str) -> AsyncIterator[tuple[str, str]]:
    """A fresh database whose pgvector catalog entry claims the next patch release."""
    name = f"ext_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(pg_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        dsn = make_url(pg_dsn).set(database=name).render_as_string(hide_password=False)
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("CREATE EXTENSION vector")
            library = await conn.fetchval(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            )
            major, minor, patch = (int(p) for p in library.split("."))
            newer = f"{major}.{minor}.{patch + 1}"
            try:
                await conn.execute(
                    "UPDATE pg_extension SET extversion = $1 WHERE extname = 'vector'", newer
                )
            except asyncpg.InsufficientPrivilegeError:
                pytest.skip("needs a superuser to edit the catalog (the embedded server is one)")
        finally:
            await conn.close()
        yield dsn, newer
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_a_newer_catalog_keeps_working_and_is_named(
    newer_catalog_dsn: tuple[str, str], embeddings, caplog: pytest.LogCaptureFixture
) -> None:
    dsn, newer = newer_catalog_dsn
    store = PgVectorStore(dsn=dsn, table="docs", embedding=embeddings)
    with caplog.at_level(
        logging.WARNING, logger="parrot_parents.stores.postgres.collections.setup"
    ):
        await store.add_documents([Document(page_content="the pay day is the 15th")])
        hits = await store.similarity_search("when is pay day?", limit=1)
    await store.close()
    assert hits and "pay day" in hits[0].page_content
    notes = [r.getMessage() for r in caplog.records if "pgvector" in r.getMessage()]
    assert len(notes) == 1, notes
    assert f"catalog records version {newer}" in notes[0]
    assert "keeps working" in notes[0]

    from parrot_parents.stores.postgres.collections.server_facts import server_facts

    report = await server_facts(dsn)
    assert report.extensions["vector"]["in_this_database"] == newer
    assert any(newer in note for note in report.notes)
    assert not report.problems


def test_the_note_tells_a_patch_from_a_minor_release() -> None:
    assert ExtensionVersions("0.8.1", "0.8.1").note() is None
    assert ExtensionVersions("0.8.0", "0.8.1").note() is None
    assert "keeps working" in (ExtensionVersions("0.8.2", "0.8.1").note() or "")
    assert "will fail" in (ExtensionVersions("0.9.0", "0.8.1").note() or "")
    assert ExtensionVersions("0.10.0", "0.9.9").catalog_is_newer  # numbers, not strings
