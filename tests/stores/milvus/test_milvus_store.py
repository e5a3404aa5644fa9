"""MilvusStore and MilvusParentSearcher on Milvus Lite: what the conformance suite does not
cover (search modes, filter operators, limits of the engine, plugins, the command line)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from parrot_parents.bots.registries import default_registries
from parrot_parents.errors import ConfigurationError, SchemaMismatchError
from parrot_parents.sync import run_sync
from tests.conftest import REPO_ROOT, unique_table

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pymilvus") is None, reason="pymilvus is not installed"
)

from parrot_parents.stores.milvus import MilvusParentSearcher, MilvusStore  # noqa: E402

NOTICE = [
    "Either side may end the contract; the notice period is one month in the first year.",
    "Salaries are paid on the last business day of each month by direct deposit.",
    "Vacation days carry over into the next year, up to five days.",
    "The mileage rate for a private car is 0.45 per kilometre.",
    "Report a suspicious email to the IT desk and do not click any link in it.",
]


@pytest.fixture(scope="module")
def uri() -> str:
    return str(Path(tempfile.mkdtemp(prefix="milvus-store-")) / "milvus.db")


@pytest.fixture
async def store(uri: str, embeddings: Any) -> AsyncIterator[MilvusStore]:
    s = MilvusStore(uri, unique_table("mv"), embedding=embeddings)
    await s.add_documents(
        [
            Document(
                page_content=t,
                metadata={"document_id": f"d{i}", "n": i, "team": "red" if i % 2 else "blue"},
            )
            for i, t in enumerate(NOTICE)
        ]
    )
    try:
        yield s
    finally:
        await s.drop()


async def test_lexical_search_ranks_the_matching_row_first(store: MilvusStore) -> None:
    hits = await store.similarity_search("notice period", limit=3, search_mode="lexical")
    assert hits[0].content == NOTICE[0]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score > 0 and hits[0].distance is None
    # a word no row contains matches nothing lexically, but dense search still answers
    assert await store.similarity_search("zyzzyva", limit=3, search_mode="lexical") == []
    assert len(await store.similarity_search("zyzzyva", limit=3)) == 3


async def test_hybrid_search_fuses_both_lists(store: MilvusStore) -> None:
    hits = await store.similarity_search("notice period", limit=4, search_mode="hybrid")
    assert len(hits) == 4 and hits[0].content == NOTICE[0]
    filtered = await store.similarity_search(
        "notice period", limit=5, search_mode="hybrid", filter={"team": "red"}
    )
    assert {h.metadata["team"] for h in filtered} == {"red"} and len(filtered) == 2
    with pytest.raises(ConfigurationError, match="search_mode"):
        await store.similarity_search("x", search_mode="sparse")  # type: ignore[arg-type]


async def test_dense_scores_are_cosine_similarities(store: MilvusStore) -> None:
    hits = await store.similarity_search("When are salaries paid?", limit=5)
    assert hits[0].content == NOTICE[1]
    for h in hits:
        assert h.score is not None and h.distance is not None
        assert abs(h.score + h.distance - 1.0) < 1e-6 and -1.0 <= h.score <= 1.0


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"n": {"$gte": 1, "$lt": 3}}, {1, 2}),
        ({"n": {"$in": [0, 4]}}, {0, 4}),
        ({"n": {"$nin": [0, 4]}}, {1, 2, 3}),
        ({"n": {"$ne": 2}}, {0, 1, 3, 4}),
        ({"n": {"$gt": 3}}, {4}),
        ({"n": {"$lte": 0}}, {0}),
        ({"team": "red", "n": {"$eq": 3}}, {3}),
    ],
)
async def test_filter_operators(store: MilvusStore, flt: dict, expected: set[int]) -> None:
    hits = await store.similarity_search("anything", limit=10, filter=flt)
    assert {h.metadata["n"] for h in hits} == expected


async def test_text_over_the_varchar_limit_is_refused_before_writing(store: MilvusStore) -> None:
    before = await store.count()
    big = Document(page_content="é" * 40_000, metadata={"document_id": "big"})
    small = Document(page_content="small", metadata={"document_id": "big", "start_index": 0})
    with pytest.raises(ConfigurationError, match="at most 65535"):
        await store.add_documents([small, big])
    assert await store.count() == before


async def test_parents_live_in_their_own_collection_without_a_dense_vector(
    store: MilvusStore,
) -> None:
    client = await store.ready()
    fields = client.describe_collection(store.parents_collection)["fields"]
    types = {f["name"]: str(f["type"]) for f in fields}
    assert "embedding" not in types and "FLOAT_VECTOR" not in " ".join(types.values())


async def test_dimension_mismatch_is_reported(store: MilvusStore, uri: str) -> None:
    other = MilvusStore(uri, store.collection, dimension=8, embedding=store.embedding)
    with pytest.raises(SchemaMismatchError, match="dimension 384"):
        await other.connect()


async def test_missing_collection_without_create(uri: str, embeddings: Any) -> None:
    s = MilvusStore(uri, unique_table("absent"), embedding=embeddings, create=False)
    with pytest.raises(Exception, match="does not exist"):
        await s.connect()


def test_bad_names_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        MilvusStore("x.db", "bad-name")
    with pytest.raises(ConfigurationError, match="MilvusStore"):
        MilvusParentSearcher(object())  # type: ignore[arg-type]


async def test_the_registry_builds_the_milvus_searcher_by_type_name(store: MilvusStore) -> None:
    searcher = default_registries().parent_searchers.build({"type": "milvus"}, store=store)
    assert isinstance(searcher, MilvusParentSearcher) and searcher.store is store
    assert searcher.to_dict() == {"type": "milvus"} and await searcher.health_check()
    with pytest.raises(Exception, match="uri"):
        default_registries().parent_searchers.build({"type": "milvus", "uri": "x"}, store=store)


@pytest.fixture(scope="module")
def property_store(uri: str, embeddings: Any) -> Iterator[MilvusStore]:
    s = MilvusStore(uri, unique_table("prop"), embedding=embeddings, dimension=4)
    yield s
    run_sync(s.drop())


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), max_size=30))
def test_any_string_value_filters_exactly_its_own_row(
    property_store: MilvusStore, value: str
) -> None:
    """A filter value is data, never expression text: whatever it holds (quotes,
    backslashes, brackets, 'or'), equality finds the row stored with it, and only it."""
    rows = [
        Document(page_content="target", metadata={"document_id": "t", "tag": value}),
        Document(page_content="decoy", metadata={"document_id": "u", "tag": value + "x"}),
    ]
    run_sync(property_store.add_documents(rows, embeddings=[[1, 0, 0, 0], [0, 1, 0, 0]]))
    hits = run_sync(
        property_store.similarity_search_by_vector([1, 1, 0, 0], limit=10, filter={"tag": value})
    )
    assert [h.content for h in hits] == ["target"]


def test_cli_ingest_and_ask_on_milvus_lite(tmp_path: Path) -> None:
    """The README's main job with ``--store milvus:FILE``, in fresh processes."""
    store = f"milvus:{tmp_path / 'milvus.db'}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "parrot_parents", *args, "--store", store],
            capture_output=True,
            text=True,
            timeout=300,
        )

    # A folder of the README's corpus, with only the document the question is about (the
    # other four cost a third of the test and are found by the PostgreSQL CLI tests).
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(REPO_ROOT / "examples" / "corpus" / "employee-handbook.md", corpus)
    ingest = cli("ingest", str(corpus))
    assert ingest.returncode == 0, ingest.stderr
    assert "ingested 1 document(s)" in ingest.stdout
    asked = cli("ask", "How will I be paid, and when?", "--expand", "--json")
    assert asked.returncode == 0, asked.stderr
    out = json.loads(asked.stdout)
    assert out["meta"]["expanded"] is True
    assert "parent_chunk" in {p["kind"] for p in out["passages"]}
    for p in out["passages"]:
        source = (REPO_ROOT / "examples" / "corpus" / p["document_id"]).read_text("utf-8")
        assert source[p["start_index"] : p["end_index"]] == p["text"]
    bad = cli("ask", "x", "--dsn", "postgresql://nobody@nowhere/db")
    assert bad.returncode != 0 and "--dsn is for PostgreSQL" in bad.stderr


async def test_pseudo_relevance_feedback_is_refused_before_the_model_loads(
    uri: str, embeddings: Any
) -> None:
    from parrot_parents.stores.search_options import PRF, Fusion

    s = MilvusStore(uri, unique_table("mv"), embedding=embeddings)
    for mode in ("lexical", "hybrid"):
        with pytest.raises(ConfigurationError, match=r"pseudo-relevance feedback \(prf\)"):
            await s.similarity_search("notice", search_mode=mode, fusion=Fusion(prf=PRF()))
