"""Metadata filters: the langchain-postgres operators, applied in SQL."""

from __future__ import annotations

import math

import pytest
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.filters import validate_filter
from parrot_parents.stores.postgres import PgVectorStore

ROWS = [
    ("A", {"year": 2021, "topic": "pay", "source": "a.md", "tags": ["x"], "pages": 12}),
    ("B", {"year": 2022, "topic": "Pay rises", "source": "b.md"}),
    ("C", {"year": 2023, "topic": "leave", "source": "c.md", "draft": True, "pages": 300}),
    ("D", {"year": "2024", "topic": "travel", "source": "d.md"}),  # a string, not a number
    ("E", {"year": 10, "topic": "misc", "source": "e.md"}),
]


@pytest.fixture
async def filled(store: PgVectorStore) -> PgVectorStore:
    docs = [
        Document(page_content=f"document {d} about {m['topic']}", metadata={**m, "document_id": d})
        for d, m in ROWS
    ]
    dim = store.dimension
    await store.add_documents(docs, embeddings=[[1.0] + [0.0] * (dim - 1)] * len(docs))
    return store


async def _ids(store: PgVectorStore, flt: dict) -> set[str]:
    vector = [1.0] + [0.0] * (store.dimension - 1)
    hits = await store.similarity_search_by_vector(vector, limit=50, filter=flt)
    return {h.metadata["document_id"] for h in hits}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        # Operators, not literal values: as JSON containment these would match nothing.
        ({"year": {"$gte": 2022}}, {"B", "C"}),
        ({"document_id": {"$in": ["A", "B"]}}, {"A", "B"}),
        # Plain equality keeps its containment meaning.
        ({"source": "a.md"}, {"A"}),
        ({"tags": ["x"]}, {"A"}),
        ({"year": {"$eq": 2022}}, {"B"}),
        ({"year": {"$ne": 2022}}, {"A", "C", "D", "E"}),
        ({"year": {"$lt": 2022}}, {"A", "E"}),  # numbers compare as numbers: 10 < 2022
        ({"year": {"$lte": 2022}}, {"A", "B", "E"}),
        ({"year": {"$gt": 2022}}, {"C"}),  # "2024" is a string: not a number
        ({"year": {"$gt": "2023"}}, {"D"}),  # strings compare as text
        ({"year": {"$between": [2021, 2022]}}, {"A", "B"}),
        ({"year": {"$nin": [2021, 2022]}}, {"C", "D", "E"}),
        ({"draft": {"$exists": True}}, {"C"}),
        ({"draft": {"$exists": False}}, {"A", "B", "D", "E"}),
        ({"topic": {"$like": "Pay%"}}, {"B"}),
        ({"topic": {"$ilike": "pay%"}}, {"A", "B"}),
        ({"$or": [{"source": "a.md"}, {"year": {"$gt": 2022}}]}, {"A", "C"}),
        ({"$and": [{"year": {"$gte": 2021}}, {"topic": {"$ilike": "%pay%"}}]}, {"A", "B"}),
        ({"$not": {"year": {"$gte": 2022}}}, {"A", "D", "E"}),
        # A row without the key matches a negation, as it matches $ne (only A and C have
        # pages): an ordering or a pattern on a missing key is not true, so its $not is.
        ({"pages": {"$lt": 100}}, {"A"}),
        ({"$not": {"pages": {"$lt": 100}}}, {"B", "C", "D", "E"}),
        ({"$not": {"pages": {"$like": "1%"}}}, {"B", "C", "D", "E"}),
        ({"$not": [{"pages": {"$gt": 100}}, {"year": {"$gt": 2022}}]}, {"A", "B", "D", "E"}),
        ({"$not": {"$or": [{"pages": {"$lt": 100}}, {"source": "b.md"}]}}, {"C", "D", "E"}),
        ({"year": {"$gte": 2021, "$lt": 2023}}, {"A", "B"}),
        ({"document_id": {"$in": []}}, set()),
    ],
)
async def test_filter_operators(filled: PgVectorStore, flt: dict, expected: set[str]) -> None:
    assert await _ids(filled, flt) == expected


@pytest.mark.parametrize(
    ("flt", "needle"),
    [
        ({"year": {"$regex": "x"}}, "$regex"),
        ({"$nor": [{"a": 1}]}, "$nor"),
        ({"year": {"$gt": math.nan}}, "finite"),
        ({"year": math.inf}, "finite"),
        ({"year": float("1e400")}, "finite"),
        ({"a\x00": 1}, "NUL"),
        ({"a": "x\x00"}, "NUL"),
        ({"a": {"$in": "x"}}, "list"),
        ({"a": {"$gt": True}}, "number or a string"),
        ({"a": 10**30}, "64 bits"),
        ({"a": {"$between": [1, "z"]}}, "between"),
        # An object under a key holds operators: as containment these match no row.
        ({"document_id": {}}, "an object value must hold operators.*an empty object"),
        ({"year": {"gte": 2022}}, "an object value must hold operators.*got key 'gte'"),
        ({"year": {"$gte": 2022, "lt": 2023}}, "got key 'lt'"),
        ({"$and": {"a": 1}}, "$and needs a list of filters"),
        # Not valid Unicode: PostgreSQL's json input would refuse it, after the model loads.
        ({"source": "\ud800"}, "lone surrogate"),
        ({"\udfff": 1}, "lone surrogate"),
        ({"source": {"$in": ["a", "\ud800"]}}, "lone surrogate"),
        # A lone escape at the end: an error of PostgreSQL's LIKE.
        ({"source": {"$like": "%\\"}}, "ends with the escape character"),
        ({"source": {"$ilike": "x\\\\\\"}}, "ends with the escape character"),
    ],
)
async def test_bad_filters_are_configuration_errors(
    filled: PgVectorStore, flt: dict, needle: str
) -> None:
    with pytest.raises(ConfigurationError, match=needle.replace("$", r"\$")):
        validate_filter(flt)
    with pytest.raises(ConfigurationError):
        await filled.similarity_search("document", filter=flt)


@pytest.mark.parametrize(
    ("flt", "unestimated"),
    [
        ({"year": 2022}, False),
        ({"year": {"$in": [2021, 2022]}, "draft": {"$exists": True}}, False),
        ({"$not": {"source": "a.md"}}, False),
        ({"year": {"$gte": 2022}}, True),
        ({"year": {"$between": [2021, 2022]}}, True),
        ({"topic": {"$ilike": "pay%"}}, True),
        ({"$or": [{"source": "a.md"}, {"$not": [{"year": {"$lt": 2020}}]}]}, True),
    ],
)
def test_the_conditions_the_planner_cannot_estimate_are_found_at_any_depth(
    flt: dict, unestimated: bool
) -> None:
    from parrot_parents.stores.filters import has_unestimated

    validate_filter(flt)
    assert has_unestimated(flt) is unestimated


def test_the_estimated_part_of_a_filter_is_what_it_ands_without_a_range_or_pattern() -> None:
    from parrot_parents.stores.filters import estimated_part

    flt = {
        "tenant": "a",
        "year": {"$gte": 2020},
        "source": {"$in": ["a", "b"], "$like": "a%"},
        "$and": [{"draft": {"$exists": False}}, {"page": {"$lt": 3}}],
        "$or": [{"x": 1}, {"y": {"$gt": 2}}],
        "$not": {"z": 1},
    }
    validate_filter(flt)
    assert estimated_part(flt) == {
        "tenant": "a",
        "$and": [{"draft": {"$exists": False}}],
        "$not": {"z": 1},
    }
    assert estimated_part({"year": {"$between": [1, 2]}}) == {}
