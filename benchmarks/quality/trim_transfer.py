# ruff: noqa: E501 - the Markdown tables are written as they appear
"""Sentence trimming's two settings chosen by the transfer protocol, not on the dev set.

The transfer protocol (:mod:`benchmarks.quality.transfer`) leaves one corpus out and
chooses a tuned parameter on the others. Trimming's whole-hit share and rank decay
(:mod:`parrot_parents.retrieval.trimming`) are no options of ``eval``, so that protocol
cannot tune them; this benchmark does, on the packer alone:

1. Each data set of the protocol (the dev set's three corpora in one collection, and
   ``structured_eval`` in its own) is ingested once with the defaults, by ``eval``'s own
   session.
2. For each budget B (1000, 2000, 4000 characters) every question is asked through the
   bot exactly as ``parrot-parents eval --budget B`` asks it, and what the pipeline hands
   the packer (passages, hits, the question's vector) is recorded. The bot's own passages
   must equal the recorded inputs packed again with the defaults (checked).
3. The same inputs are packed without trimming and with each point of the grid
   (:data:`SHARES` × :data:`DECAYS`); each cell is a run file scored per corpus by the
   shared scorer (``../shared/benchmarks/score.py``).
4. Per fold and budget the grid point with the best mean recall over the fold's tuning
   corpora is chosen (:func:`~benchmarks.quality.transfer.choose_on_others`; the defaults
   first, so a tie keeps them) and scored on the corpus left out. The rule
   (:func:`~benchmarks.quality.transfer.lever_verdict`: paired bootstrap intervals per
   fold and budget, and the effect pooled over every fold's questions) is applied to
   trimming at the defaults and to trimming at the settings chosen on the other folds,
   each against no trimming, question by question.

Only the packer changes between cells, so the search and the ingest are the same for all.
Writes the section ``<!-- trim-transfer:start -->`` of ``docs/benchmarks.md``; run files
go to ``.bench/runs/trim_transfer/``::

    nice -n 19 python -m benchmarks run trim_transfer      # a few minutes on 2 shared cores
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.common import REPO_ROOT, command, commit_of, machine, replace_section
from benchmarks.quality.transfer import (
    CORPORA,
    DATA_SETS,
    SAME_TEXT,
    DataSet,
    Verdict,
    _effect,
    _shared_scorer,
    budgets_of,
    choose_on_others,
    lever_verdict,
    make_folds,
    print_verdicts,
    protocol_parser,
    score_per_corpus,
    verdict_text,
)
from parrot_parents.eval.questions import load_corpora, load_questions
from parrot_parents.eval.runner import EvalConfig, _Session, passage_span
from parrot_parents.eval.scorer import mean_of, score_per_question, write_run
from parrot_parents.retrieval import pipeline
from parrot_parents.retrieval.packing import pack
from parrot_parents.retrieval.passages import Hit, Passage
from parrot_parents.retrieval.trimming import RANK_DECAY, WHOLE_SHARE

MARKER = "trim-transfer"
RUNS = REPO_ROOT / ".bench" / "runs" / "trim_transfer"
SHARES = (0.0, 0.3, 0.5, 0.7, 0.9, 1.0)
DECAYS = (0.05, 0.1, 0.2)
NO_TRIM = "no-trim"


@dataclass(frozen=True)
class Packed:
    """What the pipeline handed the packer for one question."""

    passages: list[Passage]
    hits: list[Hit]
    query: np.ndarray | None


def slug(share: float, decay: float) -> str:
    """The run files' name of a grid point."""
    return f"share-{share:g}-decay-{decay:g}"


DEFAULT_SLUG = slug(WHOLE_SHARE, RANK_DECAY)
#: Grid points, the defaults first (a tie keeps them): ``{slug: (share, decay)}``.
GRID: dict[str, tuple[float, float]] = {DEFAULT_SLUG: (WHOLE_SHARE, RANK_DECAY)}
GRID.update({slug(s, d): (s, d) for s in SHARES for d in DECAYS})


async def _record(data: DataSet, budgets: Sequence[int]) -> dict[int, dict[int, Packed]]:
    """``{budget: {qid: the packer's inputs}}``, each checked against the bot's output."""
    questions = load_questions(data.questions)
    corpora = load_corpora(data.corpora)
    session = _Session(EvalConfig())
    seen: list[Packed] = []

    def recorder(passages: Any, hits: Any, budget: int, **kw: Any) -> Any:
        seen.append(Packed(list(passages), list(hits), kw.get("query")))
        return pack(passages, hits, budget, **kw)

    out: dict[int, dict[int, Packed]] = {}
    pipeline.pack = recorder  # type: ignore[assignment]
    try:
        await session.ingest(corpora)
        for budget in budgets:
            options = EvalConfig(budget=budget).options()
            out[budget] = {}
            for q in questions:
                seen.clear()
                retrieval = await session.bot.retrieve(q.question, options)
                if len(seen) != 1 or seen[0].query is None:
                    raise RuntimeError(f"question {q.qid}: the packer was not asked to trim once")
                again = pack(seen[0].passages, seen[0].hits, budget, trim=True, query=seen[0].query)
                ours = [passage_span(p, corpora) for p in retrieval.passages]
                if [passage_span(p, corpora) for p in again.passages] != ours:
                    raise RuntimeError(f"question {q.qid}: packing again differs from the bot's")
                out[budget][q.qid] = seen[0]
            print(f"{data.name} @{budget}: {len(questions)} questions recorded", flush=True)
    finally:
        pipeline.pack = pack  # type: ignore[assignment]
        await session.close()
    return out


def _score(
    data: DataSet, recorded: dict[int, dict[int, Packed]], scorer: Any
) -> dict[tuple[str, str, int], list[float]]:
    """Every grid point and no trimming, on the recorded inputs: ``{(slug, corpus, B):
    recall of each of the corpus's questions, in file order}``, their means checked
    against the shared scorer."""
    corpora = load_corpora(data.corpora)
    questions = load_questions(data.questions)
    scores: dict[tuple[str, str, int], list[float]] = {}
    for budget, per_question in recorded.items():
        cells: list[tuple[str, dict[str, Any]]] = [(NO_TRIM, {"trim": False})]
        cells += [
            (name, {"trim": True, "whole_share": s, "rank_decay": d})
            for name, (s, d) in GRID.items()
        ]
        for name, kw in cells:
            run = {}
            for qid, inputs in per_question.items():
                packed = pack(inputs.passages, inputs.hits, budget, query=inputs.query, **kw)
                run[qid] = [passage_span(p, corpora) for p in packed.passages]
            path = RUNS / f"{name}-{data.name}-{budget}.jsonl"
            write_run(path, run)
            values = score_per_question(questions, run, [1], [budget])[f"recall@{budget}c"]
            by_corpus: dict[str, list[float]] = {}
            for q, value in zip(questions, values, strict=True):
                by_corpus.setdefault(q.corpus_id, []).append(value)
            for corpus, recall in score_per_corpus(scorer, data.questions, path, budget).items():
                if abs(mean_of(by_corpus[corpus]) - recall) > 1e-9:
                    raise RuntimeError(
                        f"{name} @{budget}: {corpus} scored apart from the shared scorer"
                    )
                scores[(name, corpus, budget)] = by_corpus[corpus]
    return scores


def _label(name: str) -> str:
    share, decay = GRID[name]
    return f"{share:g} / {decay:g}"


def render(
    per_question: dict[tuple[str, str, int], list[float]], budgets: Sequence[int]
) -> tuple[str, list[tuple[str, Verdict]]]:
    """The section's tables and the verdicts (trimming at the defaults, and at the
    settings chosen on the other folds, each against no trimming), from per-question recall."""
    scores = {k: mean_of(v) for k, v in per_question.items()}
    names = dict(CORPORA)
    folds = make_folds([c for c, _ in CORPORA], SAME_TEXT)
    grid = list(GRID)
    lines = [
        "| fold (tuned on) | budget | no trimming | **defaults** (0.5 / 0.1) | **tuned**: share / decay chosen on the others | best on the fold itself (not a choice: for scale) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    tuned: dict[tuple[str, int], list[float]] = {}
    for fold in folds:
        for budget in budgets:
            at = {(g, c): scores[(g, c, budget)] for g in grid for c, _ in CORPORA}
            chosen = choose_on_others(grid, at, fold.tuning)
            tuned[(fold.corpus, budget)] = per_question[(chosen, fold.corpus, budget)]
            best = max(grid, key=lambda g: (scores[(g, fold.corpus, budget)], -grid.index(g)))
            lines.append(
                f"| {names[fold.corpus]} ({', '.join(names[t] for t in fold.tuning)}) | {budget}c | "
                f"{scores[(NO_TRIM, fold.corpus, budget)]:.3f} | "
                f"**{scores[(DEFAULT_SLUG, fold.corpus, budget)]:.3f}** | "
                f"{scores[(chosen, fold.corpus, budget)]:.3f} ({_label(chosen)}) | "
                f"{scores[(best, fold.corpus, budget)]:.3f} ({_label(best)}) |"
            )
    keys = [(fold.corpus, budget) for fold in folds for budget in budgets]
    without = {k: per_question[(NO_TRIM, *k)] for k in keys}
    verdicts = [
        (
            "trimming at the defaults (0.5 / 0.1)",
            lever_verdict({k: per_question[(DEFAULT_SLUG, *k)] for k in keys}, without),
        ),
        ("trimming, share and decay chosen on the other folds", lever_verdict(tuned, without)),
    ]
    # For scale, not a choice: how many grid points the rule keeps, found by looking at
    # every fold, the left-out ones included.
    every = {g: lever_verdict({k: per_question[(g, *k)] for k in keys}, without) for g in grid}
    kept = [_label(g) for g in grid if every[g].kept]
    pooled_head = " / ".join(f"{b}c" for b in budgets)
    rule = [
        "| trimming | least it adds on a fold: trimmed − untrimmed, points [95 %] | at | pooled over every fold's questions, points [95 %]: "
        + pooled_head
        + " | verdict |",
        "|---|---:|---|---:|---|",
    ]
    for label, verdict in verdicts:
        corpus, budget = verdict.where
        pooled = " / ".join(_effect(verdict.pooled[b]) for b in budgets)
        rule.append(
            f"| {label} | {_effect(verdict.worst)} | {names[corpus]} @{budget}c | {pooled} | "
            f"{verdict_text(verdict, names)} |"
        )
    rule += [
        "",
        f"For scale (every fold read, so no choice the protocol could make): the rule keeps {len(kept)} of the grid's {len(grid)} points (share / decay), "
        + (", ".join(kept) if kept else "none")
        + ".",
    ]
    return "\n".join([*lines, "", *rule]), verdicts


async def measure(budgets: Sequence[int]) -> dict[tuple[str, str, int], list[float]]:
    """Record and score every data set (module docstring, steps 1 to 3)."""
    scorer = _shared_scorer()
    scores: dict[tuple[str, str, int], list[float]] = {}
    for data in DATA_SETS:
        recorded = await _record(data, budgets)
        scores.update(_score(data, recorded, scorer))
    return scores


def main(argv: list[str] | None = None) -> int:
    args = protocol_parser(__doc__.splitlines()[0]).parse_args(argv)
    budgets = budgets_of(args.budgets)
    RUNS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = commit_of()
    scores = asyncio.run(measure(budgets))
    minutes = (time.monotonic() - started) / 60
    tables, verdicts = render(scores, budgets)
    grid = ", ".join(f"{s:g}" for s in SHARES) + " × decay " + ", ".join(f"{d:g}" for d in DECAYS)
    body = "\n".join(
        [
            tables,
            "",
            f"Each cell: recall@Bc of the left-out corpus's questions (the shared scorer), on the hits and passages of the defaults' `eval --budget B`, packed again with only trimming's settings changed. Grid: share {grid}; a fold's tuning corpora are in brackets; the choice is made per budget, a tie keeping the defaults. The verdict table: trimming's effect (trimmed minus untrimmed recall, points) with its paired 95 % percentile bootstrap interval (questions resampled 2000 times, seed fixed), at the fold and budget where it adds least and pooled over every fold's questions at each budget, and the transfer protocol's rule. One ingest per data set, {minutes:.0f} min in all.",
            "",
            f"Measured on {commit}, {date}; {machine()}. Regenerate with `{command(__name__, argv or [])}`.",
        ]
    )
    replace_section(
        args.doc, MARKER, body, heading="### Trimming's settings under the transfer protocol"
    )
    print(body)
    print_verdicts(verdicts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
