"""Filters on structure over HTTP: the same metadata filters as in Python and the CLI."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from parrot_parents.loaders.structure.markdown import read_markdown
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from tests.migrations.support import COLLECTION
from tests.server.conftest import MakeClient

GUIDE = """# Benefits guide

## Chapter 1: Health

Health cover starts on the first day of work. The plan pays for doctors and dentists.

## Chapter 2: Pension

The pension plan matches contributions up to five percent of salary.

Monthly pension contribution by band:

| Band | Contribution |
|---|---|
| A | 3% |
| B | 5% |
"""


async def test_context_filters_on_section_ordinal_path_and_layer(
    make_client: MakeClient, bots_dsn: str, embeddings: Any
) -> None:
    store = PgVectorStore(dsn=bots_dsn, table=COLLECTION, embedding=embeddings)
    try:
        loader = TextLoader(embedding=embeddings, section_parents=True)
        doc = Document(
            page_content=GUIDE,
            metadata={"document_id": "guide.md", "structure": read_markdown(GUIDE).to_dict()},
        )
        await loader.chunk_documents([doc], vector_store=store)
    finally:
        await store.close()
    client = await make_client()

    async def passages(filter: dict[str, Any]) -> list[dict[str, Any]]:
        resp = await client.post(
            "/api/v1/bots/hr/context",
            json={"question": "pension contribution", "limit": 5, "filter": filter},
        )
        body = await resp.json()
        assert resp.status == 200, body
        return body["passages"]

    chapter_2 = GUIDE.index("## Chapter 2")
    found = await passages({"section_ordinal": 2})
    assert found and all(p["document_id"] == "guide.md" for p in found)
    # A child belongs to the section holding most of its characters.
    assert all(p["end_index"] - chapter_2 > chapter_2 - p["start_index"] for p in found)
    found = await passages({"section_path": {"$like": "Benefits guide > Chapter 1%"}})
    assert found and all(p["end_index"] - chapter_2 < chapter_2 - p["start_index"] for p in found)
    found = await passages({"layer": "table_row"})
    assert [p["text"] for p in found] == ["| A | 3% |\n| B | 5% |"]
