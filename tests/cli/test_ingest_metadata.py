"""``ingest --metadata KEY=VALUE`` and ``--partition-key``: parsed and checked before any
model loads or anything connects."""

from __future__ import annotations

import pytest

from parrot_parents.cli.ingest import document_metadata
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.backends import open_store


def test_values_read_as_json_when_they_parse_else_as_strings() -> None:
    assert document_metadata(["tenant=acme", "year=2024", "public=true", "code=007x"]) == {
        "tenant": "acme",
        "year": 2024,
        "public": True,
        "code": "007x",
    }
    assert document_metadata(['tenant="2024"', "note=a=b"]) == {"tenant": "2024", "note": "a=b"}


@pytest.mark.parametrize(
    ("pair", "message"),
    [("tenant", "KEY=VALUE"), ("=acme", "KEY=VALUE"), ("document_id=x", "hierarchy writes")],
)
def test_a_bad_pair_is_refused(pair: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        document_metadata([pair])


def test_a_partition_key_is_for_postgresql() -> None:
    with pytest.raises(ConfigurationError, match="partition key is for PostgreSQL"):
        open_store("milvus:./never.db", partition_key="tenant")
    with pytest.raises(ConfigurationError, match="partition_key"):
        open_store(None, dsn="postgresql://u@h/db", partition_key="$bad")
