# ruff: noqa: E501 - the Markdown tables are written as they appear
"""Sentence trimming's two settings, whole-child share and rank decay, on the dev set.

The dev corpora are ingested once with the defaults into a fresh collection of the embedded
PostgreSQL (dropped afterwards); every question is searched once with the defaults of a
budgeted call (hybrid, 20 children); then the same hits are packed at 1000, 2000 and 4000
characters without trimming and with trimming at each point of the grid
(:func:`parrot_parents.retrieval.trimming.choose_sentences`), and scored with the package's
scorer. Only the packer changes between cells, so the table isolates it. Writes the
section ``<!-- trim-grid:start -->`` of ``docs/benchmarks.md``::

    python -m benchmarks run trim_grid      # a few minutes
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import numpy as np

from benchmarks.common import CHUNKING_EVAL, REPO_ROOT, machine, replace_section
from parrot_parents.eval.questions import load_corpora, load_questions
from parrot_parents.eval.runner import EvalConfig, _Session
from parrot_parents.eval.scorer import score_run
from parrot_parents.retrieval.packing import pack
from parrot_parents.retrieval.passages import Hit, Passage
from parrot_parents.retrieval.trimming import RANK_DECAY, WHOLE_SHARE

DOC = REPO_ROOT / "docs" / "benchmarks.md"
BUDGETS = (1000, 2000, 4000)
SHARES = (0.0, 0.3, 0.5, 0.7)
DECAYS = (0.05, 0.1, 0.2)


async def _measure() -> list[tuple[str, list[float]]]:
    questions = load_questions(CHUNKING_EVAL / "questions.csv")
    corpora = load_corpora(CHUNKING_EVAL / "corpora")
    session = _Session(EvalConfig())
    try:
        await session.ingest(corpora)
        hits: dict[int, list[Hit]] = {}
        vectors: dict[int, np.ndarray] = {}
        for q in questions:
            rows = await session.store.similarity_search(q.question, limit=20, search_mode="hybrid")
            hits[q.qid] = [Hit.from_result(r, i) for i, r in enumerate(rows)]
            v = np.asarray(await session.store.embedding.aembed_query(q.question), np.float32)
            vectors[q.qid] = v / np.linalg.norm(v)
    finally:
        await session.close()

    def score(trim: bool, **settings: float) -> list[float]:
        out = []
        for budget in BUDGETS:
            run: dict[int, Any] = {}
            for q in questions:
                h = hits[q.qid]
                packed = pack(
                    [Passage.from_hit(x) for x in h],
                    h,
                    budget,
                    trim=trim,
                    query=vectors[q.qid],
                    **settings,
                )
                run[q.qid] = [(p.document_id, p.start_index, p.end_index) for p in packed.passages]
            out.append(float(score_run(questions, run, (5,), (budget,))[f"recall@{budget}c"]))
        return out

    rows = [("no trimming (whole children, the last one cut)", score(False))]
    for share in SHARES:
        for decay in DECAYS:
            name = f"share {share}, decay {decay}"
            if (share, decay) == (WHOLE_SHARE, RANK_DECAY):
                name = f"**{name} (the defaults)**"
            rows.append((name, score(True, whole_share=share, rank_decay=decay)))
    return rows


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = asyncio.run(_measure())
    lines = [
        "| packing | " + " | ".join(f"recall@{b}c" for b in BUDGETS) + " |",
        "|---|" + "---:|" * len(BUDGETS),
    ]
    lines += [
        f"| {name} | " + " | ".join(f"{v:.3f}" for v in values) + " |" for name, values in rows
    ]
    body = "\n".join(
        [
            *lines,
            "",
            f"The same hits per question in every row (hybrid, 20 children, the defaults' ingest); only the packer changes. {machine()}. Generated {started}.",
            "",
            "Regenerate with `python -m benchmarks run trim_grid`.",
        ]
    )
    replace_section(DOC, "trim-grid", body)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
