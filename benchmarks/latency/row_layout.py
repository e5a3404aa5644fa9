# ruff: noqa: E501 - the Markdown tables are written as they appear
"""The row layout of a collection: vectors moved out of line (TOAST) against kept in the
row (:mod:`parrot_parents.stores.postgres.collections.layout`), side by side on the same children.

Two copies of a ``scale`` table (``bench_scale_100k`` by default, built by ``python -m
benchmarks run scale --build-only``), filled from it with ``INSERT … SELECT`` and given
the collection's primary key and GIN indexes on ``cmetadata`` and ``lexical``:

* **pgvector's storage**: every column as its type asks (``vector`` is ``EXTERNAL``), the
  layout of a collection created before :mod:`~parrot_parents.stores.postgres.collections.layout`;
* **the product's layout**: :func:`~parrot_parents.stores.postgres.collections.layout.apply_layout` before the
  rows go in.

Raw SQL on one connection, the two tables interleaved query by query, over reads that go
to the row rather than an index:

* exact ranking of a filter's children (1, 3, 10 and 30 % of them: ``k`` of the 100
  ``tenant`` values OR'ed; the distance written so no index orders it);
* the distances of 10 given children (what a search reads for its hits);
* the ``tsvector`` of every child that matches a four-word BM25 query (what BM25 in SQL
  reads for its candidates).

Writes the section ``<!-- row-layout:start -->`` of ``docs/performance.md``::

    python -m benchmarks run row_layout [--table bench_scale_100k] [--queries 15]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.common import REPO_ROOT, machine, replace_section
from benchmarks.latency._scale.load import connect_raw
from benchmarks.latency.filtered_plans import tenant_filter

DOC = REPO_ROOT / "docs" / "performance.md"
LAYOUTS = ("pgvector's storage (vectors out of line)", "the product's layout")
SELECTIVITY = (1, 3, 10, 30)


async def _copy(conn: Any, dsn: str, source: str, name: str, product: bool) -> dict[str, Any]:
    """``name``: a copy of ``source`` in one layout, indexed and analysed; its sizes."""
    await conn.execute(f"DROP TABLE IF EXISTS {name}")
    await conn.execute(
        f"CREATE TABLE {name} (LIKE {source} INCLUDING DEFAULTS INCLUDING GENERATED)"
    )
    # The source may be in either layout: each copy gets its own, explicitly.
    for column, storage in (
        ("embedding", "EXTERNAL"),
        ("cmetadata", "EXTENDED"),
        ("lexical", "EXTENDED"),
    ):
        await conn.execute(f"ALTER TABLE {name} ALTER COLUMN {column} SET STORAGE {storage}")
    if product:
        await _apply_layout(dsn, name)
    started = time.perf_counter()
    await conn.execute(
        f"INSERT INTO {name} (id, embedding, document, cmetadata)"
        f" SELECT id, embedding, document, cmetadata FROM {source}"
    )
    await conn.execute(f"ALTER TABLE {name} ADD PRIMARY KEY (id)")
    await conn.execute(f"CREATE INDEX ON {name} USING gin (cmetadata jsonb_path_ops)")
    await conn.execute(f"CREATE INDEX ON {name} USING gin (lexical) WHERE lexical IS NOT NULL")
    await conn.execute(f"VACUUM ANALYZE {name}")
    took = time.perf_counter() - started
    sizes = await conn.fetchrow(
        "SELECT pg_relation_size(oid) AS heap, pg_relation_size(reltoastrelid) AS toast"
        " FROM pg_class WHERE oid = $1::regclass",
        name,
    )
    return {"heap": sizes["heap"], "toast": sizes["toast"], "load_s": took}


async def _apply_layout(dsn: str, table: str) -> None:
    """The product's own :func:`~parrot_parents.stores.postgres.collections.layout.apply_layout` on ``table``."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from parrot_parents.stores.postgres.collections.layout import apply_layout
    from parrot_parents.stores.postgres.connections.dsn import to_async_dsn

    engine = create_async_engine(to_async_dsn(dsn))
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda c: apply_layout(c, "public", table))
    finally:
        await engine.dispose()


async def _timed(conn: Any, sql: str, *args: Any) -> float:
    async with conn.transaction():
        if "ORDER BY" in sql:
            # Exact ranking: the HNSW index must not order the rows (no index scan at
            # all; the filter's bitmap scan stays).
            await conn.execute("SET LOCAL enable_indexscan = off")
        t = time.perf_counter()
        await conn.fetch(sql, *args)
        return (time.perf_counter() - t) * 1000


async def measure(dsn: str | None, source: str, queries: int) -> list[str]:
    from parrot_parents.embedded.server import resolve_dsn

    dsn = await asyncio.to_thread(resolve_dsn, dsn)
    conn = await connect_raw(dsn)
    names = ("bench_layout_toast", "bench_layout_product")
    built = [await _copy(conn, dsn, source, n, product=i == 1) for i, n in enumerate(names)]
    rng = np.random.default_rng(0)
    vectors = [
        v / np.linalg.norm(v) for v in rng.standard_normal((queries, 384)).astype(np.float32)
    ]
    ids = [
        r["id"] for r in await conn.fetch(f"SELECT id FROM {source} WHERE embedding IS NOT NULL")
    ]
    words = [
        r["word"]
        for r in await conn.fetch(
            f"SELECT word FROM ts_stat('SELECT lexical FROM {source} WHERE lexical IS NOT NULL')"
            " ORDER BY ndoc DESC LIMIT 400"
        )
    ]
    pick = random.Random(0)
    reads: dict[str, Callable[[str, int], tuple[str, tuple[Any, ...]]]] = {}
    for k in SELECTIVITY:
        reads[f"exact ranking, {k} % filter"] = lambda t, i, k=k: (
            f"SELECT id, embedding <=> $1 AS d FROM {t} WHERE embedding IS NOT NULL"
            f" AND ({tenant_filter(i, k)}) ORDER BY (embedding <=> $1) + 0 LIMIT 10",
            (vectors[i],),
        )
    hits = [pick.sample(ids, 10) for _ in range(queries)]
    reads["distances of 10 given hits"] = lambda t, i: (
        f"SELECT id, embedding <=> $1 FROM {t} WHERE id = ANY($2::text[])",
        (vectors[i], hits[i]),
    )
    # Words of middling frequency, as a question's content words are: a few % of the
    # children each.
    bm25 = [" | ".join(pick.sample(words[50:400], 4)) for _ in range(queries)]
    reads["`tsvector` of every BM25 candidate (4 words)"] = lambda t, i: (
        f"SELECT sum(length(ts_filter(setweight(lexical, 'D'), '{{d}}'))), count(*) FROM {t}"
        " WHERE lexical @@ to_tsquery('english', $1)",
        (bm25[i],),
    )
    for read in reads.values():  # warm-up: both tables into the cache as far as they fit
        for t in names:
            await _timed(conn, *_call(read, t, 0))
    times: dict[tuple[str, str], list[float]] = {}
    for what, read in reads.items():
        for i in range(queries):
            order = list(names)
            random.Random(i).shuffle(order)
            for t in order:
                times.setdefault((what, t), []).append(await _timed(conn, *_call(read, t, i)))
    candidates = await conn.fetchval(
        f"SELECT count(*) FROM {source} WHERE lexical @@ to_tsquery('english', $1)", bm25[0]
    )
    for n in names:
        await conn.execute(f"DROP TABLE {n}")
    await conn.close()
    head = (
        "| read | " + " | ".join(f"{layout}: p50 ms" for layout in LAYOUTS) + " | toast / product |"
    )
    lines = [head, "|---|---:|---:|---:|"]
    for what in reads:
        a, b = (statistics.median(times[(what, n)]) for n in names)
        lines.append(f"| {what} | {a:.1f} | {b:.1f} | {a / b:.2f}x |")
    mb = 1024 * 1024
    sizes = "; ".join(
        f"{layout}: heap {s['heap'] / mb:,.0f} MB, TOAST {s['toast'] / mb:,.0f} MB"
        for layout, s in zip(LAYOUTS, built, strict=True)
    )
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return [
        *lines,
        "",
        f"Copies of `{source}`, {queries} queries per cell, the two tables interleaved query by query in a shuffled order after one warm-up round; a BM25 query matched {candidates:,} children. Sizes: {sizes}. {machine()}. Generated {started}.",
        "",
        "Regenerate with `python -m benchmarks run row_layout`.",
    ]


def _call(
    read: Callable[[str, int], tuple[str, tuple[Any, ...]]], table: str, i: int
) -> tuple[Any, ...]:
    sql, args = read(table, i)
    return (sql, *args)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", default="bench_scale_100k")
    p.add_argument("--queries", type=int, default=15)
    p.add_argument("--dsn", default=None, help="default: $PARROT_PARENTS_DSN, else embedded")
    args = p.parse_args(argv)
    body = "\n".join(asyncio.run(measure(args.dsn, args.table, args.queries)))
    replace_section(
        DOC, "row-layout", body, heading="## Row layout: vectors in the row or out of it"
    )
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
