"""The filters the filter benchmark asks with, and their exact answers.

Every case keeps about a given share of the synthetic collection's children
(:mod:`benchmarks.latency._scale.data`: ``rank`` 0..999, ``tenant`` of 100, ``kind`` of
20, ``region`` of 5, ``half`` of 2, each drawn independently of the vectors), a different
set of values for each query ``i``:

* ``equality``: one value of the key with that many values (``rank`` for 0.1 %,
  ``tenant`` 1 %, ``kind`` 5 %, ``region`` 20 %, ``half`` 50 %), a JSON containment;
* ``in``: ``{"rank": {"$in": [...]}}`` with 1, 10, 50, 200 or 500 values;
* ``range``: ``{"rank": {"$gte": a, "$lt": a + w}}``, ``w`` of 1, 10, 50, 200 or 500;
* ``scope``: a bot scoped to ``{"half": "h0"}`` asked with a range on ``rank`` twice as
  wide (the scope ANDed with the call's filter).

:class:`Children` holds every child's vector and keys, read once, so that the exact
filtered ranking of a query is a masked product in numpy, not a scan of the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "KINDS",
    "SCOPE",
    "SELECTIVITIES",
    "SYNTHETIC_COLUMNS",
    "Case",
    "Children",
    "case",
    "set_filter_keys",
]

#: Shares of the children a filter keeps, in per mille (0.1 %, 1 %, 5 %, 20 %, 50 %).
SELECTIVITIES = (1, 10, 50, 200, 500)
KINDS = ("equality", "in", "range", "scope")
#: The scope of the scoped bot (half of the children).
SCOPE = {"half": "h0"}
_EQUALITY = {1: ("rank", 1000), 10: ("tenant", 100), 50: ("kind", 20), 200: ("region", 5)}
#: The synthetic collection's keys, as :meth:`Children.read` reads them (``int`` or ``text``).
SYNTHETIC_COLUMNS = {
    "rank": "int",
    "tenant": "text",
    "kind": "text",
    "region": "text",
    "half": "text",
}


@dataclass(frozen=True)
class Case:
    """One query's filter: ``filter`` (the call's), ``scope`` (the scoped bot's, when it
    is asked of one) and ``keeps`` (which children it keeps, over :class:`Children`'
    columns)."""

    filter: dict[str, Any]
    scope: dict[str, Any] | None
    keeps: Callable[[Children], np.ndarray]

    @property
    def scoped(self) -> bool:
        """Whether the scoped bot asks it."""
        return self.scope is not None

    @property
    def whole(self) -> dict[str, Any]:
        """The filter a search of the store is given (the scope ANDed in)."""
        return {"$and": [self.scope, self.filter]} if self.scope is not None else self.filter


def _value(key: str, values: int, i: int) -> int | str:
    v = (i * 37 + 11) % values
    return (
        v
        if key == "rank"
        else {
            "tenant": f"t{v:02d}",
            "kind": f"k{v:02d}",
            "region": f"r{v}",
            "half": f"h{v}",
        }[key]
    )


def case(kind: str, permille: int, i: int) -> Case:
    """The filter of ``kind`` keeping about ``permille`` ‰ of the children, for query
    ``i`` (its values move with ``i``)."""
    if kind == "equality":
        key, values = _EQUALITY.get(permille, ("half", 2))
        value = _value(key, values, i)
        return Case({key: value}, None, lambda c: c.keys[key] == value)
    if kind == "in":
        start = (i * 37) % 1000
        ranks = sorted({(start + 2 * j) % 1000 for j in range(permille)})
        chosen = np.zeros(1000, dtype=bool)
        chosen[ranks] = True
        return Case({"rank": {"$in": ranks}}, None, lambda c: chosen[c.keys["rank"]])
    if kind == "range":
        low = (i * 37) % (1001 - permille)
        high = low + permille
        return Case(
            {"rank": {"$gte": low, "$lt": high}},
            None,
            lambda c: (c.keys["rank"] >= low) & (c.keys["rank"] < high),
        )
    if kind == "scope":
        width = min(1000, 2 * permille)
        low = (i * 37) % (1001 - width)
        high = low + width
        return Case(
            {"rank": {"$gte": low, "$lt": high}},
            SCOPE,
            lambda c: (
                (c.keys["half"] == SCOPE["half"])
                & (c.keys["rank"] >= low)
                & (c.keys["rank"] < high)
            ),
        )
    raise ValueError(f"unknown filter kind {kind!r}")


def _array(vector: Any) -> np.ndarray:
    """A vector as pgvector's codec gives it (an array, or a ``Vector``), as float32."""
    to_numpy = getattr(vector, "to_numpy", None)
    return np.asarray(vector if to_numpy is None else to_numpy(), dtype=np.float32)


class Children:
    """Every child of a table: ids, unit vectors (n, d) and the filter keys as arrays."""

    def __init__(self, ids: list[str], vectors: np.ndarray, keys: dict[str, np.ndarray]) -> None:
        self.ids = np.array(ids, dtype=object)
        self.vectors = vectors
        self.keys = keys

    @classmethod
    async def read(cls, conn: Any, table: str, columns: dict[str, str]) -> Children:
        """Read the children of ``table`` on an asyncpg connection with pgvector's codec,
        in slices (a million rows of vectors in one result would hold twice the memory),
        with the metadata keys of ``columns`` (``{key: "int" | "text"}``; the names are
        the benchmark's own, not input). Vectors are scaled to unit length."""
        ids: list[str] = []
        parts: list[np.ndarray] = []
        cols: dict[str, list[Any]] = {k: [] for k in columns}
        keys_sql = ", ".join(
            f"(cmetadata->>'{k}')::int AS \"{k}\""
            if t == "int"
            else f"cmetadata->>'{k}' AS \"{k}\""
            for k, t in columns.items()
        )
        last = ""
        while True:
            # A row indexing a child (``indexes``: the default strategy writes one per
            # child) stands for that child, as the store's results do.
            rows = await conn.fetch(
                f"SELECT id, coalesce(cmetadata->>'indexes', id) AS child, embedding, {keys_sql}"
                f" FROM {table}"
                " WHERE embedding IS NOT NULL AND id > $1 ORDER BY id LIMIT 100000",
                last,
            )
            if not rows:
                break
            ids += [r["child"] for r in rows]
            parts.append(np.stack([_array(r["embedding"]) for r in rows]))
            for k, v in cols.items():
                v += [r[k] for r in rows]
            last = rows[-1]["id"]
        keys = {
            k: np.array(v, dtype=np.int32 if columns[k] == "int" else object)
            for k, v in cols.items()
        }
        vectors = np.concatenate(parts)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return cls(ids, vectors, keys)

    def top(self, vector: np.ndarray, kept: np.ndarray, k: int = 10) -> set[str]:
        """The ids of the ``k`` kept children nearest ``vector`` by cosine (exact; a child
        with several rows ranks by its nearest)."""
        where = np.flatnonzero(kept)
        sims = self.vectors[where] @ (vector / max(float(np.linalg.norm(vector)), 1e-12))
        found: dict[str, None] = {}
        for row in where[np.argsort(-sims, kind="stable")]:
            found.setdefault(str(self.ids[row]), None)
            if len(found) == k:
                break
        return set(found)


async def set_filter_keys(
    conn: Any, table: str, keys: list[str], store_factory: Any, graphs: bool = True
) -> list[str]:
    """Give ``table`` exactly the filter ``keys``: the others' indexes, statistics and
    value graphs dropped (raw SQL on ``conn``), the missing ones added by a store opened
    with them (the product's own path, which builds the value graphs too). ``graphs``
    False: every value graph dropped and none built. Returns the keys it then has,
    sorted."""
    import json

    rows = await conn.fetch(
        "SELECT obj_description(i.indexrelid, 'pg_class') AS note FROM pg_index i"
        " WHERE i.indrelid = to_regclass($1)",
        table,
    )
    had = []
    for r in rows:
        note = json.loads(r["note"]) if r["note"] and r["note"].startswith("{") else {}
        key = note.get("filter_key") if isinstance(note, dict) else None
        if isinstance(key, str):
            had.append(key)
        if isinstance(key, str) and key not in keys:
            # Imported here: a checkout from before filter keys has none to drop.
            from parrot_parents.stores.postgres.collections.filter_keys import (
                filter_key_index_name,
                filter_key_statistics_name,
            )

            index = filter_key_index_name(table, key)
            await conn.execute(f'DROP INDEX "{index}"')
            stats = filter_key_statistics_name(table, key)
            await conn.execute(f'DROP STATISTICS IF EXISTS "{stats}"')
    for key in had:
        if graphs and key in keys:
            continue
        from parrot_parents.stores.postgres.collections.partitions import (
            partition_index_name,
            partition_values,
        )

        stored = await conn.fetch(
            f"SELECT DISTINCT (cmetadata -> $1)::text AS v FROM {table} WHERE cmetadata ? $1", key
        )
        values = partition_values(({key: json.loads(r["v"])} for r in stored), key)
        for value in values:
            for kind in ("part", "partl"):
                name = partition_index_name(table, key, value, kind)
                await conn.execute(f'DROP INDEX IF EXISTS "{name}"')
    if keys:
        options: dict[str, Any] = {"filter_keys": keys}
        if not graphs:
            from parrot_parents.stores.postgres.collections.schema import HNSWIndex

            options["hnsw"] = HNSWIndex(value_graph_floor=None)
        store = store_factory(table, **options)
        await store.connect()
        await store.close()
    return sorted(keys)
