"""HNSW recall@10 against exact search, and the planner's choice per ef_search.

* **Recall**: per query, the exact top 10 (``enable_indexscan = off``: a sequential scan
  and a top-N sort over every vector) against the HNSW top 10 at each ``ef_search``
  (``enable_seqscan = off``, so the index is what is measured even where the planner would
  not pick it; the EXPLAIN check says where it would not). A hit counts when its distance
  is within the exact 10th distance (ties of duplicate texts are not misses).
  ``hnsw.iterative_scan`` is the product's default throughout.
* **EXPLAIN**: the scan node the planner picks for a statement under ``SET LOCAL
  hnsw.ef_search``, for the bare kNN statement and for the statements the product itself
  sent (captured from its SQLAlchemy engine).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import asyncpg
import numpy as np

__all__ = [
    "PlanNode",
    "exact_ids",
    "explain_asyncpg",
    "explain_captured",
    "recall_at_10",
    "scan_node",
]

K = 10


def knn_sql(table: str) -> str:
    """The bare kNN statement (children only: parents have no vector)."""
    return (
        f"SELECT id, document, cmetadata, embedding <=> $1 AS distance FROM {table}"
        " WHERE embedding IS NOT NULL ORDER BY embedding <=> $1 LIMIT 10"
    )


async def recall_at_10(
    conn: asyncpg.Connection,
    table: str,
    queries: np.ndarray,
    ef_values: list[int],
    iterative_scan: str,
) -> dict[int, float]:
    """Mean recall@10 of the HNSW index of ``table`` at each ``ef_search``."""
    sql = (
        f"SELECT embedding <=> $1 AS d FROM {table}"
        " WHERE embedding IS NOT NULL ORDER BY embedding <=> $1 LIMIT 10"
    )
    exact: list[float] = []
    for q in queries:
        async with conn.transaction():
            await _custom_plans(conn)
            await conn.execute("SET LOCAL enable_indexscan = off")
            rows = await conn.fetch("/* exact */ " + sql, q)
        exact.append(float(rows[-1]["d"]))
    out: dict[int, float] = {}
    for ef in ef_values:
        hits = 0
        for q, kth in zip(queries, exact, strict=True):
            async with conn.transaction():
                await _custom_plans(conn)
                await conn.execute("SET LOCAL enable_seqscan = off")
                await conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
                await conn.execute(
                    "SELECT set_config('hnsw.iterative_scan', $1, true)", iterative_scan
                )
                rows = await conn.fetch(sql, q)
            hits += sum(1 for r in rows if float(r["d"]) <= kth + 1e-6)
        out[ef] = hits / (K * len(queries))
    return out


async def _custom_plans(conn: asyncpg.Connection) -> None:
    """Plan every execution under the settings of the moment: a prepared statement's
    cached generic plan would otherwise outlive a change of ``enable_*``/``ef_search``."""
    await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")


async def exact_ids(conn: asyncpg.Connection, table: str, vector: np.ndarray) -> set[str]:
    """The ids of the exact top 10 (a sequential scan) of the product's ``table``."""
    async with conn.transaction():
        await _custom_plans(conn)
        await conn.execute("SET LOCAL enable_indexscan = off")
        rows = await conn.fetch("/* exact ids */ " + knn_sql(table), vector)
    return {r["id"] for r in rows}


@dataclass
class PlanNode:
    """The scan that reads the table, as EXPLAIN reports it."""

    node: str
    index: str | None

    @property
    def uses_hnsw(self) -> bool:
        return self.index is not None and "hnsw" in self.index

    def __str__(self) -> str:
        return f"{self.node} using {self.index}" if self.index else self.node


def scan_node(plan: dict[str, Any], table: str) -> PlanNode:
    """The first node (depth first) that scans ``table``."""
    stack = [plan]
    while stack:
        node = stack.pop(0)
        if node.get("Relation Name") == table:
            return PlanNode(node["Node Type"], node.get("Index Name"))
        stack[:0] = node.get("Plans", [])
    return PlanNode("(no scan of the table)", None)


async def explain_asyncpg(
    conn: asyncpg.Connection, sql: str, args: tuple[Any, ...], ef: int, table: str
) -> PlanNode:
    """The planner's scan of ``table`` for ``sql`` under ``SET LOCAL hnsw.ef_search``."""
    async with conn.transaction():
        await _custom_plans(conn)
        await conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
        raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
    return scan_node(json.loads(raw)[0]["Plan"], table)


async def explain_captured(
    engine: Any, statement: str, params: Any, ef: int, table: str
) -> PlanNode:
    """The same for a statement the product sent, with its own driver-level parameters,
    through its own engine (so the parameters are bound as the product bound them)."""
    async with engine.connect() as c:
        await c.exec_driver_sql(f"SET LOCAL hnsw.ef_search = {int(ef)}")
        result = await c.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", params)
        raw = result.scalar_one()
        await c.rollback()
    plan = raw if isinstance(raw, list) else json.loads(raw)
    return scan_node(plan[0]["Plan"], table)
