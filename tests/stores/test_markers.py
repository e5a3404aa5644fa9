from __future__ import annotations

import pytest

from parrot_parents.stores.records.markers import is_parent, normalize_markers, row_kind


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, {"is_chunk": True}),
        ({"parent_document_id": "p"}, {"parent_document_id": "p", "is_chunk": True}),
        ({"is_full_document": True}, {"is_full_document": True, "is_chunk": False}),
        ({"is_full_document": "True"}, {"is_full_document": True, "is_chunk": False}),
        ({"document_type": "parent_chunk"}, {"document_type": "parent_chunk", "is_chunk": False}),
        (
            {"document_type": "parent"},
            {"document_type": "parent", "is_full_document": True, "is_chunk": False},
        ),
        ({"is_chunk": "false"}, {"is_chunk": True}),
        ({"is_full_document": "maybe"}, {"is_chunk": True}),
    ],
)
def test_normalize_markers(given: dict, expected: dict) -> None:
    assert normalize_markers(given) == expected


@pytest.mark.parametrize(
    "meta",
    [{}, {"is_full_document": 1}, {"document_type": "parent_chunk"}, {"document_type": "x"}],
)
def test_normalize_markers_is_idempotent(meta: dict) -> None:
    once = normalize_markers(meta)
    assert normalize_markers(once) == once


def test_normalize_markers_does_not_mutate_input() -> None:
    meta = {"is_full_document": "true"}
    normalize_markers(meta)
    assert meta == {"is_full_document": "true"}


def test_row_kind() -> None:
    assert row_kind({"is_chunk": True}) == "child"
    assert row_kind({"is_full_document": True}) == "parent"
    assert row_kind({"document_type": "parent_chunk"}) == "parent_chunk"
    assert is_parent({"document_type": "parent"})
    assert not is_parent({"is_full_document": False})
