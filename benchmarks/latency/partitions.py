"""Partitioned collections: a tenant's search through its own HNSW index, beside the
same searches on the unpartitioned collection (``PgVectorStore(partition_key=...)``).

Reuses the scale benchmark's collection ``bench_scale_<n>`` (synthetic documents, a
``tenant`` out of 100 on every row: ``python -m benchmarks run scale --children N
--build-only`` builds it) and opens it with ``partition_key="tenant"``, which records the
key and builds an HNSW and a GIN index per tenant (the product's path for giving an
existing collection a key; its time is reported). The same table without the key is the
baseline: a second store on it whose key is unset, so that both read the same rows in the
same layout. The key and its indexes are taken off after the run (``--keep`` leaves them).

Then, one query at a time, every variant interleaved query by query in a shuffled order
(query vectors given; both collections ranked BM25 in SQL, the default on a server without
a safe pg_textsearch), ``get_vector_context`` with parent expansion:

* dense and hybrid (the package defaults) over every tenant, on each collection;
* a 1 % tenant (``filter={"tenant": t}``), dense and hybrid, on each collection: on the
  unpartitioned one that is today's planned filtered search; on the partitioned one the
  tenant's own index;
* recall@10 of the partitioned tenant search against the exact ranking of that tenant's
  children (a sequential scan).

Three times: at a cold start (the server started for the run, a few warm-up queries: most
tenant searches read their tenant's graph for the first time), in service (every tenant
searched once in each mode on each store first, then other queries, each tenant search a
tenant of 100), and for one busy tenant (every tenant search the same tenant's: its graph
stays in the buffers and its statements stay prepared).

Writes benchmarks/reports/partitions.md. ``python -m benchmarks run partitions --children
100000``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import random
import statistics
import time
from typing import Any

import numpy as np

from benchmarks.common import CHUNKING_EVAL, REPORTS, command, commit_of, cpu_model
from benchmarks.latency._scale.data import DIM, Queries, SyntheticCollection, load_vocabulary
from benchmarks.latency._scale.embed import LookupEmbedding
from benchmarks.latency._scale.load import connect_raw, size_label

TENANTS = 100


async def _key(dsn: str, table: str) -> float:
    """Give ``table`` the partition key ``tenant`` (the product's path for an existing
    collection: the key recorded, one HNSW and one GIN index built per tenant); seconds."""
    from parrot_parents import PgVectorStore

    t0 = time.perf_counter()
    keyed = PgVectorStore(dsn=dsn, table=table, dimension=DIM, partition_key="tenant")
    await keyed.connect()
    await keyed.close()
    return time.perf_counter() - t0


async def _keyed(dsn: str, table: str) -> bool:
    """Whether ``table`` has the key already (a run with ``--keep``)."""
    from parrot_parents import PgVectorStore

    store = PgVectorStore(dsn=dsn, table=table, dimension=DIM, create=False)
    await store.connect()
    await store.close()
    return store.partition_key == "tenant"


async def _unkey(dsn: str, table: str) -> None:
    """Take the key and its indexes off ``table`` again, so that the other benchmarks
    reading it find it as they built it."""
    from parrot_parents.stores.identifiers import derived_name

    raw = await connect_raw(dsn)
    try:
        names = await raw.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = $1"
            " AND (indexname LIKE $2 OR indexname LIKE $3)",
            table,
            derived_name(table, "part") + "%",
            derived_name(table, "partl") + "%",
        )
        for (name,) in names:
            await raw.execute(f'DROP INDEX "{name}"')
        await raw.execute(f'COMMENT ON COLUMN "{table}".cmetadata IS NULL')
    finally:
        await raw.close()


async def _exact(dsn: str, table: str, vector: Any, tenant: str) -> list[str]:
    from pgvector.asyncpg import register_vector

    raw = await connect_raw(dsn)
    try:
        await register_vector(raw)
        async with raw.transaction():
            await raw.execute("SET LOCAL enable_indexscan = off")
            await raw.execute("SET LOCAL enable_bitmapscan = off")
            rows = await raw.fetch(
                f'SELECT id FROM "{table}" WHERE cmetadata @> $2::jsonb'
                " AND (cmetadata->>'is_chunk')::boolean"
                " ORDER BY embedding <=> $1 LIMIT 10",
                vector,
                f'{{"tenant": "{tenant}"}}',
            )
    finally:
        await raw.close()
    return [r[0] for r in rows]


async def main_async(args: argparse.Namespace) -> None:
    from parrot_parents.embedded.server import resolve_dsn

    dsn = await asyncio.to_thread(resolve_dsn, None)
    label = size_label(args.children)
    table = f"bench_scale_{label}"
    build: dict[str, float] = {}
    if not (args.reuse and await _keyed(dsn, table)):
        await _unkey(dsn, table)
        build = {"partition_indexes_s": await _key(dsn, table)}
    try:
        await _measure(args, dsn, label, table, build)
    finally:
        if not args.keep:
            await _unkey(dsn, table)


async def _measure(
    args: argparse.Namespace, dsn: str, label: str, table: str, build: dict[str, float]
) -> None:
    from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore

    coll = SyntheticCollection(args.children, load_vocabulary(CHUNKING_EVAL / "corpora"))
    qs = coll.queries(2 * args.queries + args.warmup, salt=1)
    # A busy tenant's own queries (drawn around its documents): the tenant of the first
    # query's document, from a second query set.
    busy = f"t{int(qs.documents[0]) % TENANTS:02d}"
    extra = coll.queries(3 * TENANTS * (args.queries + args.warmup), salt=2)
    mine = [j for j, d in enumerate(extra.documents) if f"t{int(d) % TENANTS:02d}" == busy]
    mine = mine[: args.queries + args.warmup]
    base = len(qs.texts)
    qs = Queries(
        np.concatenate([qs.vectors, extra.vectors[mine]]),
        qs.texts + [extra.texts[j] for j in mine],
        np.concatenate([qs.documents, extra.documents[mine]]),
    )
    lookup = LookupEmbedding(dict(zip(qs.texts, qs.vectors, strict=True)), DIM, as_numpy=True)
    bots = {}
    for name in ("plain", "keyed"):
        store = PgVectorStore(
            dsn=dsn,
            table=table,
            dimension=DIM,
            embedding=lookup,
            create=False,
            lexical_backend="sql",
        )
        await store.connect()
        if name == "plain":
            # The same table without its key: same rows, same layout, the tenants'
            # indexes present but never chosen (their predicate is not the filter's).
            store.partition_key = None
        bots[name] = Chatbot(parent_searcher=InTableParentSearcher(store=store))
    src, dst = "plain", "keyed"
    rng = random.Random(7)
    # Two tenants per query: the tenant of the document the query was drawn around (a
    # tenant's user asking about its own documents), and another, drawn at random (as
    # the scale benchmark's filtered rows: the query far from every row the filter keeps).
    which = {
        "own": [f"t{int(d) % TENANTS:02d}" for d in qs.documents],
        "another": [f"t{rng.randrange(TENANTS):02d}" for _ in qs.texts],
    }
    which["busy"] = [busy] * len(qs.texts)

    def search(bot: str, mode: str, tenant: str | None) -> Any:
        flt = None if tenant is None else (lambda i: {"tenant": which[tenant][i]})
        if mode == "dense":
            return lambda i: bots[bot].get_vector_context(
                qs.texts[i], search_mode="dense", filter=flt(i) if flt else None
            )
        return lambda i: bots[bot].get_vector_context(qs.texts[i], filter=flt(i) if flt else None)

    def variants_for(tenants: tuple[str, ...]) -> dict[str, Any]:
        variants: dict[str, Any] = {}
        for mode in ("dense", "hybrid"):
            for bot, shown in ((src, "unpartitioned"), (dst, "partitioned")):
                variants[f"{mode}, every tenant, {shown}"] = search(bot, mode, None)
            for tenant in tenants:
                variants[f"{mode}, 1 % tenant ({tenant}), unpartitioned (planned filter)"] = search(
                    src, mode, tenant
                )
                variants[f"{mode}, 1 % tenant ({tenant}), partitioned (its indexes)"] = search(
                    dst, mode, tenant
                )
        return variants

    async def timed(
        variants: dict[str, Any], first: int, count: int, warmup: int
    ) -> tuple[dict[str, list[float]], dict[str, set[str]]]:
        times: dict[str, list[float]] = {k: [] for k in variants}
        plans: dict[str, set[str]] = {k: set() for k in variants}
        order = list(variants)
        for i in range(first, first + warmup + count):
            random.Random(i).shuffle(order)
            for k in order:
                t0 = time.perf_counter()
                _, meta = await variants[k](i)
                took = (time.perf_counter() - t0) * 1000
                if i >= first + warmup:
                    times[k].append(took)
                if meta.get("filter_plan"):
                    plans[k].add(meta["filter_plan"]["search"])
        return times, plans

    # First from a server started for the run, as the scale benchmark measures: a
    # tenant's graph is then read for the first time by most of its searches.
    spread = variants_for(("own", "another"))
    runs = {"cold start": await timed(spread, 0, args.queries, args.warmup)}
    # Then in service: every tenant searched once in each mode on each store (its graph
    # and lexemes read once, as a deployment that has served each tenant before), and
    # the same variants timed again on other queries.
    served = args.warmup + args.queries
    for t in range(TENANTS):
        for bot in (src, dst):
            for mode in ("dense", "hybrid"):
                await bots[bot].get_vector_context(
                    qs.texts[served + t % args.queries],
                    search_mode=mode,
                    filter={"tenant": f"t{t:02d}"},
                )
    runs["in service"] = await timed(spread, served, args.queries, 0)
    # Then one tenant's traffic: every tenant search is the same tenant's, about its own
    # documents, so its graph stays in the buffers and its statements stay prepared, as
    # for a tenant that is busy; the warm-up queries plan them.
    runs["one busy tenant"] = await timed(variants_for(("busy",)), base, args.queries, args.warmup)
    kinds = {"cold start": ("own", "another"), "in service": ("own", "another")}
    kinds["one busy tenant"] = ("busy",)
    store = bots[dst].parent_searcher.store  # type: ignore[attr-defined]
    plain = bots[src].parent_searcher.store  # type: ignore[attr-defined]
    recall: dict[str, list[float]] = {t: [] for t in which}
    lexical: dict[str, list[float]] = {t: [] for t in which}
    first = {"own": args.warmup, "another": args.warmup, "busy": base + args.warmup}
    for tenant, chosen in which.items():
        for i in range(first[tenant], first[tenant] + args.recall_queries):
            flt = {"tenant": chosen[i]}
            found = await store.similarity_search_by_vector(
                qs.vectors[i].tolist(), limit=10, filter=flt
            )
            exact = await _exact(dsn, table, qs.vectors[i], chosen[i])
            recall[tenant].append(len({r.id for r in found} & set(exact)) / max(1, len(exact)))
            # The lexical branch: the tenant's GIN index under the scaled candidate rule,
            # against exact BM25 over the tenant's children (the plain store ranks a
            # selective filter's lexical search exactly).
            ours = await store.similarity_search(qs.texts[i], 10, False, flt, search_mode="lexical")
            best = await plain.similarity_search(qs.texts[i], 10, False, flt, search_mode="lexical")
            if best:
                shared = {r.id for r in ours} & {r.id for r in best}
                lexical[tenant].append(len(shared) / len(best))

    def p(v: list[float], q: float) -> float:
        s = sorted(v)
        return s[min(len(s) - 1, int(q * len(s)))]

    lines = [
        f"# Partitioned collections, {label} children",
        "",
        f"_{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {cpu_model()}, "
        f"{os.cpu_count()} cores (shared); code {commit_of()}; "
        f"command `{command(__name__, _argv(args))}`; "
        f"{args.queries} queries per variant and run, interleaved._",
        "",
        f"`{table}` given the key `tenant` (an HNSW and a GIN index per tenant, built by "
        f'`PgVectorStore(partition_key="tenant").connect()`): '
        + (", ".join(f"{k} {v:.1f}" for k, v in build.items()) or "kept from an earlier run")
        + ("; kept after the run." if args.keep else "; taken off again after the run.")
        + " Hybrid is the package defaults. Three runs: **cold start**, on a server started"
        f" for the benchmark after {args.warmup} warm-up queries (most tenant searches read"
        " their tenant's graph for the first time); **in service**, after every tenant was"
        " searched once in each mode on each store, on other queries, each tenant search"
        " a tenant of 100 (the query's own, or one at random); **one busy tenant**: every"
        f" tenant search the same tenant's, after {args.warmup} warm-up queries (its graph"
        " in the buffers, its statements prepared).",
    ]
    ratios: dict[str, dict[str, float]] = {}
    for run, (times, plans) in runs.items():
        p50 = {k: statistics.median(v) for k, v in times.items()}
        dense = p50["dense, every tenant, unpartitioned"]
        hybrid = p50["hybrid, every tenant, unpartitioned"]
        lines += [
            "",
            f"#### {run.capitalize()}",
            "",
            "| variant (`get_vector_context`, parent expansion, vector given) | p50 ms | p95 ms |"
            " × unfiltered dense | × unfiltered hybrid | filter plan |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for k, v in times.items():
            lines.append(
                f"| {k} | {p50[k]:.2f} | {p(v, 0.95):.2f} | {p50[k] / dense:.2f}× |"
                f" {p50[k] / hybrid:.2f}× | {', '.join(sorted(plans[k])) or '-'} |"
            )
        got = ratios[run] = {}
        for mode, base in (("dense", dense), ("hybrid", hybrid)):
            for t in kinds[run]:
                got[f"{mode} {t}"] = (
                    p50[f"{mode}, 1 % tenant ({t}), partitioned (its indexes)"] / base
                )
            got[f"{mode} all"] = p50[f"{mode}, every tenant, partitioned"] / base
    lines += [""]
    for tenant in which:
        lines.append(
            f"Tenant {tenant}: recall@10 of the partitioned tenant search against the exact "
            f"ranking of the tenant's children, {len(recall[tenant])} queries: "
            f"**{statistics.mean(recall[tenant]):.3f}**; the lexical top 10 (the tenant's GIN "
            f"index, the candidate rule scaled) holds **{statistics.mean(lexical[tenant]):.3f}**"
            f" of exact BM25's over the tenant's children ({len(lexical[tenant])} queries)."
        )
        lines.append("")
    columns = [(r, t) for r in runs for t in kinds[r]]
    lines += [
        "| target | " + " | ".join(f"{t} tenant, {r}" for r, t in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for mode, bar in (("dense", "1.5"), ("hybrid", "2")):
        lines.append(
            f"| 1 % tenant, {mode}, partitioned: p50 ≤ {bar}× unfiltered {mode} | "
            + " | ".join(f"{ratios[r][f'{mode} {t}']:.2f}×" for r, t in columns)
            + " |"
        )
    lines.append(
        "| recall@10 ≥ 0.95 (measured once, after the runs) | "
        + " | ".join(f"{statistics.mean(recall[t]):.3f}" for _, t in columns)
        + " |"
    )
    for mode in ("dense", "hybrid"):
        lines.append(
            f"| every tenant, partitioned: p50 ≤ 1.5× unpartitioned ({mode}) | "
            + " | ".join(
                f"{ratios[r][f'{mode} all']:.2f}×" if t == kinds[r][0] else "" for r, t in columns
            )
            + " |"
        )
    report = "\n".join(lines) + "\n"
    out = REPORTS / f"partitions_{label}.md"
    out.write_text(report, encoding="utf-8")
    print(report)


def _argv(args: argparse.Namespace) -> list[str]:
    """The options of this run, as a command line that repeats it."""
    argv = ["--children", str(args.children)]
    for option, value in (
        ("--queries", args.queries),
        ("--warmup", args.warmup),
        ("--recall-queries", args.recall_queries),
    ):
        if value != DEFAULTS[option]:
            argv += [option, str(value)]
    return argv + [flag for flag in ("--keep", "--reuse") if getattr(args, flag[2:])]


#: The defaults of the options :func:`_argv` writes only when they differ.
DEFAULTS = {"--queries": 100, "--warmup": 10, "--recall-queries": 50}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run partitions")
    parser.add_argument("--children", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=DEFAULTS["--queries"])
    parser.add_argument("--warmup", type=int, default=DEFAULTS["--warmup"])
    parser.add_argument("--recall-queries", type=int, default=DEFAULTS["--recall-queries"])
    parser.add_argument(
        "--keep", action="store_true", help="leave the key and its indexes on the table"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="use the key a --keep run left, if any"
    )
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
