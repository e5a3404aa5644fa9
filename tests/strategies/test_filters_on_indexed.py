"""A metadata filter holds for the rows a search returns, also where an ingestion
strategy's indexed rows are searched in place of the children (the default strategy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy.dialects import postgresql

from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.search.target_filter import searched_filter
from tests.strategies.test_indexed_rows import ingest, rows

QUESTION = "how long is the notice period to end the agreement"


async def _children(store: PgVectorStore) -> list[dict[str, Any]]:
    return [
        dict(r.cmetadata, id=r.id)
        for r in await rows(store, indexed=False)
        if r.cmetadata.get("is_chunk") is True
    ]


@pytest.mark.parametrize("mode", ["dense", "hybrid", "lexical"])
async def test_hierarchy_keys_filter_the_children_found_through_indexed_rows(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path, mode: str
) -> None:
    await ingest(store, corpus, "contextual:extractive", None, tmp_path)
    children = await _children(store)
    assert children and all(c.get("searchable") is False for c in children)
    everything = await store.similarity_search(QUESTION, limit=100, search_mode=mode)
    assert everything and all(r.via is not None for r in everything)

    # Every searched row is an indexed one, marked is_chunk false: the filter is the
    # returned child's, so it keeps them all.
    kept = await store.similarity_search(
        QUESTION, limit=100, filter={"is_chunk": True}, search_mode=mode
    )
    assert [r.id for r in kept] == [r.id for r in everything]
    assert (
        await store.similarity_search(QUESTION, filter={"is_chunk": False}, search_mode=mode) == []
    )

    parent = children[0]["parent_document_id"]
    under = await store.similarity_search(
        QUESTION, limit=100, filter={"parent_document_id": parent}, search_mode=mode
    )
    assert under, "a parent's own children are found through their indexed rows"
    assert [r.id for r in under] == [
        r.id for r in everything if r.metadata["parent_document_id"] == parent
    ]
    # Keys an indexed row does not copy from its child: judged on the child as well.
    tried = 0
    for key in ("retrieval_preamble", "sentences"):
        having = {c["id"] for c in children if key in c}
        if not having:
            continue
        tried += 1
        got = await store.similarity_search(
            QUESTION, limit=100, filter={key: {"$exists": True}}, search_mode=mode
        )
        assert [r.id for r in got] == [r.id for r in everything if r.id in having], key
    assert tried, "the corpus's children hold neither key: nothing was checked"
    early = await store.similarity_search(
        QUESTION,
        limit=100,
        filter={"$and": [{"chunk_index": {"$lt": 2}}, {"source": "a.md"}]},
        search_mode=mode,
    )
    assert early and [r.id for r in early] == [
        r.id for r in everything if r.metadata["chunk_index"] < 2 and r.metadata["source"] == "a.md"
    ]


def test_a_filter_on_copied_keys_reads_the_searched_row_alone(store: PgVectorStore) -> None:
    def sql(flt: dict[str, Any]) -> str:
        return str(searched_filter(store.sa_table, flt).compile(dialect=postgresql.dialect()))

    assert "target" not in sql({"source": "a.md", "year": {"$gte": 2022}})
    assert "target" in sql({"$or": [{"source": "a.md"}, {"$not": {"chunk_index": 0}}]})


_KEYS = st.sampled_from(["chunk_index", "start_index", "parent_document_id", "source"])


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(key=_KEYS, pick=st.integers(0, 1000), op=st.sampled_from(["$eq", "$ne", "$gte", "$lt"]))
async def test_the_filter_holds_for_every_row_returned_and_loses_none(
    store: PgVectorStore,
    corpus: list[Document],
    tmp_path: Path,
    key: str,
    pick: int,
    op: str,
) -> None:
    if not await store.count():
        await ingest(store, corpus, "contextual:extractive", None, tmp_path)
    children = await _children(store)
    value = children[pick % len(children)][key]
    if op in ("$gte", "$lt") and not isinstance(value, int):
        op = "$eq"
    flt = {key: {op: value}}

    def holds(meta: dict[str, Any]) -> bool:
        v = meta.get(key)
        return {
            "$eq": v == value,
            "$ne": v != value,
            "$gte": isinstance(v, int) and v >= value,
            "$lt": isinstance(v, int) and v < value,
        }[op]

    everything = await store.similarity_search(QUESTION, limit=100)
    got = await store.similarity_search(QUESTION, limit=100, filter=flt)
    assert [r.id for r in got] == [r.id for r in everything if holds(r.metadata)], flt
