# ruff: noqa: E501 - the Markdown tables are written as they appear
"""Filtered search against unfiltered, at every selectivity and kind of filter.

On the scale benchmark's synthetic collection (``bench_scale_<size>``, built by the same
code and reused: ``_scale/data.py``), every filter of
:mod:`benchmarks.latency._filters.cases` (equality, ``$in``, a numeric range, a bot's
scope ANDed with a range; keeping 0.1 %, 1 %, 5 %, 20 % and 50 % of the children) is
asked through ``get_vector_context`` with parent expansion (query vector given, the model
bypassed), dense and with the package defaults (hybrid), interleaved query by query with
the same two searches unfiltered (``_scale/query.py``), so each ratio is measured side by
side. Per cell: p50 and p95 in ms, the ratio of the p50 to the unfiltered one, the plans
the searches ran (``meta["filter_plan"]["search"]``), recall@10 of the store's dense
search against the exact filtered ranking (numpy over every child's vector), and the
lexical branch's top 10 against exact BM25 over the children the filter keeps (the SQL
backend scoring every child holding a query lexeme).

``--filter-keys`` gives the table exactly these filter keys first
(:mod:`parrot_parents.stores.postgres.collections.filter_keys`; ``none``: drops every one),
so a run measures the collection as a user who declared them, or not, would have it, with
the graphs the product builds for their large values
(:mod:`parrot_parents.stores.postgres.collections.value_graphs`), or without them
(``--value-graphs off`` drops them and builds none). The unfiltered dense search's own
recall@10 on the same questions is reported beside its latency. The
package defaults rank BM25 in SQL (``--lexical-backend``), as on a server without
pg_textsearch or with its release 1.0.0, which ``auto`` passes over.

``--text real`` asks the same kinds of filter of real text instead: the distractor
benchmark's collection (the dev corpora among pages of Debian's manuals, 384-dimensional
vectors of the default model, the default ingestion), with the dev questions embedded by
that model, and the filters of :mod:`benchmarks.latency._filters.real` (on the pages'
package, their position, and lists of documents).

Writes benchmarks/reports/filters.md and a section per size, text and keys in
docs/performance.md::

    python -m benchmarks run filters --filter-keys none   # 100k (built once, ~2 min)
    python -m benchmarks run filters --filter-keys rank,tenant,kind,region,half
    python -m benchmarks run filters --children 1000000 --queries 40 ...  # after the 1M build
    python -m benchmarks run distractors --build-only     # real text (one to two hours)
    python -m benchmarks run filters --text real --children 100000 --filter-keys none
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    CHUNKING_EVAL,
    REPO_ROOT,
    REPORTS,
    command,
    commit_of,
    machine,
    replace_section,
)
from benchmarks.latency._filters.cases import (
    KINDS,
    SELECTIVITIES,
    SYNTHETIC_COLUMNS,
    Case,
    Children,
    case,
    set_filter_keys,
)
from benchmarks.latency._filters.real import REAL_COLUMNS, RealCases
from benchmarks.latency._scale.data import DIM, SyntheticCollection, load_vocabulary
from benchmarks.latency._scale.embed import LookupEmbedding
from benchmarks.latency._scale.load import build_ours, connect_raw, size_label
from benchmarks.latency._scale.query import Variant, interleave, unique_texts

DOC = REPO_ROOT / "docs" / "performance.md"
REPORT = REPORTS / "filters.md"
MODES = {"dense": {"search_mode": "dense"}, "defaults": {}}


def _share(permille: int) -> str:
    return f"{permille / 10:g} %"


async def _backend(dsn: str) -> str | None:
    raw = await connect_raw(dsn)
    try:
        found = await raw.fetchval(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_textsearch'"
        )
    finally:
        await raw.close()
    return "pg_textsearch" if found else None


def _store_factory(dsn: str) -> Any:
    """``(table, **options) -> PgVectorStore`` on ``dsn``, 384-dimensional."""

    def store_factory(name: str, **kw: Any) -> Any:
        from parrot_parents import PgVectorStore

        return PgVectorStore(dsn=dsn, table=name, dimension=DIM, **kw)

    return store_factory


async def _synthetic(args: argparse.Namespace, dsn: str, n: int) -> dict[str, Any]:
    """The synthetic collection of ``n`` children (built or reused), its query vectors
    and cases."""
    label = size_label(n)
    table = f"bench_scale_{label}"
    coll = SyntheticCollection(n, load_vocabulary(CHUNKING_EVAL / "corpora"))

    store_factory = _store_factory(dsn)
    build = await build_ours(dsn, store_factory, coll, table, args.rebuild, await _backend(dsn))
    print(f"[{label}] {build}", flush=True)
    qs = coll.queries(args.queries + args.warmup, salt=5)
    texts = unique_texts(qs.texts)
    return {
        "label": label,
        "table": table,
        "build": build,
        "factory": store_factory,
        "texts": texts,
        "vectors": qs.vectors,
        "columns": SYNTHETIC_COLUMNS,
        "embedding": LookupEmbedding(dict(zip(texts, qs.vectors, strict=True)), DIM, as_numpy=True),
        "case": case,
    }


async def _real(args: argparse.Namespace, dsn: str, n: int) -> dict[str, Any]:
    """The distractor benchmark's collection of ``n`` children (it must be built), the
    dev questions embedded by its model, and the cases of :mod:`._filters.real`."""
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
    from parrot_parents.eval.questions import load_questions
    from parrot_parents.stores.postgres.collections.model_contract import PROBE_TEXT

    table = f"bench_distractors_{n}"
    raw = await connect_raw(dsn)
    try:
        if not await raw.fetchval("SELECT to_regclass($1) IS NOT NULL", table):
            raise SystemExit(
                f"no table {table}: build it with `python -m benchmarks run distractors"
                f" --children {n} --build-only` on this server first"
            )
        children = await Children.read(raw, table, REAL_COLUMNS)
    finally:
        await raw.close()
    cases = RealCases(children)
    questions = [q.question for q in load_questions(CHUNKING_EVAL / "questions.csv")]
    order = np.random.default_rng(7).permutation(len(questions))
    texts = unique_texts(
        [questions[j % len(questions)] for j in order[: args.queries + args.warmup]]
    )
    model = SentenceTransformerEmbeddings()
    # Each as the store asks the model for a query's vector.
    vectors = np.stack([np.asarray(model.embed_query(t), dtype=np.float32) for t in texts])
    probe = np.asarray(model.embed_query(PROBE_TEXT), dtype=np.float32)
    lookup = LookupEmbedding(
        dict(zip(texts, vectors, strict=True)), DIM, as_numpy=True, probe=probe
    )

    store_factory = _store_factory(dsn)
    return {
        "label": size_label(n),
        "table": table,
        "build": {"children": len(children.ids), "documents": len(cases.counts)},
        "factory": store_factory,
        "texts": texts,
        "vectors": vectors,
        "columns": REAL_COLUMNS,
        "embedding": lookup,
        "case": cases.case,
        "children": children,
    }


async def measure(args: argparse.Namespace, dsn: str, n: int) -> dict[str, Any]:
    from parrot_parents import Chatbot, InTableParentSearcher
    from parrot_parents.stores.postgres.search.hybrid import CANDIDATES, EXACT_CANDIDATES

    work = await (_real if args.text == "real" else _synthetic)(args, dsn, n)
    label, table, store_factory = work["label"], work["table"], work["factory"]
    texts, vectors, case_of = work["texts"], work["vectors"], work["case"]
    out: dict[str, Any] = {"n": n, "label": label, "table": table, "build": work["build"]}
    if args.build_only:
        return out
    raw = await connect_raw(dsn)
    t = time.perf_counter()
    graphs = args.value_graphs == "on"
    out["filter_keys"] = await set_filter_keys(raw, table, args.filter_keys, store_factory, graphs)
    out["value_graphs"] = graphs
    print(f"[{label}] filter keys {out['filter_keys']} ({time.perf_counter() - t:.1f} s)")
    await raw.close()

    lookup = work["embedding"]
    store = store_factory(
        table, embedding=lookup, create=False, lexical_backend=args.lexical_backend
    )
    await store.connect()
    searcher = InTableParentSearcher(store=store)
    bot = Chatbot(parent_searcher=searcher, expand_to_parent=True)
    scoped_bots: dict[str, Any] = {}

    def bot_for(c: Case | None) -> Any:
        if c is None or c.scope is None:
            return bot
        key = json.dumps(c.scope, sort_keys=True)
        if key not in scoped_bots:
            scoped_bots[key] = Chatbot(
                parent_searcher=searcher, expand_to_parent=True, scope=c.scope
            )
        return scoped_bots[key]

    plans: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)

    def call(key: str, mode: str, cell: tuple[str, int] | None) -> Any:
        async def run(i: int) -> None:
            c: Case | None = case_of(*cell, i) if cell else None
            who = bot_for(c)
            kw: dict[str, Any] = dict(MODES[mode])
            if c is not None:
                kw["filter"] = c.filter
            _, meta = await who.get_vector_context(texts[i], **kw)
            plan = meta.get("filter_plan")
            if plan:
                checked = plan.get("checked")
                search = plan["search"] + (f" ({', '.join(checked)} checked)" if checked else "")
                plans[key][search] += 1

        return run

    variants = [Variant(f"none/{m}", f"unfiltered, {m}", call(f"none/{m}", m, None)) for m in MODES]
    # A cell whose filter the data cannot make (real text: an equality keeping 50 %) is left out.
    cells = [
        (k, s)
        for k in args.kinds
        for s in args.selectivities
        if all(case_of(k, s, i) is not None for i in range(args.queries + args.warmup))
    ]
    for k, s in cells:
        for m in MODES:
            key = f"{k}/{s}/{m}"
            variants.append(Variant(key, key, call(key, m, (k, s))))
    print(f"[{label}] {len(variants)} variants x {args.queries} queries", flush=True)
    t = time.perf_counter()
    stats = await interleave(variants, args.queries, args.warmup, seed=n)
    print(f"[{label}] timed in {time.perf_counter() - t:.0f} s", flush=True)

    print(f"[{label}] recall", flush=True)
    children = work.get("children")
    if children is None:
        raw = await connect_raw(dsn)
        children = await Children.read(raw, table, work["columns"])
        await raw.close()
    ref = store_factory(table, embedding=lookup, create=False, lexical_backend="sql")
    await ref.connect()
    ref.lexical_candidates = EXACT_CANDIDATES
    recall: dict[tuple[str, int], tuple[float, float, float]] = {}
    # The unfiltered dense search's recall on the same questions: how hard the collection's
    # graph finds them before any filter.
    every = np.ones(len(children.ids), dtype=bool)
    unfiltered = []
    for i in range(args.recall_queries):
        want = children.top(vectors[i], every)
        got = await store.similarity_search_by_vector(vectors[i], 10)
        unfiltered.append(len(want & {r.id for r in got}) / max(1, len(want)))
    out["unfiltered_recall"] = statistics.mean(unfiltered)
    print(f"[{label}]   unfiltered: dense {out['unfiltered_recall']:.3f}", flush=True)
    for k, s in cells:
        dense, lexical, kept = [], [], []
        for i in range(args.recall_queries):
            c = case_of(k, s, i)
            mask = c.keeps(children)
            kept.append(float(mask.sum()))
            want = children.top(vectors[i], mask)
            got = await store.similarity_search_by_vector(vectors[i], 10, filter=c.whole)
            dense.append(len(want & {r.id for r in got}) / max(1, len(want)))
            exact = await ref.similarity_search_by_vector(
                None, 10, filter=c.whole, search_mode="lexical", query=texts[i]
            )
            found = await store.similarity_search_by_vector(
                None, 10, filter=c.whole, search_mode="lexical", query=texts[i]
            )
            best = {r.id for r in exact}
            if best:
                lexical.append(len(best & {r.id for r in found}) / len(best))
        recall[(k, s)] = (
            statistics.mean(dense),
            statistics.mean(lexical) if lexical else float("nan"),
            statistics.mean(kept),
        )
        print(
            f"[{label}]   {k}/{s}: dense {recall[(k, s)][0]:.3f} lexical {recall[(k, s)][1]:.3f}",
            flush=True,
        )
    ref.lexical_candidates = CANDIDATES
    await ref.close()
    await store.close()
    out.update(stats=stats, plans=plans, recall=recall, cells=cells, backend=store.lexical_backend)
    return out


def table_of(result: dict[str, Any], args: argparse.Namespace) -> list[str]:
    stats, plans, recall = result["stats"], result["plans"], result["recall"]
    base = {m: stats[f"none/{m}"].p50 for m in MODES}
    keys = ", ".join(f"`{k}`" for k in result["filter_keys"]) or "none"
    if result["filter_keys"] and not result["value_graphs"]:
        keys += " (no value graphs)"
    lines = [
        f"#### {result['label']} children (`{result['table']}`{', real text' if args.text == 'real' else ''}), filter keys: {keys}",
        "",
        f"Unfiltered: dense p50 {base['dense']:.2f} ms (p95 {stats['none/dense'].p95:.2f}, "
        f"recall@10 {result.get('unfiltered_recall', float('nan')):.3f} against the exact "
        "ranking of every child), "
        f"package defaults p50 {base['defaults']:.2f} ms (p95 {stats['none/defaults'].p95:.2f}); "
        f"defaults rank BM25 by `{args.lexical_backend}`.",
        "",
        "| filter | kept (mean) | dense p50 ms (× unfiltered) | dense p95 ms (× own p50) | defaults p50 ms (× unfiltered) | defaults p95 ms (× own p50) | dense recall@10 | lexical top 10 | plans (dense; defaults) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    def plan(key: str) -> str:
        c = plans.get(key, {})
        return ", ".join(f"{p} {n}" for p, n in sorted(c.items(), key=lambda x: -x[1])) or "-"

    for k, s in result["cells"]:
        d, h = stats[f"{k}/{s}/dense"], stats[f"{k}/{s}/defaults"]
        dr, lr, kept = recall[(k, s)]

        lines.append(
            f"| {k}, {_share(s)} | {kept:,.0f} "
            f"| {d.p50:.2f} ({d.p50 / base['dense']:.2f}×) | {d.p95:.2f} ({d.p95 / d.p50:.2f}×) "
            f"| {h.p50:.2f} ({h.p50 / base['defaults']:.2f}×) | {h.p95:.2f} ({h.p95 / h.p50:.2f}×) "
            f"| {dr:.3f} | {lr:.3f} | {plan(f'{k}/{s}/dense')}; {plan(f'{k}/{s}/defaults')} |"
        )
    return [*lines, "", warm_up_line(result, args.warmup)]


def warm_up_line(result: dict[str, Any], warmup: int) -> str:
    """The warm-up's latencies (``warmup`` queries a cell) beside the timed ones: the
    cells whose warm-up p50 is furthest over their timed p50 (a filter value's first
    search reads its own graph from outside the server's buffers)."""
    stats = result["stats"]
    rows = []
    for k, s in result["cells"]:
        for m in MODES:
            st = stats[f"{k}/{s}/{m}"]
            if st.warm:
                warm = statistics.median(st.warm)
                rows.append((warm / st.p50, f"{k}, {_share(s)}, {m}", warm, max(st.warm), st.p50))
    if not rows:
        return "No warm-up."
    worst = sorted(rows, reverse=True)[:3]
    said = "; ".join(
        f"{label}: p50 {warm:.2f} ms, max {top:.2f} ms ({ratio:.2f}× the timed p50 {p50:.2f})"
        for ratio, label, warm, top, p50 in worst
    )
    return f"Warm-up ({warmup} queries per cell, timed apart, not in the table), furthest over the timed p50: {said}."


def render(results: list[dict[str, Any]], args: argparse.Namespace, argv: list[str]) -> str:
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    body = [
        f"_{started}; {machine()}; {commit_of()}. Command: `{command(__name__, argv)}`._",
        "",
        f"{args.queries} queries per cell ({args.warmup} more to warm up), every variant of a "
        "query run in a shuffled order before the next query; recall over the first "
        f"{args.recall_queries}. `get_vector_context` with parent expansion, query vectors "
        f"given; the defaults' BM25 ranked by `{args.lexical_backend}`.",
        "",
    ]
    for r in results:
        if "stats" in r:
            body += [*table_of(r, args), ""]
    return "\n".join(body).rstrip()


def main(argv: list[str] | None = None) -> int:
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--children", default="100000", help="sizes, comma-separated")
    p.add_argument("--queries", type=int, default=60)
    p.add_argument(
        "--warmup",
        type=int,
        default=20,
        help="warm-up queries per cell, timed apart (20: each of the 20 values of the 5 %% "
        "equality's key gets its first search, which reads its graph into the buffers)",
    )
    p.add_argument("--recall-queries", type=int, default=30)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--selectivities", default=",".join(map(str, SELECTIVITIES)), help="per mille")
    p.add_argument(
        "--filter-keys",
        default="none",
        help="the filter keys the table is given first, comma-separated ('none': none)",
    )
    p.add_argument(
        "--value-graphs",
        default="on",
        choices=["on", "off"],
        help="off: the filter keys' value graphs dropped, none built (on: the default)",
    )
    p.add_argument("--lexical-backend", default="sql", choices=["sql", "pg_textsearch"])
    p.add_argument(
        "--text",
        default="synthetic",
        choices=["synthetic", "real"],
        help="real: the distractor benchmark's collection of --children (built by it)",
    )
    p.add_argument("--build-only", action="store_true")
    p.add_argument("--rebuild", action="store_true")
    p.add_argument("--dsn", default=None, help="default: $PARROT_PARENTS_DSN, else embedded")
    p.add_argument("--report", default=str(REPORT), help="'none': print only")
    p.add_argument("--doc", default=str(DOC), help="'none': leave docs/performance.md alone")
    args = p.parse_args(argv)
    args.kinds = [k for k in args.kinds.split(",") if k]
    args.selectivities = [int(s) for s in args.selectivities.split(",") if s]
    args.filter_keys = [] if args.filter_keys == "none" else args.filter_keys.split(",")
    from parrot_parents.embedded.server import resolve_dsn

    dsn = resolve_dsn(args.dsn)
    results = [asyncio.run(measure(args, dsn, int(n))) for n in args.children.split(",")]
    if args.build_only:
        return 0
    body = render(results, args, argv)
    print(body)
    sizes = "-".join(r["label"] for r in results)
    real = "-real" if args.text == "real" else ""
    keyed = "plain"
    if args.filter_keys:
        keyed = "keyed" if args.value_graphs == "on" else "keyed-nographs"
    name = f"filters-{sizes}{real}-{keyed}"
    if args.report != "none":
        heading = f"## {sizes}, real text" if real else f"## {sizes}"
        replace_section(Path(args.report), name, body, heading=heading)
    if args.doc != "none":
        replace_section(Path(args.doc), name, body, heading="## Filters at every selectivity")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
