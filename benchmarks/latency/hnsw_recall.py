"""HNSW recall@10 and kNN latency per ``ef_search`` on real text at 100k children and more.

The corpus is real HTML (for instance Debian's ``python3.11-doc``, ``postgresql-doc-15``,
``python-django-doc`` and ``python-sqlalchemy-doc``), ingested by the product itself: its
``TextLoader`` and HTML reader, its default child size, late chunking, indexer and model
(``_hnsw/corpus.py``; resumable, then cached as ``.npy`` under ``.bench/hnsw_recall``).

Two query sets: **held-out** children (``--held-out`` of them, drawn at random, never
inserted into any measured table), each text embedded as a query by the same model; and
the shared **dev questions**. For each size (random subsets of the other children, and all
of them) and each HNSW build (``--builds m:ef_construction``, the product's definition by
default), recall@10 against exact search and the p50/p95 of the kNN statement at each
``ef_search``, interleaved (``_hnsw/measure.py``).

Writes its blocks into docs/performance.md and benchmarks/reports/hnsw_recall.md. Command::

    apt-get install -y python3.11-doc postgresql-doc-15 python-django-doc python-sqlalchemy-doc
    export PARROT_PARENTS_DATA_DIR=<data dir>   # or --dsn / $PARROT_PARENTS_DSN
    nice -n 10 python -m benchmarks run hnsw_recall \\
        --real-html /usr/share/doc/python3.11/html \\
        --real-html /usr/share/doc/postgresql-doc-15/html \\
        --real-html /usr/share/doc/python-django-doc/html \\
        --real-html /usr/share/doc/python-sqlalchemy-doc/html
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import REPO_ROOT, REPORTS, command, cpu_model
from benchmarks.latency._hnsw.corpus import TABLE, dump_cache, ingest_html, load_cache
from benchmarks.latency._hnsw.measure import Build, SizeResult, measure_size
from benchmarks.latency._scale.load import connect_raw, size_label, unnice_server
from benchmarks.latency._scale.report import PERFORMANCE_TEMPLATE, replace_blocks
from benchmarks.latency.scale import _checkout, _load_model, _questions

CACHE = REPO_ROOT / ".bench" / "hnsw_recall"
#: pgvector's own default, the product's before it was measured here.
PGVECTOR_DEFAULT_EF = 40


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--real-html",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a directory of HTML to ingest (repeat); only needed until the cache exists",
    )
    p.add_argument("--sizes", default="10000,30000,all", help="children per table ('all')")
    p.add_argument("--ef", default="40,64,100,150,200,300", help="ef_search values")
    p.add_argument(
        "--builds", default="", help="m:ef_construction candidates (default: the product's)"
    )
    p.add_argument("--held-out", type=int, default=200, help="children kept out as queries")
    p.add_argument(
        "--no-ingest",
        action="store_true",
        help="measure the children the collection holds now (an ingest stopped half-way)",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="write the blocks again from the last run's saved results (the default marked anew)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dsn", default=None, help="default: $PARROT_PARENTS_DSN, else embedded")
    p.add_argument("--doc", default=None, help="default docs/performance.md ('none': skip)")
    p.add_argument("--report", default=None, help="default benchmarks/reports/hnsw_recall.md")
    return p.parse_args(argv)


def _log(line: str) -> None:
    print(f"{dt.datetime.now():%H:%M:%S} {line}", flush=True)


async def _corpus(args: argparse.Namespace, dsn: str) -> Any:
    if args.no_ingest:
        return await dump_cache(dsn, CACHE)
    corpus = load_cache(CACHE)
    if corpus is None:
        if not args.real_html:
            raise SystemExit("no cached corpus: give --real-html DIR (see the module docstring)")
        model = await asyncio.to_thread(_load_model)
        _log(await ingest_html(dsn, args.real_html, model, log=_log))
        corpus = await dump_cache(dsn, CACHE)
    return corpus


def _queries(corpus: Any, held_out: np.ndarray) -> dict[str, np.ndarray]:
    """The query vectors (cached): held-out children's texts and the dev questions,
    each embedded as a query by the product's model."""
    path = CACHE / f"queries_{len(corpus.ids)}_{len(held_out)}_{int(held_out.sum())}.npz"
    if not path.exists():
        model = _load_model()
        held = [model.embed_query(_passage(corpus.texts[i])) for i in held_out]
        dev = [model.embed_query(q) for q in _questions(10_000)]
        np.savez(path, held_out=np.asarray(held, np.float32), dev=np.asarray(dev, np.float32))
    z = np.load(path)
    return {"held-out children": z["held_out"], "dev questions": z["dev"]}


def _passage(text: str) -> str:
    """A child's text without the heading the contextual indexer puts before it
    (``Document: …`` and ``Section: …`` lines, then a blank line)."""
    if text.startswith("Document: ") and "\n\n" in text:
        return text.split("\n\n", 1)[1]
    return text


async def main_async(args: argparse.Namespace) -> None:
    from parrot_parents.embedded.server import resolve_dsn
    from parrot_parents.stores.postgres.collections.schema import HNSWIndex
    from parrot_parents.stores.search_options import HNSWQueryOptions

    dsn = await asyncio.to_thread(resolve_dsn, args.dsn)
    corpus = await _corpus(args, dsn)
    _log(await unnice_server(dsn))
    n = len(corpus.ids)
    rng = np.random.default_rng(args.seed)
    held_out = np.sort(rng.choice(n, size=args.held_out, replace=False))
    rest = np.setdiff1d(np.arange(n), held_out)
    order = rng.permutation(rest)
    queries = _queries(corpus, held_out)
    latency_queries = np.concatenate(list(queries.values()))
    efs = [int(e) for e in args.ef.split(",")]
    product = HNSWIndex()
    builds = [Build(product.m, product.ef_construction)]
    for spec in filter(None, args.builds.split(",")):
        m, efc = (int(x) for x in spec.split(":"))
        HNSWIndex(m, efc)  # validated as the product would
        builds.append(Build(m, efc))
    sizes = [len(rest) if s == "all" else int(s) for s in args.sizes.split(",")]
    options = HNSWQueryOptions()
    results: list[SizeResult] = []
    for size in sizes:
        vectors = corpus.vectors[np.sort(order[:size])]
        for build in builds if size == len(rest) else builds[:1]:
            results.append(
                await measure_size(
                    dsn,
                    vectors,
                    build,
                    queries,
                    efs,
                    options.iterative_scan,
                    latency_queries,
                    log=_log,
                )
            )
    ctx = await _context(dsn, args, corpus, held_out, queries)
    ctx["labels"] = {str(size): "all" if size == len(rest) else size_label(size) for size in sizes}
    saved = {"ctx": ctx, "rows": [row for r in results for row in _rows(r)]}
    (CACHE / "results.json").write_text(json.dumps(saved, indent=1), encoding="utf-8")
    _write(args, _blocks(saved))


def _rows(r: SizeResult) -> list[dict[str, Any]]:
    """One table row per ``ef_search`` of one measured table, as plain values."""
    return [
        {
            "n": r.n,
            "build": str(r.build),
            "index_mb": r.index_mb,
            "build_s": r.build_s,
            "ef": ef,
            "held_out": r.recall["held-out children"][ef],
            "dev": r.recall["dev questions"][ef],
            "p50": stat.p50,
            "p95": stat.p95,
        }
        for ef, stat in r.latency.items()
    ]


def _blocks(saved: dict[str, Any]) -> dict[str, str]:
    """The report blocks of a run's saved results, the product's default of now marked."""
    from parrot_parents.stores.search_options import HNSWQueryOptions

    ctx, rows = saved["ctx"], saved["rows"]
    return {
        f"hnsw-recall-real-{label}": _block(
            ctx, [r for r in rows if r["n"] == int(n)], HNSWQueryOptions()
        )
        for n, label in ctx["labels"].items()
    }


async def _context(
    dsn: str, args: argparse.Namespace, corpus: Any, held_out: np.ndarray, queries: Any
) -> dict[str, Any]:
    raw = await connect_raw(dsn)
    try:
        versions = await raw.fetchrow(
            "SELECT current_setting('server_version') AS pg,"
            " (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS pgvector"
        )
        parents = await raw.fetchval(f"SELECT count(*) FROM {TABLE} WHERE embedding IS NULL")
    finally:
        await raw.close()
    sources = sorted({s.split("/html/")[0] for s in corpus.sources if "/html/" in s})
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores ({cpu_model()}), Python {platform.python_version()}, "
        f"PostgreSQL {versions['pg']}, pgvector {versions['pgvector']}",
        "command": command(__name__, sys.argv[1:]),
        "checkout": _checkout(),
        "corpus": f"{len(corpus.ids):,} children ({parents:,} parent rows) of the HTML under "
        + ", ".join(f"`{s}/html`" for s in sources),
        "held_out": len(held_out),
        "dev": len(queries["dev questions"]),
    }


def _block(ctx: dict[str, Any], rows: list[dict[str, Any]], options: Any) -> str:
    """One size: recall and latency per build and ``ef_search``, the defaults marked."""
    n = rows[0]["n"]
    lines = [
        f"### Real text, {n:,} children",
        "",
        f"_{ctx['date']}, {ctx['machine']}._  ",
        f"_Code measured: {ctx['checkout']}. Command: `{ctx['command']}`._",
        "",
        f"Corpus: {ctx['corpus']}, ingested by the product's `TextLoader` (default child "
        f"size, late chunking, indexer and model). This table: {n:,} of them at random, "
        f"none of the {ctx['held_out']} held-out children. Recall@10 against exact search "
        f"(ties counted) for the {ctx['held_out']} held-out children's texts (without "
        f"the indexer's heading) and the {ctx['dev']} dev questions, each embedded as a "
        f"query; latency: the kNN statement (top 10, `iterative_scan` "
        f"{options.iterative_scan}, seqscan off), all {ctx['held_out'] + ctx['dev']} "
        "queries, every `ef_search` interleaved. ✅: the smallest `ef_search` of its build "
        "with recall@10 ≥ 0.95 on the held-out children.",
        "",
        "| HNSW build | index | ef_search | recall@10, held-out | recall@10, dev questions "
        "| p50 ms | p95 ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    from parrot_parents.stores.postgres.collections.schema import HNSWIndex

    build = HNSWIndex()
    first: dict[str, int] = {}
    for r in rows:
        if r["held_out"] >= 0.95 and r["build"] not in first:
            first[r["build"]] = r["ef"]
    for r in rows:
        built = f"{r['index_mb']:.0f} MB" + (f", {r['build_s']:.0f} s" if r["build_s"] else "")
        marks = []
        if r["ef"] == options.ef_search and r["build"] == str(
            Build(build.m, build.ef_construction)
        ):
            marks.append("default")
        if r["ef"] == PGVECTOR_DEFAULT_EF and r["build"] == "m=16, ef_construction=64":
            marks.append("pgvector's defaults, the product's before")
        label = f"{r['ef']} ({', '.join(marks)})" if marks else str(r["ef"])
        if first.get(r["build"]) == r["ef"]:
            label += " ✅"
        lines.append(
            f"| {r['build']} | {built} | {label} | {r['held_out']:.4f} | {r['dev']:.4f} | "
            f"{r['p50']:.2f} | {r['p95']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _write(args: argparse.Namespace, blocks: dict[str, str]) -> None:
    report = Path(args.report) if args.report else REPORTS / "hnsw_recall.md"
    replace_blocks(
        report,
        blocks,
        "# hnsw_recall\n\nWritten by `python -m benchmarks run hnsw_recall`; "
        "see docs/performance.md for what each table means.\n",
    )
    doc = args.doc if args.doc is not None else str(REPO_ROOT / "docs" / "performance.md")
    if doc != "none":
        replace_blocks(Path(doc), blocks, PERFORMANCE_TEMPLATE)
    _log(f"wrote {report}" + (f" and {doc}" if doc != "none" else ""))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.report_only:
        saved = json.loads((CACHE / "results.json").read_text(encoding="utf-8"))
        _write(args, _blocks(saved))
        return
    asyncio.run(main_async(args))
