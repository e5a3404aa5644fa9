"""Metadata filters to Milvus expressions (no Milvus needed)."""

from __future__ import annotations

import pytest

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.milvus.filters import in_list, literal, translate_filter


def test_plain_equality_and_operators() -> None:
    assert translate_filter(None) == ""
    assert translate_filter({"source": "a.md", "n": 3}) == (
        '(metadata["source"] == "a.md") and (metadata["n"] == 3)'
    )
    assert translate_filter({"year": {"$gte": 2020, "$lt": 2024}}) == (
        '(metadata["year"] >= 2020) and (metadata["year"] < 2024)'
    )
    assert translate_filter({"t": {"$in": ["a", "b"]}, "u": {"$nin": [1]}}) == (
        '((metadata["t"] == "a" or metadata["t"] == "b")) and ((metadata["u"] != 1))'
    )
    assert translate_filter({"ok": True, "x": {"$ne": 1.5}}) == (
        '(metadata["ok"] == true) and (metadata["x"] != 1.5)'
    )


def test_literals_escape_quotes_and_backslashes() -> None:
    assert literal('say "hi"') == '"say \\"hi\\""'
    assert literal("a\\b") == '"a\\\\b"'
    assert literal('x" or id != "') == '"x\\" or id != \\""'
    assert in_list("id", ["a", 'b"']) == 'id in ["a", "b\\""]'


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"a": {"$or": [1]}}, "operator '\\$or' is not supported on Milvus"),
        ({"a": {"$like": "x%"}}, "not supported"),
        ({"$and": [{"a": 1}]}, "filter key '\\$and'"),
        ({'a"] or 1==1 or m["': 1}, "filter key"),
        ({"a": {"$in": []}}, "non-empty list"),
        ({"a": {"$in": "abc"}}, "non-empty list"),
        ({"a": {}}, "empty operator dict"),
        ({"a": [1, 2]}, "strings, numbers or booleans"),
        ({"a": None}, "strings, numbers or booleans"),
        ({"a": float("nan")}, "finite"),
        ({"a": "line\nbreak"}, "control character"),
    ],
)
def test_unsupported_filters_are_configuration_errors(bad: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        translate_filter(bad)


def test_not_a_dict() -> None:
    with pytest.raises(ConfigurationError, match="filter must be a dict"):
        translate_filter(["a"])  # type: ignore[arg-type]
