# ruff: noqa: E501 - the Markdown tables are written as they appear
"""The shared dev set with each lexical backend, in one run.

Every cell is ``parrot-parents eval --budget B`` (B = 1000, 2000, 4000 characters) in its
own process, scored at its own budget, the rows interleaved budget by budget:

* **pg_textsearch**: ``--lexical-backend pg_textsearch``, the collection ranks BM25 with
  pg_textsearch's ``bm25`` index (the default on a server with 1.1.0 or newer);
* **BM25 in SQL**: ``--lexical-backend sql``, what a server without pg_textsearch (most
  managed PostgreSQL) or with its 1.0.0 (the embedded server) gives.

Query p50/p95 include the query embedding; ingest is each run's own (the pg_textsearch
index is kept up to date as the children are written). Writes the section
``<!-- lexical-backends:start -->`` of ``docs/benchmarks.md``::

    python -m benchmarks run lexical_backends      # ~7 min
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO_ROOT, machine, replace_section
from benchmarks.quality.default_levers import _run

DOC = REPO_ROOT / "docs" / "benchmarks.md"
MARKER = "lexical-backends"
BUDGETS = (1000, 2000, 4000)
ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "pg_textsearch's `bm25` index (`--lexical-backend pg_textsearch`)",
        ("--lexical-backend", "pg_textsearch"),
    ),
    (
        "BM25 in SQL (`--lexical-backend sql`; the default on pg_textsearch 1.0.0)",
        ("--lexical-backend", "sql"),
    ),
)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results: dict[tuple[int, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for budget in BUDGETS:
            for i, (name, flags) in enumerate(ROWS):
                out = Path(tmp) / f"{i}-{budget}.jsonl"
                results[(i, budget)] = r = _run(flags, budget, None, out)
                print(f"{name} @{budget}: {r['recall']:.4f} p50 {r['p50']:.1f} ms", flush=True)
    head = "| lexical backend | " + " | ".join(f"recall@{b}c" for b in BUDGETS)
    head += " | " + " | ".join(f"query p50 / p95 ms @{b}" for b in BUDGETS)
    head += " | ingest tokens/s (median of the 3 runs) |"
    lines = [head, "|---|" + "---:|" * (2 * len(BUDGETS) + 1)]
    for i, (name, _) in enumerate(ROWS):
        cells = [f"{results[(i, b)]['recall']:.3f}" for b in BUDGETS]
        cells += [f"{results[(i, b)]['p50']:.1f} / {results[(i, b)]['p95']:.1f}" for b in BUDGETS]
        cells.append(f"{statistics.median(results[(i, b)]['ingest_tps'] for b in BUDGETS):,.0f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    body = "\n".join(
        [
            *lines,
            "",
            f"Each cell is one `parrot-parents eval --budget B` run on the 276 dev questions (all three corpora in one collection), query embedding included. {machine()}. Generated {started}.",
            "",
            "Regenerate with `python -m benchmarks run lexical_backends`.",
        ]
    )
    replace_section(DOC, MARKER, body, heading="## Lexical backends")
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
