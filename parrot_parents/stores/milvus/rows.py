"""Rows as Milvus entities: checked against the VARCHAR limits, indexed rows folded into
their children, split into the children's and the parents' collections."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.milvus.filters import partition_text
from parrot_parents.stores.milvus.schema import (
    MAX_ID_BYTES,
    MAX_TEXT_BYTES,
    PARTITION_FIELD,
    PLACEHOLDER_VECTOR,
    SCALAR_DEFAULTS,
    SEARCH_TEXT,
    VIA,
)
from parrot_parents.stores.protocols import Vectors
from parrot_parents.stores.records.markers import INDEXES, is_indexed, is_parent
from parrot_parents.stores.records.rows import prepare_rows
from parrot_parents.stores.resolve import INDEXED_KIND

__all__ = ["FOLDED_KIND", "entities", "fold", "milvus_rows"]

#: The one kind of indexed row a child can be searched through here (one per child).
FOLDED_KIND = "context"


def milvus_rows(
    documents: Sequence[Document], embeddings: Vectors | None, dimension: int
) -> list[dict[str, Any]]:
    """:func:`~parrot_parents.stores.records.rows.prepare_rows`, each checked to fit.

    Raises:
        ConfigurationError: as ``prepare_rows``, or an id or text over Milvus's VARCHAR
            limit (:data:`MAX_ID_BYTES`, :data:`MAX_TEXT_BYTES` bytes).
    """
    rows = prepare_rows(documents, embeddings, dimension)
    for row in rows:
        if len(row["id"].encode("utf-8")) > MAX_ID_BYTES:
            raise ConfigurationError(f"row id {row['id'][:80]!r}... is over {MAX_ID_BYTES} bytes")
        if len(row["document"].encode("utf-8")) > MAX_TEXT_BYTES:
            raise ConfigurationError(
                f"row {row['id']!r} holds {len(row['document'].encode('utf-8'))} bytes of "
                f"text; Milvus keeps at most {MAX_TEXT_BYTES}",
                hint="ingest with a smaller parent threshold / parent size",
            )
    return rows


def fold(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` without their indexed rows, each folded into the child it stands
    for: the child's ``search_text`` becomes the row's text (its vector is then made
    from that text) and its ``via`` the row's id.

    Raises:
        ConfigurationError: an indexed row of another kind than ``context``, a second
            one for the same child, or one whose child is not among ``rows``.
    """
    by_id = {r["id"]: r for r in rows if not is_indexed(r["cmetadata"])}
    kept: list[dict[str, Any]] = []
    for row in rows:
        meta = row["cmetadata"]
        if not is_indexed(meta):
            kept.append(row)
            continue
        target = by_id.get(str(meta.get(INDEXES)))
        kind = meta.get(INDEXED_KIND)
        problem = None
        if kind != FOLDED_KIND:
            problem = f"is a {kind!r} row; Milvus keeps one searched text per child"
        elif target is None or is_parent(target["cmetadata"]):
            problem = f"stands for {meta.get(INDEXES)!r}, which is no child in this write"
        elif SEARCH_TEXT in target:
            problem = f"is a second searched text for child {target['id']!r}"
        if problem is not None:
            raise ConfigurationError(
                f"indexed row {row['id']!r} {problem}",
                hint="on Milvus use contextual:extractive (the default), contextual, or "
                "a free strategy (plain, parent-document, sentence-window, hierarchical)",
            )
        assert target is not None
        target[SEARCH_TEXT] = row["document"]
        target[VIA] = row["id"]
        target["embedding"] = None  # the vector of the searched text, as on PostgreSQL
    return kept


def entities(
    rows: list[dict[str, Any]], search_text: bool, partition_key: str | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(children, parents)`` as Milvus entities; ``search_text``: whether the children
    collection has the ``search_text`` and ``via`` fields; ``partition_key``: the
    collection's, whose value fills
    :data:`~parrot_parents.stores.milvus.schema.PARTITION_FIELD` as
    :func:`~parrot_parents.stores.milvus.filters.partition_text` writes it."""
    children, parents = [], []
    for row in rows:
        meta = row["cmetadata"]
        scalars = {
            k: (meta.get(k) if isinstance(meta.get(k), type(d)) else d)
            for k, d in SCALAR_DEFAULTS.items()
        }
        entity = {"id": row["id"], "text": row["document"], "metadata": meta}
        if is_parent(meta):
            entity.update(document_id=scalars["document_id"], no_vector=PLACEHOLDER_VECTOR)
            parents.append(entity)
            continue
        if search_text:
            entity.update({SEARCH_TEXT: row.get(SEARCH_TEXT, row["document"])})
            entity.update({VIA: row.get(VIA, "")})
        entity.update(scalars, embedding=[float(x) for x in row["embedding"]])
        if partition_key is not None:
            entity[PARTITION_FIELD] = partition_text(meta.get(partition_key))
        children.append(entity)
    return children, parents
