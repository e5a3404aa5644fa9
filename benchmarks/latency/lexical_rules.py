# ruff: noqa: E501 - the Markdown tables are written as they appear
"""The lexical branch in SQL under candidate rules, on the scale benchmark's collections.

For each ``--children`` size, on the collection ``bench_scale_<size>`` that ``python -m
benchmarks run scale`` built (synthetic documents, ``benchmarks/latency/_scale/data.py``),
opened with ``lexical_backend="sql"``: the exact BM25 top 40 of each query
(``EXACT_CANDIDATES``: every child holding a query lexeme scored), then, the rules
interleaved query by query after a warm-up pass, each first as often as the others,
``similarity_search(q, 40, search_mode="lexical")`` under each rule: p50/p95 ms and the share of exact BM25's top 10
and top 40 it returns. A rule is ``budget:pairs:pair_budget:cap``
(:class:`~parrot_parents.stores.postgres.search.hybrid.CandidateRule`; the product's is
``default``). Writes ``benchmarks/reports/lexical_rules.md``::

    python -m benchmarks run lexical_rules [--children 100000,1000000] [--queries 40]
        [--rules 500:6:200:4000,500:6:1000:4000]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
import time
from typing import Any

import numpy as np

from benchmarks.common import CHUNKING_EVAL, REPORTS, command, commit_of, machine
from benchmarks.latency._scale.data import DIM, SyntheticCollection, load_vocabulary

OUT = REPORTS / "lexical_rules.md"
LABELS = {10_000: "10k", 100_000: "100k", 1_000_000: "1m"}


def parse_rules(spec: str) -> dict[str, Any]:
    """``default`` and each ``budget:pairs:pair_budget:cap`` of ``spec`` (cap 0: none)."""
    from parrot_parents.stores.postgres.search.hybrid import CANDIDATES, CandidateRule

    rules: dict[str, Any] = {"default": CANDIDATES}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        budget, pairs, pair_budget, cap = (int(x) for x in item.split(":"))
        rules[item] = CandidateRule(budget, pairs, pair_budget, cap=cap or None)
    return rules


async def measure(n: int, queries: int, rules: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per rule at ``n`` children: p50/p95 ms and the share of exact BM25's top
    10 and top 40 found, mean over the queries."""
    from parrot_parents import PgVectorStore
    from parrot_parents.embedded.server import resolve_dsn
    from parrot_parents.stores.postgres.search.hybrid import EXACT_CANDIDATES

    texts = list(
        SyntheticCollection(n, load_vocabulary(CHUNKING_EVAL / "corpora"))
        .queries(queries, salt=7)
        .texts
    )
    store = PgVectorStore(
        dsn=resolve_dsn(None),
        table=f"bench_scale_{LABELS[n]}",
        dimension=DIM,
        create=False,
        lexical_backend="sql",
    )
    await store.connect()
    try:

        async def top(rule: Any, text: str) -> tuple[list[str], float]:
            store.lexical_candidates = rule
            t0 = time.perf_counter()
            got = await store.similarity_search(text, limit=40, search_mode="lexical")
            return [r.id for r in got], time.perf_counter() - t0

        exact = {t: (await top(EXACT_CANDIDATES, t))[0] for t in texts}
        found: dict[str, dict[str, list[float]]] = {
            k: {"ms": [], "10": [], "40": []} for k in rules
        }
        named = list(rules.items())
        for warm in (True, False):
            for i, t in enumerate(texts):
                # The first rule to run a query reads its postings from outside shared
                # buffers: each rule goes first as often as any other.
                shift = i % len(named)
                for name, rule in named[shift:] + named[:shift]:
                    ids, took = await top(rule, t)
                    if warm:
                        continue
                    want = exact[t]
                    found[name]["ms"].append(1000 * took)
                    found[name]["10"].append(
                        len(set(ids[:10]) & set(want[:10])) / max(len(want[:10]), 1)
                    )
                    found[name]["40"].append(len(set(ids) & set(want)) / max(len(want), 1))
    finally:
        await store.close()
    return [
        {
            "n": n,
            "rule": name,
            "spec": rules[name],
            "p50": float(np.percentile(f["ms"], 50)),
            "p95": float(np.percentile(f["ms"], 95)),
            "top10": float(np.mean(f["10"])),
            "top40": float(np.mean(f["40"])),
        }
        for name, f in found.items()
    ]


def report(rows: list[dict[str, Any]], queries: int) -> str:
    lines = [
        "# The lexical branch in SQL under candidate rules",
        "",
        f"Written by `{command(__name__, sys.argv[1:])}` at {commit_of()} on "
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {machine()}. {queries} synthetic queries per size "
        "(the scale benchmark's collections), each rule after a warm-up pass, interleaved query by query (each rule first in turn); "
        '`similarity_search(q, 40, search_mode="lexical")`, BM25 in SQL. Found: the mean share of exact '
        "BM25's top 10 / top 40 the rule returns.",
        "",
        "| children | rule (budget:pairs:pair_budget:cap) | p50 ms | p95 ms | exact top 10 found | exact top 40 found |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        s = r["spec"]
        name = (
            f"**default** ({s.budget}:{s.pairs}:{s.pair_budget}:{s.cap})"
            if r["rule"] == "default"
            else r["rule"]
        )
        lines.append(
            f"| {r['n']:,} | {name} | {r['p50']:.1f} | {r['p95']:.1f} | {r['top10']:.3f} | {r['top40']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks run lexical_rules", description=__doc__)
    p.add_argument("--children", default="100000,1000000", help="sizes, comma-separated")
    p.add_argument("--queries", type=int, default=40)
    p.add_argument(
        "--rules",
        default="500:6:200:4000,500:6:1000:4000,500:6:1000000000:4000",
        help="rules beside the default",
    )
    args = p.parse_args(argv)
    rules = parse_rules(args.rules)
    rows: list[dict[str, Any]] = []
    for n in (int(s) for s in args.children.split(",")):
        rows += asyncio.run(measure(n, args.queries, rules))
    text = report(rows, args.queries)
    OUT.write_text(text, encoding="utf-8")
    print(text)
