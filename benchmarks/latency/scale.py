"""Query latency, HNSW recall and the planner's choices at 10k, 100k and 1M children (issue 11).

One run per size, on collections of synthetic documents of about ten children each
(``_scale/data.py``), loaded by binary COPY into the product's own table and into
langchain-postgres's (``_scale/load.py``; built once, reused by later runs):

1. **Latency**, query vectors given (the model bypassed), every variant interleaved query
   by query (``_scale/query.py``): bare kNN (asyncpg, one prepared statement), the store's
   ``similarity_search_by_vector`` (dense and hybrid), the parent fetch alone,
   ``get_vector_context`` (parent expansion, the package defaults, ``window:1``, a budget,
   a 1 % metadata filter), and LangChain's ``ParentDocumentRetriever`` on the same server
   (``_scale/langchain.py``). Then, on the dev questions, the same with the real model
   embedding each query, ours against LangChain's.
2. **Recall@10** of the HNSW index against exact search at several ``ef_search``, on the
   synthetic vectors and on the real embeddings of every child of the shared dev corpora
   (``_scale/recall.py``).
3. **EXPLAIN**: does the planner pick the HNSW index at each ``ef_search``, for the bare
   kNN statement and for the statement the product sends.

Writes its blocks into docs/performance.md and benchmarks/reports/scale.md
(``_scale/report.py``). Commands::

    export PARROT_PARENTS_DATA_DIR=<data dir>   # or --dsn / $PARROT_PARENTS_DSN
    python -m benchmarks run scale --rebuild                 # 10k and 100k, 350 queries
    nice -n 19 python -m benchmarks run scale --children 1000000 --build-only   # long build
    python -m benchmarks run scale --children 1000000 --hybrid-queries 20   # 1M, tables reused
    python -m benchmarks run scale --src <older checkout>   # "ours" from another checkout

``--src PATH`` runs this same benchmark again in a child process whose ``parrot_parents``
is that checkout's (:func:`benchmarks.common.child`), so every "ours" variant (and the
model) is that checkout's code, while the data, the bare kNN and
LangChain are unchanged; it writes to benchmarks/reports/scale-src.md unless ``--report``
says otherwise, and leaves docs/performance.md alone unless ``--doc`` is given. Compare
two checkouts by their ratios to the bare kNN, each measured in its own run.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime as dt
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import CHUNKING_EVAL, REPO_ROOT, REPORTS, child, command, commit_of
from benchmarks.latency._scale.data import DIM, SyntheticCollection, load_vocabulary
from benchmarks.latency._scale.embed import LangChainLookup, LangChainModel, LookupEmbedding
from benchmarks.latency._scale.langchain import LangChainSide
from benchmarks.latency._scale.load import (
    build_langchain,
    build_ours,
    connect_raw,
    maintenance_mem,
    pooled_raw,
    size_label,
    unnice_server,
)
from benchmarks.latency._scale.query import Variant, interleave, unique_texts
from benchmarks.latency._scale.recall import (
    exact_ids,
    explain_asyncpg,
    explain_captured,
    knn_sql,
    recall_at_10,
)
from benchmarks.latency._scale.report import (
    PERFORMANCE_TEMPLATE,
    build_block,
    explain_block,
    query_block,
    recall_block,
    replace_blocks,
)

CACHE = REPO_ROOT / ".bench" / "scale"
EXPLAIN_EF = [40, 100, 200, 400, 1000]
_SRC_ENV = "SCALE_BENCH_SRC"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--children", default="10000,100000", help="sizes, comma-separated")
    p.add_argument("--queries", type=int, default=350, help="measured queries per variant")
    p.add_argument("--warmup", type=int, default=30, help="warm-up queries per variant")
    p.add_argument(
        "--embed-queries",
        type=int,
        default=50,
        help="dev questions for the embedding-included table (0: skip the model)",
    )
    p.add_argument("--recall-queries", type=int, default=100)
    p.add_argument(
        "--hybrid-queries",
        type=int,
        default=100,
        help="hybrid variants on the first N queries only (about 1 s a query at 100k)",
    )
    p.add_argument("--build-only", action="store_true", help="build (or check) the tables only")
    p.add_argument("--rebuild", action="store_true", help="rebuild cached tables")
    p.add_argument("--skip-real-recall", action="store_true")
    p.add_argument("--dsn", default=None, help="default: $PARROT_PARENTS_DSN, else embedded")
    p.add_argument("--src", default=None, help="run the 'ours' variants from this checkout")
    p.add_argument("--doc", default=None, help="default docs/performance.md ('none': skip)")
    p.add_argument("--report", default=None, help="default benchmarks/reports/scale.md")
    return p.parse_args(argv)


def _reexec_with_src(src: str, argv: list[str]) -> None:
    """Run this benchmark again on the product code of checkout ``src`` (once)."""
    src = str(Path(src).resolve())
    if os.environ.get(_SRC_ENV) == src:
        return
    cmd, env = child(__name__, argv, Path(src))
    env[_SRC_ENV] = src
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a read-only checkout
    raise SystemExit(subprocess.call(cmd, env=env))


def _checkout() -> str:
    """The commit of the checkout ``parrot_parents`` was imported from (never its path)."""
    import parrot_parents

    return commit_of(Path(parrot_parents.__file__).resolve().parent.parent)


def _machine() -> str:
    return (
        f"{os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}"
    )


def _questions(limit: int) -> list[str]:
    with (CHUNKING_EVAL / "questions.csv").open(newline="", encoding="utf-8") as f:
        return [row["question"] for row in csv.DictReader(f)][:limit]


class Statements:
    """Counts and keeps the statements the product's engine sends: through SQLAlchemy (its
    cursor events) and straight on the driver (asyncpg's query logger, which sees the
    store's prepared search statements); transaction control is not counted."""

    def __init__(self, store: Any) -> None:
        from sqlalchemy import event

        self.engine = engine = store.engine
        self.seen: list[tuple[str, Any]] = []
        self.on = False
        event.listen(engine.sync_engine, "before_cursor_execute", self._record)
        event.listen(engine.sync_engine.pool, "checkout", self._log_driver)
        # The hot reads run on the store's own asyncpg pool (a checkout given with --src
        # may predate it).
        self.read_pool = getattr(store, "read_pool", None)
        self.hooked = False

    def _record(self, _conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if self.on:
            self.seen.append((statement, params))

    def _log_driver(self, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if record.info.get("scale.statements") is not self:
            dbapi_connection.driver_connection.add_query_logger(self._logged)
            record.info["scale.statements"] = self

    def _logged(self, query: Any) -> None:
        if not query.query.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            self._record(None, None, query.query, tuple(query.args))

    async def during(self, coro: Any) -> list[tuple[str, Any]]:
        if self.read_pool is not None and not self.hooked:
            await self.read_pool.add_query_logger(self._logged)
            self.hooked = True
        self.seen, self.on = [], True
        try:
            await coro
            # asyncpg hands each query to its loggers with ``loop.call_soon``: let the
            # last ones run before the window closes.
            for _ in range(3):
                await asyncio.sleep(0)
        finally:
            self.on = False
        return self.seen


async def measure_size(args: argparse.Namespace, ctx: dict[str, Any], n: int) -> dict[str, Any]:
    from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore
    from parrot_parents.stores.search_options import HNSWQueryOptions

    dsn = ctx["dsn"]
    label = size_label(n)
    table, lc_table = f"bench_scale_{label}", f"lc_scale_{label}"
    coll = SyntheticCollection(n, ctx["vocabulary"])
    print(f"[{label}] building / checking {table} and {lc_table}", flush=True)

    def store_factory(name: str, **kw: Any) -> Any:
        return PgVectorStore(dsn=dsn, table=name, dimension=DIM, **kw)

    # A new table gets pg_textsearch's index at creation where the server has it: moving
    # a built table to it rewrites the table and builds every index again.
    raw = await connect_raw(dsn)
    try:
        textsearch = await raw.fetchval(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_textsearch'"
        )
    finally:
        await raw.close()
    backend = "pg_textsearch" if textsearch else None
    builds = [await build_ours(dsn, store_factory, coll, table, args.rebuild, backend)]
    print(f"[{label}] {builds[-1]}", flush=True)
    builds.append(await build_langchain(dsn, coll, lc_table, args.rebuild))
    print(f"[{label}] {builds[-1]}", flush=True)
    result: dict[str, Any] = {
        "n": n,
        "label": label,
        "parents": coll.n_parents,
        "builds": builds,
        "queries": args.queries,
        "warmup": args.warmup,
    }
    if args.build_only:
        return result

    defaults = HNSWQueryOptions()
    result["ef_search"], result["iterative_scan"] = defaults.ef_search, defaults.iterative_scan
    total = args.queries + args.warmup
    qs = coll.queries(total, salt=1)
    texts = unique_texts(qs.texts)
    vectors = dict(zip(texts, qs.vectors, strict=True))
    lookup = LookupEmbedding(vectors, DIM, as_numpy=ctx["model_returns_numpy"])
    result["layout_build"] = await _row_layout(dsn, table)
    store = store_factory(table, embedding=lookup, create=False)
    await store.connect()
    result["lexical_build"] = await _lexical_index(store, dsn, table)
    searcher = InTableParentSearcher(store=store)
    bot = Chatbot(parent_searcher=searcher, expand_to_parent=True)
    # The same collection ranked by BM25 in SQL (every collection keeps its statistics).
    store_sql = store_factory(table, embedding=lookup, create=False, lexical_backend="sql")
    await store_sql.connect()
    bot_sql = Chatbot(parent_searcher=InTableParentSearcher(store=store_sql), expand_to_parent=True)
    backend = store.lexical_backend
    raw = await connect_raw(dsn)
    await raw.execute(f"SET hnsw.ef_search = {int(defaults.ef_search)}")
    await raw.execute(
        "SELECT set_config('hnsw.iterative_scan', $1, false)", defaults.iterative_scan
    )
    knn = await raw.prepare(knn_sql(table))
    pool = await pooled_raw(dsn, defaults.ef_search, defaults.iterative_scan)

    async def pooled_knn(vector: Any) -> Any:
        async with pool.acquire() as conn:
            return await conn.fetch(knn_sql(table), vector)

    lc = LangChainSide(dsn, lc_table)
    await lc.open(coll)
    pdr, lc_vs = await lc.retriever(LangChainLookup(vectors))
    lc_hybrid = await lc.hybrid_store(LangChainLookup(vectors))

    # The product's own statements, run bare on the kNN's connection: the floor under
    # each call (what is left is the product's Python around the statement).
    floors = await _product_statements(store_factory, table, lookup, q0=texts[0], v0=qs.vectors[0])
    prepared_floors = {k: await raw.prepare(sql) for k, sql in floors.items()}

    # The parents of each query's hits, for the "parent fetch alone" variant (not timed).
    parents_of = []
    for v in qs.vectors:
        hits = await store.similarity_search_by_vector(v, limit=10)
        parents_of.append([h.metadata["parent_document_id"] for h in hits])
    tenant = [f"t{(7 + 37 * i) % 100:02d}" for i in range(total)]
    # Ten tenants: 10 % of the children.
    tenants10 = [
        {"tenant": {"$in": [f"t{(7 + 37 * i + 10 * k) % 100:02d}" for k in range(10)]}}
        for i in range(total)
    ]

    def q(i: int) -> str:
        return texts[i]

    hyb = args.hybrid_queries

    def floor(key: str, label: str, note: str) -> list[Variant]:
        """The product's ``key`` statement run alone (variant ``<key>_stmt``), when
        captured."""
        if key not in prepared_floors:
            return []
        statement = prepared_floors[key]
        return [Variant(f"{key}_stmt", label, lambda i: statement.fetch(qs.vectors[i]), note)]

    variants = [
        Variant(
            "bare_knn",
            "bare kNN (asyncpg, one prepared statement)",
            lambda i: knn.fetch(qs.vectors[i]),
            "the floor: no product code",
        ),
        Variant(
            "bare_knn_pool",
            "bare kNN through a pool (`asyncpg.Pool`: acquire, the same statement, release)",
            lambda i: pooled_knn(qs.vectors[i]),
            "what any pooled service pays; no reset on release",
        ),
        *floor(
            "search",
            "the `similarity_search` statement alone (the bare kNN's connection)",
            "the product's SQL, no product code: its floor",
        ),
        Variant(
            "search_dense",
            "`similarity_search_by_vector`, dense",
            lambda i: store.similarity_search_by_vector(qs.vectors[i], limit=10),
            "",
        ),
        Variant(
            "search_hybrid",
            "`similarity_search_by_vector`, hybrid (query text)",
            lambda i: store.similarity_search_by_vector(
                qs.vectors[i], limit=10, search_mode="hybrid", query=q(i)
            ),
            "dense + BM25, RRF",
            limit=hyb,
        ),
        Variant(
            "parent_fetch",
            "parent fetch alone (`InTableParentSearcher.fetch`)",
            lambda i: searcher.fetch(parents_of[i]),
            "the parents of the 10 hits",
        ),
        *floor(
            "gvc",
            "the joined statement of `get_vector_context` alone (the same connection)",
            "search + parents, no product code: its floor",
        ),
        Variant(
            "gvc_parent",
            "`get_vector_context`, parent expansion, dense",
            lambda i: bot.get_vector_context(q(i), search_mode="dense"),
            "search + parents + context",
        ),
        Variant(
            "gvc_default",
            "`get_vector_context`, parent expansion, package defaults",
            lambda i: bot.get_vector_context(q(i)),
            f"hybrid search; the collection's lexical backend: {backend}",
            limit=hyb,
        ),
        Variant(
            "gvc_default_sql",
            "`get_vector_context`, parent expansion, package defaults, BM25 in SQL",
            lambda i: bot_sql.get_vector_context(q(i)),
            "hybrid search, the `sql` lexical backend on the same collection (bounded above"
            " 5,000 children: `CandidateRule`)",
            limit=hyb,
        ),
        Variant(
            "search_lexical",
            f"`similarity_search`, lexical alone ({backend} backend)",
            lambda i: store.similarity_search(q(i), limit=10, search_mode="lexical"),
            "BM25 top 10",
            limit=hyb,
        ),
        Variant(
            "search_lexical_sql",
            "`similarity_search`, lexical alone (sql backend)",
            lambda i: store_sql.similarity_search(q(i), limit=10, search_mode="lexical"),
            "BM25 top 10, bounded above 5,000 children",
            limit=hyb,
        ),
        Variant(
            "gvc_hybrid_filter1",
            "`get_vector_context`, package defaults, 1 % metadata filter",
            lambda i: bot.get_vector_context(q(i), filter={"tenant": tenant[i]}),
            "hybrid; the lexical branch ranks the filtered children in SQL",
            limit=hyb,
        ),
        Variant(
            "gvc_hybrid_filter10",
            "`get_vector_context`, package defaults, 10 % metadata filter",
            lambda i: bot.get_vector_context(q(i), filter=tenants10[i]),
            "hybrid; ten tenants (`$in`)",
            limit=hyb,
        ),
        Variant(
            "gvc_filter10",
            "`get_vector_context`, 10 % metadata filter, dense",
            lambda i: bot.get_vector_context(q(i), search_mode="dense", filter=tenants10[i]),
            "ten tenants (`$in`)",
        ),
        Variant(
            "gvc_window",
            "`get_vector_context`, `window:1`, dense",
            lambda i: bot.get_vector_context(q(i), mode="window:1", search_mode="dense"),
            "neighbours of each hit",
        ),
        Variant(
            "gvc_budget",
            "`get_vector_context`, budget 2000, dense",
            lambda i: bot.get_vector_context(q(i), budget=2000, search_mode="dense"),
            "limit 20, packed",
        ),
        Variant(
            "gvc_filter",
            "`get_vector_context`, 1 % metadata filter, dense",
            lambda i: bot.get_vector_context(
                q(i), search_mode="dense", filter={"tenant": tenant[i]}
            ),
            '`{"tenant": …}`, a tenant other than the query\'s',
        ),
        Variant(
            "lc_search",
            "LangChain `PGVectorStore.asimilarity_search_by_vector`",
            lambda i: lc_vs.asimilarity_search_by_vector(qs.vectors[i].tolist(), k=10),
            "its vector search alone",
        ),
        Variant(
            "lc_hybrid",
            "LangChain `PGVectorStore` hybrid search (`HybridSearchConfig`, RRF)",
            lambda i: lc_hybrid.asimilarity_search_by_vector(
                qs.vectors[i].tolist(), k=10, fts_query=q(i)
            ),
            "its dense top 10 + its `ts_rank_cd` top 10 on a GIN index, fused",
            limit=hyb,
        ),
        Variant(
            "lc_pdr",
            "LangChain `ParentDocumentRetriever.ainvoke`",
            lambda i: pdr.ainvoke(q(i)),
            "vector search + `InMemoryStore` docstore",
        ),
    ]
    print(f"[{label}] measuring {len(variants)} variants x {args.queries} queries", flush=True)
    t = time.perf_counter()
    result["stats"] = await interleave(variants, args.queries, args.warmup, seed=n)
    print(f"[{label}] measured in {time.perf_counter() - t:.0f} s", flush=True)
    for s in result["stats"].values():
        print(f"[{label}]   {s.key:14s} p50 {s.p50:7.2f}  p95 {s.p95:7.2f}", flush=True)

    statements = Statements(store)  # after the timing: no listener in the timed path
    calls = {
        "`similarity_search_by_vector`": lambda: store.similarity_search_by_vector(
            qs.vectors[0], limit=10
        ),
        "`get_vector_context` (parent, dense)": lambda: bot.get_vector_context(
            q(0), search_mode="dense"
        ),
    }
    result["statements"] = {}
    for name, call in calls.items():
        # The second call counts: a connection's first search also sets its session
        # settings (once per connection, not per call).
        await statements.during(call())
        result["statements"][name] = len(await statements.during(call()))
    result["overlap"] = await _overlap(
        raw, table, store, lc_vs, bot, pdr, qs.vectors[:30], texts[:30]
    )
    result["overlap"].update(await _lexical_agreement(store, store_sql, texts[:hyb]))
    await store_sql.close()

    if ctx.get("model") is not None and args.embed_queries > 0:
        result.update(await _embedded(args, ctx, store_factory, table, lc))

    print(f"[{label}] recall and EXPLAIN", flush=True)
    rq = coll.queries(args.recall_queries, salt=2).vectors
    result["recall"] = {
        "n": n,
        "what": f"Synthetic clustered vectors ({n:,} children), {len(rq)} queries around "
        "document centroids, exact top 10 by a sequential scan.",
        "recall": await recall_at_10(
            raw, table, rq, sorted({10, 20, defaults.ef_search, 100, 200}), defaults.iterative_scan
        ),
    }
    result["plans"], result["explain_note"] = await _plans(
        raw, store_factory, table, lookup, q(0), qs.vectors[0]
    )
    await raw.close()
    await pool.close()
    await lc.close()
    await store.close()
    return result


async def _hnsw_definition(raw: Any, table: str) -> tuple[str, str] | None:
    """``(name, CREATE INDEX statement)`` of the table's HNSW index, or None."""
    row = await raw.fetchrow(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
        " AND tablename = $1 AND indexdef LIKE '%USING hnsw%'",
        table,
    )
    return None if row is None else (row[0], row[1])


async def _build_memory(raw: Any, table: str) -> None:
    """Give the session the memory the table's first HNSW build had, so that the graph is
    built in memory (:func:`maintenance_mem`)."""
    n = await raw.fetchval(f"SELECT count(*) FROM public.{table} WHERE embedding IS NOT NULL")
    await raw.execute(f"SET maintenance_work_mem = '{maintenance_mem(int(n))}'")


async def _build_hnsw(raw: Any, table: str, definition: str) -> float:
    """Run ``definition`` with :func:`_build_memory`; returns its seconds."""
    await _build_memory(raw, table)
    t = time.perf_counter()
    await raw.execute(definition)
    return time.perf_counter() - t


async def _row_layout(dsn: str, table: str) -> str:
    """Bring a table built by an earlier release of the product to today's defaults: the
    row layout (:mod:`parrot_parents.stores.postgres.collections.layout`; ``VACUUM FULL`` rewrites
    the rows)
    and the HNSW build parameters
    (:class:`~parrot_parents.stores.postgres.collections.schema.HNSWIndex`; the
    index built again); what was done, for the report."""
    import re

    from sqlalchemy.ext.asyncio import create_async_engine

    from parrot_parents.stores.postgres.collections.layout import apply_layout
    from parrot_parents.stores.postgres.collections.schema import HNSWIndex
    from parrot_parents.stores.postgres.connections.dsn import to_async_dsn

    engine = create_async_engine(to_async_dsn(dsn))
    try:
        async with engine.begin() as conn:
            changed = await conn.run_sync(lambda c: apply_layout(c, "public", table))
    finally:
        await engine.dispose()
    raw = await connect_raw(dsn)
    await _build_memory(raw, table)  # VACUUM FULL builds the HNSW index again too
    hnsw = await _hnsw_definition(raw, table)
    assert hnsw is not None, f"{table} has no HNSW index"
    name, definition = hnsw
    want = HNSWIndex()
    params = f"WITH (m='{want.m}', ef_construction='{want.ef_construction}')"
    rebuild = params not in definition
    if rebuild:  # dropped first: the rewrite below would build the old graph again
        await raw.execute(f'DROP INDEX public."{name}"')
    done = []
    if changed:
        t = time.perf_counter()
        await raw.execute(f"VACUUM (FULL, ANALYZE) public.{table}")
        done.append(
            f"the row layout given by this run (`VACUUM FULL` {time.perf_counter() - t:.1f} s)"
        )
    if rebuild:
        took = await _build_hnsw(raw, table, re.sub(r"WITH \(.*\)", params, definition))
        done.append(f"the HNSW index built again {params} by this run ({took:.1f} s)")
    await raw.close()
    return "; ".join(done) or "the product's row layout and HNSW build"


async def _lexical_index(store: Any, dsn: str, table: str) -> str:
    """Give the collection pg_textsearch's index when the server has it (tables built
    before the backend existed have none); what was done, for the report.

    The move adds a stored column, so it rewrites the table and builds every index again.
    The HNSW index is dropped first and built after with the memory of the table's first
    build (:func:`maintenance_mem`): the product sizes a move's rebuild like a bulk load's
    (at most 1 GB), under which a million-vector graph spills to disk.
    """
    from parrot_parents.errors import ConfigurationError

    if store.lexical_backend == "pg_textsearch":
        return "pg_textsearch index present"
    raw = await connect_raw(dsn)
    try:
        hnsw = await _hnsw_definition(raw, table)
        if hnsw is not None:
            await raw.execute(f'DROP INDEX public."{hnsw[0]}"')
        t = time.perf_counter()
        took = 0.0
        try:
            await store.set_lexical_backend("pg_textsearch")
            done = f"pg_textsearch column and index added in {time.perf_counter() - t:.1f} s"
        except ConfigurationError as exc:
            done = f"no pg_textsearch index: {exc}"
        finally:
            if hnsw is not None:
                took = await _build_hnsw(raw, table, hnsw[1])
        if hnsw is not None:
            done += f" (table rewritten), HNSW built again in {took:.1f} s"
    finally:
        await raw.close()
    return done


async def _lexical_agreement(store: Any, store_sql: Any, texts: list[str]) -> dict[str, str]:
    """How close each backend's lexical top 10 is to exact BM25's (the SQL backend with
    every child holding a query lexeme scored): the queries whose top 10 (as a set) is
    equal, and the mean share of exact BM25's top 10 found."""
    from parrot_parents.stores.postgres.search.hybrid import CANDIDATES, EXACT_CANDIDATES

    backends = dict.fromkeys(["sql", store.lexical_backend])
    same: dict[str, int] = dict.fromkeys(backends, 0)
    share: dict[str, float] = dict.fromkeys(backends, 0.0)
    for text in texts:
        store_sql.lexical_candidates = EXACT_CANDIDATES
        exact = await store_sql.similarity_search(text, limit=10, search_mode="lexical")
        store_sql.lexical_candidates = CANDIDATES
        want = {r.id for r in exact}
        for name in backends:
            side = store_sql if name == "sql" else store
            got = {
                r.id for r in await side.similarity_search(text, limit=10, search_mode="lexical")
            }
            same[name] += got == want
            share[name] += len(got & want) / max(len(want), 1)
    n = max(len(texts), 1)
    label = "lexical top 10 against exact BM25's (every child holding a query lexeme scored)"
    return {
        f"{label}, {k} backend": f"equal for {same[k]}/{len(texts)}, {share[k] / n:.3f} found"
        for k in backends
    }


async def _product_statements(
    store_factory: Any, table: str, lookup: Any, *, q0: str, v0: np.ndarray
) -> dict[str, str]:
    """The SQL that ``similarity_search_by_vector`` and ``get_vector_context`` (parent,
    dense) send, captured on a store of their own (the timed store keeps no listener).

    Only a single statement (besides the session settings) binding just the query vector
    qualifies; a checkout that sends more (``--src`` on older code) gets no floor rows.
    """
    from parrot_parents import Chatbot, InTableParentSearcher

    store = store_factory(table, embedding=lookup, create=False)
    await store.connect()
    try:
        st = Statements(store)
        bot = Chatbot(parent_searcher=InTableParentSearcher(store=store), expand_to_parent=True)
        sent = {
            "search": await st.during(store.similarity_search_by_vector(v0, limit=10)),
            "gvc": await st.during(bot.get_vector_context(q0, search_mode="dense")),
        }
    finally:
        await store.close()
    out = {}
    for key, stmts in sent.items():
        # The session settings go first on a connection's first search: not the statement.
        sql = [s for s, _ in stmts if "set_config(" not in s]
        if len(sql) == 1 and "$1" in sql[0] and "$2" not in sql[0]:
            out[key] = sql[0]
    return out


async def _overlap(
    raw: Any,
    table: str,
    store: Any,
    lc_vs: Any,
    bot: Any,
    pdr: Any,
    vectors: np.ndarray,
    texts: list[str],
) -> dict[str, str]:
    """Do the variants answer alike? Each side's top 10 children against the exact top 10
    (both are approximate), and the parents of ``get_vector_context`` against those of
    LangChain's retriever."""
    ours = lcs = parents_same = parents_total = 0
    for v, text in zip(vectors, texts, strict=True):
        exact = await exact_ids(raw, table, v)
        ours += len(exact & {h.id for h in await store.similarity_search_by_vector(v, limit=10)})
        docs = await lc_vs.asimilarity_search_by_vector(v.tolist(), k=10)
        # LangChain's rows keep the child's metadata: its id is derived from it.
        lcs += len(
            exact
            & {
                f"{m['document_id']}#c:{m['start_index']}-{m['end_index']}"
                for m in (d.metadata for d in docs)
            }
        )
        _, meta = await bot.get_vector_context(text, search_mode="dense")
        theirs = {d.id for d in await pdr.ainvoke(text)}
        parents_same += len(set(meta["parents"] or []) & theirs)
        parents_total += len(theirs)
    total = 10 * len(vectors)
    return {
        f"recall@10 against exact search on {len(vectors)} of these queries": (
            f"ours (dense search) {ours / total:.3f}, LangChain's vector search {lcs / total:.3f}"
        ),
        "parents of `get_vector_context` also returned by LangChain's PDR": (
            f"{parents_same / max(1, parents_total):.3f}"
        ),
    }


async def _embedded(
    args: argparse.Namespace,
    ctx: dict[str, Any],
    store_factory: Any,
    table: str,
    lc: LangChainSide,
) -> dict[str, Any]:
    """Ours and LangChain's with the real model embedding each dev question."""
    from parrot_parents import Chatbot, InTableParentSearcher

    model = ctx["model"]
    questions = _questions(args.embed_queries + 5)
    # One embeddings object per variant (they share the loaded model): each keeps its
    # last questions' vectors, and every variant must pay for its own forward pass, as a
    # service answering new questions does.
    alone, dense_model, default_model = (type(model)() for _ in range(3))
    stores = [store_factory(table, embedding=m, create=False) for m in (dense_model, default_model)]
    for s in stores:
        await s.connect()
    bot, bot_default = (
        Chatbot(parent_searcher=InTableParentSearcher(store=s), expand_to_parent=True)
        for s in stores
    )
    pdr, _ = await lc.retriever(LangChainModel(model))
    variants = [
        Variant(
            "model", "the model alone (`aembed_query`)", lambda i: alone.aembed_query(questions[i])
        ),
        Variant(
            "gvc_embed",
            "ours: `get_vector_context`, parent expansion, dense",
            lambda i: bot.get_vector_context(questions[i], search_mode="dense"),
        ),
        Variant(
            "gvc_default_embed",
            "ours: `get_vector_context`, package defaults (hybrid)",
            lambda i: bot_default.get_vector_context(questions[i]),
            limit=args.hybrid_queries,
        ),
        Variant(
            "lc_pdr_embed",
            "LangChain `ParentDocumentRetriever.ainvoke`",
            lambda i: pdr.ainvoke(questions[i]),
        ),
    ]
    n = min(args.embed_queries, len(questions) - 5)
    stats = await interleave(variants, n, 5, seed=1)
    for s in stores:
        await s.close()
    return {"embed_stats": stats, "embed_queries": n}


async def _plans(
    raw: Any, store_factory: Any, table: str, lookup: Any, text: str, vector: np.ndarray
) -> tuple[dict[str, dict[int, Any]], str]:
    """EXPLAIN of the bare kNN and of the product's own kNN statement, per ef_search."""
    from parrot_parents import Chatbot, InTableParentSearcher
    from parrot_parents.stores.search_options import HNSWQueryOptions

    plans: dict[str, dict[int, Any]] = {
        "bare kNN": {},
        "ours: the kNN statement of `get_vector_context`": {},
    }
    note = ""
    for ef in EXPLAIN_EF:
        plans["bare kNN"][ef] = await explain_asyncpg(raw, knn_sql(table), (vector,), ef, table)
        # The product configured with this ef_search: capture what it sends, EXPLAIN that.
        store = store_factory(
            table, embedding=lookup, create=False, search_options=HNSWQueryOptions(ef_search=ef)
        )
        await store.connect()
        st = Statements(store)
        bot = Chatbot(parent_searcher=InTableParentSearcher(store=store), expand_to_parent=True)
        sent = await st.during(bot.get_vector_context(text, search_mode="dense"))
        knn_statements = [(s, p) for s, p in sent if "<=>" in s]
        if knn_statements:
            s, p = knn_statements[0]
            plans["ours: the kNN statement of `get_vector_context`"][ef] = await explain_captured(
                store.engine, s, p, ef, table
            )
        else:
            note = (
                "The product's statements were not seen on its engine's connections, so "
                "only the bare kNN is explained."
            )
        await store.close()
    return plans, note


async def real_recall(
    args: argparse.Namespace, ctx: dict[str, Any], efs: list[int]
) -> dict[str, Any]:
    """Recall@10 on the real embeddings of every child of the dev corpora (cached .npy)."""
    from parrot_parents.stores.search_options import HNSWQueryOptions

    children_npy, queries_npy = CACHE / "real_children.npy", CACHE / "real_queries.npy"
    if not (children_npy.exists() and queries_npy.exists()):
        await _embed_real(ctx, children_npy, queries_npy)
    children, queries = np.load(children_npy), np.load(queries_npy)
    raw = await connect_raw(ctx["dsn"])
    table = "bench_recall_real"
    await raw.execute(f"DROP TABLE IF EXISTS {table}")
    await raw.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, embedding vector({DIM}))")
    await raw.copy_records_to_table(
        table, records=[(i, v) for i, v in enumerate(children)], columns=["id", "embedding"]
    )
    # The product's own HNSW definition (from a product table), on this table.
    definition = await raw.fetchval(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'bench_real_corpora'"
        " AND indexdef LIKE '%hnsw%'"
    )
    if definition is None:
        definition = await raw.fetchval(
            "SELECT indexdef FROM pg_indexes WHERE tablename LIKE 'bench_scale_%'"
            " AND indexdef LIKE '%hnsw%' LIMIT 1"
        )
    source = definition.split(" ON ")[1].split(" USING ")[0]
    await raw.execute(
        f"CREATE INDEX {table}_hnsw ON public.{table} USING " + definition.split(" USING ", 1)[1]
    )
    await raw.execute(f"ANALYZE {table}")
    defaults = HNSWQueryOptions()
    recall = await recall_at_10(raw, table, queries, efs, defaults.iterative_scan)
    await raw.close()
    return {
        "n": len(children),
        "what": f"Real embeddings: every child of the shared dev corpora ({len(children):,} "
        "children of the default size, ingested by the product's TextLoader with its "
        "default late chunking), queried with the "
        f"{len(queries)} dev questions embedded by the same model; the product's HNSW "
        f"definition (copied from `{source}`). A collection this small is easy for HNSW.",
        "recall": recall,
    }


async def _embed_real(ctx: dict[str, Any], children_npy: Path, queries_npy: Path) -> None:
    from parrot_parents import PgVectorStore, TextLoader

    model = ctx["model"] or _load_model()
    store = PgVectorStore(dsn=ctx["dsn"], table="bench_real_corpora", embedding=model)
    await store.connect()
    await store.drop()
    await store.close()
    store = PgVectorStore(dsn=ctx["dsn"], table="bench_real_corpora", embedding=model)
    report = await TextLoader(str(CHUNKING_EVAL / "corpora"), embedding=model).ingest(store)
    await store.close()
    raw = await connect_raw(ctx["dsn"])
    rows = await raw.fetch(
        "SELECT embedding FROM bench_real_corpora WHERE embedding IS NOT NULL ORDER BY id"
    )
    await raw.close()
    children = np.stack([np.asarray(r["embedding"], dtype=np.float32) for r in rows])
    queries = np.asarray(model.embed_documents(_questions(10_000)), dtype=np.float32)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(children_npy, children)
    np.save(queries_npy, queries)
    print(f"[real] {report.children} children embedded and cached in {CACHE}", flush=True)


def _load_model() -> Any:
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings

    model = SentenceTransformerEmbeddings()
    model.warm_up()
    return model


async def main_async(args: argparse.Namespace) -> None:
    from parrot_parents.embedded.server import resolve_dsn
    from parrot_parents.stores.search_options import HNSWQueryOptions

    sizes = [int(s) for s in args.children.split(",") if s.strip()]
    dsn = await asyncio.to_thread(resolve_dsn, args.dsn)
    if not args.build_only:
        print(await unnice_server(dsn), flush=True)
    model = None
    if not args.build_only and args.embed_queries > 0:
        model = await asyncio.to_thread(_load_model)
    ctx: dict[str, Any] = {
        "dsn": dsn,
        "vocabulary": load_vocabulary(CHUNKING_EVAL / "corpora"),
        "model": model,
        "model_returns_numpy": model is not None
        and isinstance(model.embed_query("probe"), np.ndarray),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": _machine(),
        "command": command(__name__, sys.argv[1:]),
        "checkout": _checkout(),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
    }
    raw = await connect_raw(dsn)
    versions = await raw.fetchrow(
        "SELECT current_setting('server_version') AS pg,"
        " (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS pgvector"
    )
    await raw.close()
    ctx["machine"] += f", PostgreSQL {versions['pg']}, pgvector {versions['pgvector']}"
    results = [await measure_size(args, ctx, n) for n in sizes]
    blocks: dict[str, str] = {}
    for r in results:
        # A run that reused its tables keeps the block of the run that built them.
        if not all(b.reused for b in r["builds"]):
            blocks[f"scale-build-{r['label']}"] = build_block(ctx, r)
    if args.build_only:
        _write(args, blocks)
        return
    default_ef = HNSWQueryOptions().ef_search
    for r in results:
        blocks[f"scale-query-{r['label']}"] = query_block(ctx, r)
        blocks[f"scale-recall-{r['label']}"] = recall_block(
            ctx, f"Synthetic vectors, {r['label']}", r["recall"], default_ef
        )
        blocks[f"scale-explain-{r['label']}"] = explain_block(ctx, r)
    if not args.skip_real_recall:
        efs = sorted({10, 20, default_ef, 100, 200})
        real = await real_recall(args, ctx, efs)
        blocks["scale-recall-real"] = recall_block(
            ctx, "Real embeddings (dev corpora)", real, default_ef
        )
    _write(args, blocks)


def _write(args: argparse.Namespace, blocks: dict[str, str]) -> None:
    src = os.environ.get(_SRC_ENV)
    report = Path(args.report) if args.report else REPORTS / ("scale-src.md" if src else "scale.md")
    replace_blocks(
        report,
        blocks,
        "# scale\n\nWritten by `python -m benchmarks run scale`; "
        "see docs/performance.md for what each table means.\n",
    )
    doc = (
        args.doc
        if args.doc is not None
        else (None if src else str(REPO_ROOT / "docs" / "performance.md"))
    )
    if doc and doc != "none":
        replace_blocks(Path(doc), blocks, PERFORMANCE_TEMPLATE)
    print(f"wrote {report}" + (f" and {doc}" if doc and doc != "none" else ""), flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.src:
        _reexec_with_src(args.src, sys.argv[1:] if argv is None else argv)
    asyncio.run(main_async(args))
