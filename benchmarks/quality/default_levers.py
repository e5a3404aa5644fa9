# ruff: noqa: E501 - the Markdown tables are written as they appear
"""What each lever of the defaults adds, and the defaults as they were, in one run.

On the shared dev set, every row is ``parrot-parents eval --budget B`` (B = 1000, 2000,
4000 characters) with the flags of its row, each run in its own process and scored at its
own budget:

* **defaults**: no flags (sentence trimming on, late chunking on, indexed rows read as the
  child in its parent plus the header alone);
* **defaults, no trimming**: ``--no-trim`` (whole children, the last one cut);
* **defaults, late chunking off**: ``--no-late-chunking`` (each row read alone; no sentence
  vectors, so trimming is skipped and says so);
* **plain, late chunking on**: ``--strategy plain`` (children searched as themselves);
* **defaults as they were**: the same command run with an older checkout's code
  (``--src``, default the checkout of the last stop), so the gain is measured side by side.

The runs interleave: for each budget, every row once, in the order above; query p50 and p95
(query embedding included) are each run's own, so the rows of one budget ran under the same
load. Writes the section ``<!-- default-levers:start -->`` of ``docs/benchmarks.md``::

    python -m benchmarks run default_levers [--src /path/to/older/checkout]   # ~15 min
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import CHUNKING_EVAL, REPO_ROOT, machine, replace_section

DOC = REPO_ROOT / "docs" / "benchmarks.md"
MARKER = "default-levers"
BUDGETS = (1000, 2000, 4000)
ROWS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("**defaults**", (), False),
    ("defaults, no trimming (`--no-trim`)", ("--no-trim",), False),
    ("defaults, late chunking off (`--no-late-chunking`)", ("--no-late-chunking",), False),
    ("plain, late chunking on (`--strategy plain`)", ("--strategy", "plain"), False),
    ("defaults as they were (`--src`)", (), True),
)


def _run(flags: tuple[str, ...], budget: int, src: Path | None, out: Path) -> dict[str, float]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    cmd = [
        sys.executable,
        "-m",
        "parrot_parents",
        "eval",
        "--questions",
        str(CHUNKING_EVAL / "questions.csv"),
        "--corpora",
        str(CHUNKING_EVAL / "corpora"),
        "--out",
        str(out),
        "--budget",
        str(budget),
        "--ks",
        "1,5",
        "--budgets",
        str(budget),
        "--json",
        *flags,
    ]
    done = subprocess.run(
        cmd, env=env, cwd=src or REPO_ROOT, capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout)
    return {
        "recall": float(result["metrics"][f"recall@{budget}c"]),
        "p50": float(result["timings"]["query_p50_ms"]),
        "p95": float(result["timings"]["query_p95_ms"]),
        "ingest_tps": float(result["timings"]["ingest_tokens_per_second"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, required=True, help="the older checkout")
    args = parser.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results: dict[tuple[int, int], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for budget in BUDGETS:
            for i, (name, flags, old) in enumerate(ROWS):
                out = Path(tmp) / f"{i}-{budget}.jsonl"
                results[(i, budget)] = _run(flags, budget, args.src if old else None, out)
                r = results[(i, budget)]
                print(f"{name} @{budget}: {r['recall']:.4f} p50 {r['p50']:.1f} ms", flush=True)
    head = "| run | " + " | ".join(f"recall@{b}c" for b in BUDGETS)
    head += " | " + " | ".join(f"query p50 / p95 ms @{b}" for b in BUDGETS) + " |"
    lines = [head, "|---|" + "---:|" * (2 * len(BUDGETS))]
    for i, (name, _, _) in enumerate(ROWS):
        cells = [f"{results[(i, b)]['recall']:.3f}" for b in BUDGETS]
        cells += [f"{results[(i, b)]['p50']:.1f} / {results[(i, b)]['p95']:.1f}" for b in BUDGETS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    old = len(ROWS) - 1
    ratios = ", ".join(
        f"{results[(0, b)]['p50'] / results[(old, b)]['p50']:.2f}× at {b}" for b in BUDGETS
    )
    src = subprocess.run(
        ["git", "-C", str(args.src), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    body = "\n".join(
        [
            *lines,
            "",
            f"Query p50 of the defaults against the defaults as they were, same budget, same load: {ratios}.",
            "",
            f"Each cell is one `parrot-parents eval --budget B` run on the 276 dev questions (all three corpora in one collection); the older checkout is at `{src or '?'}`. {machine()}. Generated {started}.",
            "",
            "Regenerate with `python -m benchmarks run default_levers --src <older checkout>`.",
        ]
    )
    replace_section(DOC, MARKER, body)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
