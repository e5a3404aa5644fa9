"""``/context`` over HTTP: each passage names its section and, in hybrid search, the
dense and lexical ranks and scores behind its fused score."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from parrot_parents.loaders.structure.markdown import read_markdown
from parrot_parents.loaders.text import TextLoader
from parrot_parents.server.openapi import build_spec
from parrot_parents.stores.postgres import PgVectorStore
from tests.migrations.support import COLLECTION
from tests.server.conftest import MakeClient

GUIDE = """# Benefits guide

## Chapter 1: Health

Health cover starts on the first day of work. The plan pays for doctors and dentists.

## Chapter 2: Pension

The pension plan matches contributions up to five percent of salary. Pension
contributions are taken from each monthly salary payment.
"""

FIELDS = (
    "section_path",
    "section_ordinal",
    "ordinal",
    "layer",
    "page",
    "page_end",
    "dense_rank",
    "dense_score",
    "lexical_rank",
    "lexical_score",
)


async def test_context_passages_carry_section_and_branch_scores(
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

    async def context(**options: Any) -> dict[str, Any]:
        resp = await client.post(
            "/api/v1/bots/hr/context",
            json={"question": "pension contribution", "search_mode": "hybrid", **options},
        )
        body: dict[str, Any] = await resp.json()
        assert resp.status == 200, body
        return body

    body = await context(limit=3)
    passages = body["passages"]
    assert passages and all(set(p) >= set(FIELDS) for p in passages)
    top = passages[0]
    assert top["section_path"] == ["Benefits guide", "Chapter 2: Pension"]
    assert (top["section_ordinal"], top["ordinal"], top["layer"]) == (2, 3, "section")
    assert top["dense_rank"] >= 1 and top["lexical_rank"] >= 1 and top["lexical_score"] > 0
    scores = [p["score"] for p in passages]
    assert scores == sorted(scores, reverse=True)
    assert top["score"] == body["meta"]["children"][0]["score"] < top["dense_score"]

    parent = (await context(limit=3, expand_to_parent=True))["passages"][0]
    # A parent has its own section: here the whole (short) document, which names none.
    assert parent["kind"] == "parent" and parent["start_index"] == 0
    assert (parent["section_path"], parent["section_ordinal"], parent["ordinal"]) == ([], 0, 0)
    assert parent["dense_rank"] == top["dense_rank"] and parent["score"] == top["score"]

    # The OpenAPI document describes every field a passage carries.
    described = build_spec()["components"]["schemas"]["Passage"]["properties"]
    assert set(top) <= set(described)
