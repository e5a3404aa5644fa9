# ruff: noqa: E501 - the Markdown tables are written as they appear
"""What a filtered search could plan on: estimates, counts, exact ranking and the HNSW
iterative scan, at several filter selectivities, on one scale table.

Raw SQL on one connection (no product code), on a table that ``python -m benchmarks run
scale --build-only`` built (``bench_scale_100k`` by default; its ``tenant`` metadata has
100 values, so ``k`` tenants OR'ed keep about ``k`` % of the children, each an indexed
``cmetadata @> …`` containment). Per selectivity, over the same query vectors, each near
a sampled child:

* the planner's row estimate of the filtered children (``EXPLAIN``) against the count;
* a capped count (``LIMIT 5001``): what bounding the count would cost;
* exact ranking of the filter's children (the distance written so no index orders it);
* the HNSW iterative scan (``strict_order``, the product's default ``ef_search``) at two
  ``hnsw.max_scan_tuples`` bounds, then at larger ``ef_search`` (the default bound): its
  p50, the fewest rows it returned for a top 10, and its recall@10 against the exact
  ranking of the same children.

Writes the section ``<!-- filtered-plans:start -->`` of ``docs/performance.md`` (for
another table, a section of its own)::

    python -m benchmarks run filtered_plans [--table bench_scale_100k] [--queries 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import numpy as np

from benchmarks.common import REPO_ROOT, machine, replace_section
from benchmarks.latency._scale.data import _QUERY_NOISE
from benchmarks.latency._scale.load import connect_raw

DOC = REPO_ROOT / "docs" / "performance.md"
SELECTIVITY = (1, 3, 10, 30)  # tenants, of 100
SCAN_BOUNDS = (2000, 20000)
LARGER_EF = (400, 1000)  # at pgvector's default bound, 20000


def tenant_filter(i: int, k: int) -> str:
    """The SQL condition keeping ``k`` of the 100 tenants (about ``k`` % of the children),
    a different set for each query ``i``: ``k`` indexed containments OR'ed."""
    return " OR ".join(
        f'cmetadata @> \'{{"tenant": "t{(i * 7 + j * 3) % 100:02d}"}}\'' for j in range(k)
    )


async def _p50(conn: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> tuple[float, list[Any]]:
    """Median wall time of each ``(sql, args)`` run once, in ms, and their rows."""
    times, out = [], []
    for sql, args in calls:
        t = time.perf_counter()
        out.append(await conn.fetch(sql, *args))
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), out


async def measure(dsn: str | None, table: str, queries: int) -> list[str]:
    from parrot_parents.embedded.server import resolve_dsn

    conn = await connect_raw(await asyncio.to_thread(resolve_dsn, dsn))
    from parrot_parents.stores.search_options import HNSWQueryOptions

    ef = HNSWQueryOptions().ef_search
    await conn.execute(f"SET hnsw.iterative_scan = strict_order; SET hnsw.ef_search = {ef}")
    # Queries near the data, as real ones are (a random vector has no near neighbours, so
    # its recall says nothing): a sampled child's vector plus the scale benchmark's query
    # noise (cosine about 0.7 to it).
    rng = np.random.default_rng(0)
    rows = await conn.fetchval(f"SELECT reltuples FROM pg_class WHERE oid = '{table}'::regclass")
    percent = min(100.0, 1000.0 * queries / max(1.0, float(rows)))  # about 10 per query, spread
    sample = await conn.fetch(
        f"SELECT embedding FROM {table} TABLESAMPLE BERNOULLI ({percent}) REPEATABLE (7)"
        f" WHERE embedding IS NOT NULL LIMIT {int(queries)}"
    )
    vectors = []
    for row in sample:
        v = np.asarray(row["embedding"].to_numpy(), dtype=np.float32)
        v = v + _QUERY_NOISE * rng.standard_normal(v.shape[0]).astype(np.float32)
        vectors.append(v / np.linalg.norm(v))
    knn = f"SELECT id FROM {table} WHERE embedding IS NOT NULL AND ({{}}) ORDER BY {{}} LIMIT 10"
    plain = f"SELECT id FROM {table} WHERE embedding IS NOT NULL ORDER BY embedding <=> $1 LIMIT 10"
    await _p50(conn, [(plain, (v,)) for v in vectors])  # warm-up: the index into the cache
    unfiltered, _ = await _p50(conn, [(plain, (v,)) for v in vectors])
    scans = [(ef, b) for b in SCAN_BOUNDS] + [(e, 20000) for e in LARGER_EF]
    head = (
        "| filter | children kept | planner's estimate | capped count p50 ms | exact p50 ms | "
        + " | ".join(
            f"HNSW, ef_search {e}, max_scan_tuples {b}: p50 ms (fewest rows, recall@10)"
            for e, b in scans
        )
        + " |"
    )
    lines = [head, "|---|---:|---:|---:|---:|" + "---:|" * len(scans)]
    for k in SELECTIVITY:
        filters = [tenant_filter(i, k) for i in range(queries)]
        plan = json.loads(
            await conn.fetchval(
                f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {table} WHERE embedding IS NOT NULL AND ({filters[0]})"
            )
        )
        estimate = int(plan[0]["Plan"]["Plan Rows"])
        kept = await conn.fetchval(
            f"SELECT count(*) FROM {table} WHERE embedding IS NOT NULL AND ({filters[0]})"
        )
        count = f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE embedding IS NOT NULL AND ({{}}) LIMIT 5001) s"
        capped, _ = await _p50(conn, [(count.format(f), ()) for f in filters])
        pairs = list(zip(vectors, filters, strict=True))
        exact, truth = await _p50(
            conn, [(knn.format(f, "(embedding <=> $1) + 0"), (v,)) for v, f in pairs]
        )
        cells = []
        for ef_search, bound in scans:
            await conn.execute(
                f"SET hnsw.max_scan_tuples = {bound}; SET hnsw.ef_search = {ef_search}"
            )
            p50, rows = await _p50(
                conn, [(knn.format(f, "embedding <=> $1"), (v,)) for v, f in pairs]
            )
            recall = statistics.mean(
                len({r["id"] for r in got} & {r["id"] for r in want}) / max(1, len(want))
                for got, want in zip(rows, truth, strict=True)
            )
            cells.append(f"{p50:.1f} ({min(len(r) for r in rows)}, {recall:.2f})")
        await conn.execute(f"SET hnsw.ef_search = {ef}")
        lines.append(
            f"| {k} tenant(s), about {k} % | {kept:,} | {estimate:,} | {capped:.1f} | {exact:.1f} | "
            + " | ".join(cells)
            + " |"
        )
    await conn.close()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return [
        *lines,
        "",
        f"Unfiltered kNN on the same connection: p50 {unfiltered:.1f} ms. `{table}`, {queries} query vectors per cell, `ef_search` {ef}. {machine()}. Generated {started}.",
        "",
        "Regenerate with `python -m benchmarks run filtered_plans"
        + ("" if table == "bench_scale_100k" else f" --table {table}")
        + "`.",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", default="bench_scale_100k")
    p.add_argument("--queries", type=int, default=10)
    p.add_argument("--dsn", default=None, help="default: $PARROT_PARENTS_DSN, else embedded")
    args = p.parse_args(argv)
    body = "\n".join(asyncio.run(measure(args.dsn, args.table, args.queries)))
    # One section per table: the 100k table's is the one the text around it discusses.
    name, heading = "filtered-plans", "## Filtered search: what a plan could go on"
    if args.table != "bench_scale_100k":
        name, heading = f"filtered-plans-{args.table}", f"### The same on `{args.table}`"
    replace_section(DOC, name, body, heading=heading)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
