"""Collection layout of a Milvus collection pair (children, parents).

Children (``<name>``) hold the returned ``text``, the searched ``search_text`` (the child's
text or its indexed row's; embedded, and the input of a BM25 function into ``sparse``),
``via``, the hierarchy keys as scalar fields and the whole ``metadata`` as JSON. Parents
(``<name>__parents``) are read by primary key only; their ``no_vector`` holds the constant
``{0: 1.0}`` because Milvus refuses a collection without a vector field and Milvus Lite 3.2
accepts neither nullable nor empty vectors. A collection made before ``search_text`` still
works (:data:`SEARCH_TEXT`). Fields and indexes: docs/scale-out.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parrot_parents.errors import ConfigurationError, SchemaMismatchError, StoreError

__all__ = [
    "CHILD_FIELDS",
    "MAX_ID_BYTES",
    "MAX_TEXT_BYTES",
    "PARENTS_SUFFIX",
    "PARENT_FIELDS",
    "PLACEHOLDER_VECTOR",
    "SEARCH_TEXT",
    "VIA",
    "children_schema",
    "ensure_collections",
    "parents_schema",
]

PARENTS_SUFFIX = "__parents"
MAX_TEXT_BYTES = 65_535  # Milvus VARCHAR limit
MAX_ID_BYTES = 1_024
#: Scalar hierarchy fields, and what a row lacking the key stores there.
SCALAR_DEFAULTS: dict[str, Any] = {
    "document_id": "",
    "parent_document_id": "",
    "chunk_index": -1,
    "start_index": -1,
}
CHILD_FIELDS = ["id", "text", "metadata"]
#: The searched text of a child (BM25 input); absent from collections made before it.
SEARCH_TEXT = "search_text"
#: The indexed row a child is searched through; absent where ``search_text`` is.
VIA = "via"
PARENT_FIELDS = ["id", "text", "metadata"]
PLACEHOLDER_VECTOR = {0: 1.0}
#: The field Milvus partitions a keyed collection's children by (its partition key): the
#: row's value of the store's ``partition_key`` as
#: :func:`~parrot_parents.stores.milvus.filters.partition_text` writes it.
PARTITION_FIELD = "partition_value"
#: Longest JSON text of a partition value kept, in bytes; a longer value gets no partition.
MAX_PARTITION_BYTES = 1024
#: The collection property that records the partition key (Milvus Lite keeps properties,
#: not descriptions).
KEY_PROPERTY = "parrot_parents.partition_key"


def recorded_key(properties: object) -> str | None:
    """The partition key a children collection's properties record, or None."""
    key = properties.get(KEY_PROPERTY) if isinstance(properties, dict) else None
    return key if isinstance(key, str) and key else None


def children_schema(
    client: Any, dimension: int, partition_key: str | None = None
) -> tuple[Any, Any]:
    """``(schema, index_params)`` of the children collection; with ``partition_key``, its
    :data:`PARTITION_FIELD` is Milvus's partition key (the key itself is recorded in the
    collection's :data:`KEY_PROPERTY`)."""
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=MAX_ID_BYTES)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
    schema.add_field(SEARCH_TEXT, DataType.VARCHAR, max_length=MAX_TEXT_BYTES, enable_analyzer=True)
    schema.add_field(VIA, DataType.VARCHAR, max_length=MAX_ID_BYTES)
    schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=dimension)
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("document_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
    schema.add_field("parent_document_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
    schema.add_field("chunk_index", DataType.INT64)
    schema.add_field("start_index", DataType.INT64)
    schema.add_field("metadata", DataType.JSON)
    if partition_key is not None:
        schema.add_field(
            PARTITION_FIELD,
            DataType.VARCHAR,
            max_length=MAX_PARTITION_BYTES,
            is_partition_key=True,
        )
    schema.add_function(
        Function(
            name="text_bm25",
            function_type=FunctionType.BM25,
            input_field_names=[SEARCH_TEXT],
            output_field_names=["sparse"],
        )
    )
    index = client.prepare_index_params()
    index.add_index(field_name="embedding", index_type="AUTOINDEX", metric_type="COSINE")
    index.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    for name in ("document_id", "parent_document_id", "chunk_index"):
        index.add_index(field_name=name, index_type="INVERTED")
    return schema, index


def parents_schema(client: Any) -> tuple[Any, Any]:
    """``(schema, index_params)`` of the parents collection."""
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=MAX_ID_BYTES)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
    schema.add_field("document_id", DataType.VARCHAR, max_length=MAX_ID_BYTES)
    schema.add_field("metadata", DataType.JSON)
    schema.add_field("no_vector", DataType.SPARSE_FLOAT_VECTOR)
    index = client.prepare_index_params()
    index.add_index(field_name="no_vector", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    index.add_index(field_name="document_id", index_type="INVERTED")
    return schema, index


def ensure_collections(
    client: Any,
    names: tuple[str, str],
    dimension: int,
    create: bool,
    uri: str,
    partition_key: str | None = None,
) -> tuple[bool, str | None]:
    """Load the ``(children, parents)`` collections, creating them when missing (unless
    ``create`` is False; a new children collection gets ``partition_key``), and check the
    children's embedding dimension and partition key; ``(whether the children collection
    has search_text, its partition key)``.

    Raises:
        StoreError: a collection is missing and ``create`` is False.
        SchemaMismatchError: the children collection has another embedding dimension.
        ConfigurationError: ``partition_key`` given for a collection with another key or
            none (Milvus cannot add a partition key to a collection).
    """
    children, parents = names
    builders: tuple[tuple[str, Callable[[], tuple[Any, Any]]], ...] = (
        (children, lambda: children_schema(client, dimension, partition_key)),
        (parents, lambda: parents_schema(client)),
    )
    for name, build in builders:
        if client.has_collection(name):
            # A collection written by another process starts out released.
            client.load_collection(name)
            continue
        if not create:
            raise StoreError(
                f"collection {name!r} does not exist in Milvus at {uri!r}",
                hint="ingest into it first; names are case-sensitive",
            )
        schema, index = build()
        keyed = name == children and partition_key is not None
        properties = {KEY_PROPERTY: partition_key} if keyed else {}
        client.create_collection(
            name, schema=schema, consistency_level="Strong", properties=properties
        )
        # Without ``sync``, pymilvus sleeps half a second before its first look at each
        # index it asked for (2.5 s for the five of a children collection), where an
        # empty collection's indexes are ready at once; loading waits for what it needs.
        client.create_index(name, index, sync=False)
        client.load_collection(name)
    described = client.describe_collection(children)
    key = recorded_key(described.get("properties"))
    if partition_key is not None and key != partition_key:
        raise ConfigurationError(
            f"Milvus collection {children!r} is partitioned by {key!r}, not {partition_key!r}"
            if key is not None
            else f"Milvus collection {children!r} has no partition key",
            hint="open it without partition_key (Milvus cannot add one to a collection)",
        )
    fields = described.get("fields", [])
    has_search_text = any(f.get("name") == SEARCH_TEXT for f in fields)
    dims = [f.get("params", {}).get("dim") for f in fields if f.get("name") == "embedding"]
    if not dims or int(dims[0]) != dimension:
        found = dims[0] if dims else None
        raise SchemaMismatchError(
            f"collection {children!r} has embedding dimension {found}, the model has {dimension}",
            expected_dimension=dimension,
            actual_dimension=int(dims[0]) if dims and dims[0] is not None else None,
            hint="use the model the collection was built with, or another collection",
        )
    return has_search_text, key
