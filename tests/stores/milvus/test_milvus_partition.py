"""A Milvus collection's partition key (``MilvusStore(partition_key=...)``): Milvus's own
partition key field, filled with each child's value as JSON text, and a search whose filter
fixes the key narrowed to that value's partition, with the same answers as a plain filter."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.search_options import Fusion
from tests.conftest import unique_table

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pymilvus") is None, reason="pymilvus is not installed"
)

from parrot_parents.stores.milvus import MilvusStore  # noqa: E402
from parrot_parents.stores.milvus.filters import partition_clause, partition_text  # noqa: E402

TENANTS: list[str | int] = ["a", "b", "1", 1]


def _docs(rng: np.random.Generator) -> tuple[list[Document], np.ndarray]:
    docs = []
    for t, tenant in enumerate(TENANTS):
        for i in range(12):
            body = f"child {i} of tenant {tenant} about leave and pay"
            meta = {"document_id": f"d{t}_{i}", "tenant": tenant, "year": 2020 + i % 3}
            docs.append(Document(page_content=body, metadata=meta))
    vectors = rng.standard_normal((len(docs), 384)).astype(np.float32)
    return docs, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def uri() -> str:
    return str(Path(tempfile.mkdtemp(prefix="milvus-part-")) / "milvus.db")


async def test_a_value_s_search_reads_its_partition_and_answers_as_a_plain_filter(
    uri: str, embeddings: Any
) -> None:
    docs, vectors = _docs(np.random.default_rng(4))
    keyed = MilvusStore(uri, unique_table("mvk"), embedding=embeddings, partition_key="tenant")
    plain = MilvusStore(uri, unique_table("mvp"), embedding=embeddings)
    try:
        for s in (keyed, plain):
            await s.add_documents(docs, embeddings=vectors.tolist())
        assert keyed.partition_key == "tenant" and plain.partition_key is None
        rng = np.random.default_rng(8)
        for flt in ({"tenant": "b"}, {"tenant": 1}, {"tenant": "1", "year": 2021}):
            q = rng.standard_normal(384)
            q = (q / np.linalg.norm(q)).tolist()
            got = await keyed.similarity_search_by_vector(q, 6, filter=flt)
            want = await plain.similarity_search_by_vector(q, 6, filter=flt)
            assert [r.id for r in got] == [r.id for r in want]
            assert got and all(r.metadata["tenant"] == (flt.get("tenant") or "1") for r in got)
            assert type(got[0].metadata["tenant"]) is type(flt.get("tenant") or "1")
        hybrid = await keyed.similarity_search(
            "leave and pay", 5, filter={"tenant": "a"}, search_mode="hybrid"
        )
        assert hybrid and all(r.metadata["tenant"] == "a" for r in hybrid)
        # The expression sent names the partition field only where the filter fixes it.
        assert keyed._partitioned({"tenant": "a"}, 'document_id == "x"') == (
            '(document_id == "x") and partition_value == "\\"a\\""'
        )
        assert keyed._partitioned({"tenant": {"$in": ["a"]}}, "e") == "e"
        assert plain._partitioned({"tenant": "a"}, "e") == "e"
    finally:
        for s in (keyed, plain):
            await s.drop()


async def test_the_key_is_recorded_and_checked(uri: str, embeddings: Any) -> None:
    name = unique_table("mvr")
    first = MilvusStore(uri, name, embedding=embeddings, partition_key="tenant")
    await first.connect()
    try:
        reader = MilvusStore(uri, name, embedding=embeddings, create=False)
        await reader.connect()
        assert reader.partition_key == "tenant"
        await reader.close()
        other = MilvusStore(uri, name, embedding=embeddings, partition_key="year")
        with pytest.raises(ConfigurationError, match="partitioned by 'tenant'"):
            await other.connect()
        plain_name = unique_table("mvn")
        unkeyed = MilvusStore(uri, plain_name, embedding=embeddings)
        await unkeyed.connect()
        late = MilvusStore(uri, plain_name, embedding=embeddings, partition_key="tenant")
        with pytest.raises(ConfigurationError, match="has no partition key"):
            await late.connect()
        await unkeyed.drop()
    finally:
        await first.drop()


@pytest.mark.parametrize("key", ["", "$t", 5])
def test_a_bad_key_is_refused_at_construction(key: Any) -> None:
    with pytest.raises(ConfigurationError, match="partition_key"):
        MilvusStore("./never.db", "t", partition_key=key)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("1", '"1"'),
        (1, "1"),
        # Milvus finds 1.0 and true with == 1: they share 1's partition.
        (1.0, "1"),
        (True, "1"),
        (False, "0"),
        (-0.0, "0"),
        ('a"b\\', '"a\\"b\\\\"'),
        ("é", '"\\u00e9"'),
        # No partition of their own: a search fixing them reads every partition.
        (None, ""),
        (1.5, ""),
        ([1], ""),
        ({"a": 1}, ""),
        (2**64, ""),
        ("x" * 1100, ""),
    ],
)
def test_a_child_s_value_is_kept_as_its_partition_text(value: Any, text: str) -> None:
    assert partition_text(value) == text


@pytest.mark.parametrize(
    ("filter", "clause"),
    [
        ({"tenant": "a"}, 'partition_value == "\\"a\\""'),
        ({"tenant": {"$eq": "1"}, "year": 2021}, 'partition_value == "\\"1\\""'),
        ({"tenant": 1}, 'partition_value == "1"'),
        ({"tenant": True}, 'partition_value == "1"'),
        ({"$and": [{"tenant": 'a"b\\'}]}, 'partition_value == "\\"a\\\\\\"b\\\\\\\\\\""'),
        ({"tenant": 1.5}, ""),
        ({"tenant": "x" * 1100}, ""),
        ({"tenant": {"$in": ["a"]}}, ""),
        ({"tenant": {"$ne": "a"}}, ""),
        ({"year": 2021}, ""),
        (None, ""),
    ],
)
def test_the_clause_names_the_one_partition_a_filter_reads(
    filter: dict[str, Any] | None, clause: str
) -> None:
    assert partition_clause(filter, "tenant") == clause
    assert partition_clause(filter, None) == ""


async def test_numbers_booleans_and_long_values_answer_as_a_plain_filter(
    uri: str, embeddings: Any
) -> None:
    long = "t" * 1100
    values: list[Any] = [1, 1.0, True, "1", 0, False, 2, 2.5, long, None]
    docs = [
        Document(page_content=f"leave and pay, row {i}", metadata={"document_id": f"d{i}"})
        for i in range(len(values))
    ]
    for doc, value in zip(docs, values, strict=True):
        if value is not None:
            doc.metadata["tenant"] = value
    vectors = np.random.default_rng(3).standard_normal((len(docs), 384)).tolist()
    keyed = MilvusStore(uri, unique_table("mvt"), embedding=embeddings, partition_key="tenant")
    plain = MilvusStore(uri, unique_table("mvu"), embedding=embeddings)
    try:
        for s in (keyed, plain):
            await s.add_documents(docs, embeddings=vectors)
        for flt in (
            {"tenant": 1},
            {"tenant": True},
            {"tenant": 0},
            {"tenant": "1"},
            {"tenant": long},
        ):
            got = await keyed.similarity_search_by_vector(vectors[0], 10, filter=flt)
            want = await plain.similarity_search_by_vector(vectors[0], 10, filter=flt)
            assert got and sorted(r.id for r in got) == sorted(r.id for r in want), flt
            lexical = await keyed.similarity_search("leave", 10, filter=flt, search_mode="lexical")
            assert {r.id for r in lexical} == {r.id for r in want}, flt
    finally:
        for s in (keyed, plain):
            await s.drop()


async def test_a_refused_search_option_connects_nothing(embeddings: Any, tmp_path: Path) -> None:
    store = MilvusStore(str(tmp_path / "m.db"), "t", embedding=embeddings, partition_key="t")
    with pytest.raises(ConfigurationError, match="weighs both branches equally"):
        await store.similarity_search(
            "pay", 3, filter={"t": "a"}, search_mode="hybrid", fusion=Fusion(dense_weight=2.0)
        )
    assert store._client is None and not (tmp_path / "m.db").exists()
