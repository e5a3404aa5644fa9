"""``parrot-parents compare``: two run files of one question set, B minus A with its noise.

Its own command, like ``plot``, rather than an option of ``eval``: it reads run files and
the question CSV only, so it takes none of ``eval``'s corpus, database and model options,
and argparse can require what it does need. Nothing here loads a model or opens a database.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parrot_parents.cli.common import print_json
from parrot_parents.cli.eval import add_cutoffs
from parrot_parents.errors import ConfigurationError

if TYPE_CHECKING:
    from parrot_parents.eval.intervals import Difference

__all__ = ["compare_runs", "register"]


def _at_least(low: int) -> Any:
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            n = low - 1
        if n < low:
            raise argparse.ArgumentTypeError(f"expected an int of at least {low}, got {value!r}")
        return n

    return parse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compare",
        help="B minus A for two run files of one question set, with paired bootstrap intervals",
        description="Score two run files (from `parrot-parents eval`, or any retriever writing "
        "the same JSONL) on the same questions and print, for each metric, A, B, the "
        "difference B - A with its 95 % paired bootstrap interval (the questions are "
        "resampled, the same ones for both runs) and how many questions got better, worse "
        "or stayed the same (for chars@k, fewer characters is better). An interval wholly "
        "above or below 0 is a difference the choice of questions does not explain. Needs "
        "no database and no model.",
    )
    p.add_argument("a", metavar="A.jsonl", help="the run compared against (the baseline)")
    p.add_argument("b", metavar="B.jsonl", help="the run compared")
    p.add_argument("--questions", required=True, help="the question CSV both runs answer")
    add_cutoffs(p)
    p.add_argument(
        "--resamples",
        type=_at_least(1),
        default=2000,
        help="bootstrap resamples (default 2000)",
    )
    p.add_argument(
        "--seed",
        type=_at_least(0),
        default=None,
        help="seed of the resampling (default: a fixed one, so a report can be reproduced)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _existing(label: str, path: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigurationError(f"{label}: no file {path!r}")
    return p


def compare_runs(args: argparse.Namespace) -> dict[str, Any]:
    """The comparison described by parsed ``compare`` options, JSON-ready.

    Returns:
        ``{"a", "b": paths, "questions": n, "answered": qids in both runs, "resamples",
        "seed", "confidence", "metrics": {metric: {"a", "b", "diff", "interval": [low,
        high], "better", "worse", "same"}}}``; metrics in the scorer's order, values in
        their unit (ratios, or characters for ``chars@k``).

    Raises:
        ConfigurationError: a missing file, a malformed question CSV or run file, a qid
            outside the CSV, or two runs that answer different questions (runs of different
            question sets, or one cut short). All checked before any scoring.
    """
    from parrot_parents.eval.questions import load_questions
    from parrot_parents.eval.scorer import load_run, metric_order, score_per_question

    questions_path = _existing("--questions", args.questions)
    path_a, path_b = _existing("A", args.a), _existing("B", args.b)
    questions = load_questions(questions_path)
    run_a = load_run(path_a, len(questions))
    run_b = load_run(path_b, len(questions))
    for label, path, run in (("A", path_a, run_a), ("B", path_b, run_b)):
        if not run:
            raise ConfigurationError(f"{label}: {str(path)!r} answers no question")
    if set(run_a) != set(run_b):
        only_a, only_b = sorted(set(run_a) - set(run_b)), sorted(set(run_b) - set(run_a))
        first = f"qid {only_a[0]} only in A" if only_a else f"qid {only_b[0]} only in B"
        raise ConfigurationError(
            f"A answers {len(run_a)} questions and B {len(run_b)}, not the same ones "
            f"({first}): runs of different question sets, or one cut short?",
            hint="a paired comparison needs both runs of the same questions; a retriever "
            "that finds nothing writes the question with no passages",
        )

    # numpy only now, once the input is known to be good.
    from parrot_parents.eval.intervals import DEFAULT_CONFIDENCE, DEFAULT_SEED, paired_differences

    seed = DEFAULT_SEED if args.seed is None else args.seed
    per_a = score_per_question(questions, run_a, args.ks, args.budgets)
    per_b = score_per_question(questions, run_b, args.ks, args.budgets)
    diffs = paired_differences(per_a, per_b, resamples=args.resamples, seed=seed)
    return {
        "a": str(path_a),
        "b": str(path_b),
        "questions": len(questions),
        "answered": len(run_a),
        "resamples": args.resamples,
        "seed": seed,
        "confidence": DEFAULT_CONFIDENCE,
        "metrics": {key: _entry(key, diffs[key]) for key in sorted(diffs, key=metric_order)},
    }


def _entry(key: str, d: Difference) -> dict[str, Any]:
    # More characters handed over is a cost, not a gain.
    better, worse = (d.lower, d.higher) if key.startswith("chars@") else (d.higher, d.lower)
    return {
        "a": d.a,
        "b": d.b,
        "diff": d.diff,
        "interval": [d.low, d.high],
        "better": better,
        "worse": worse,
        "same": d.tied,
    }


async def run(args: argparse.Namespace) -> int:
    report = compare_runs(args)
    if args.json:
        print_json(report)
        return 0
    print(f"A: {report['a']}")
    print(f"B: {report['b']}")
    print(
        f"{report['questions']} questions, {report['answered']} answered by both; B - A with "
        f"its {report['confidence']:.0%} paired bootstrap interval ({report['resamples']} "
        "resamples of the questions)"
    )
    print(
        f"{'metric':>16}  {'A':>9}  {'B':>9}  {'B - A':>9}  {'interval':<22}"
        f"  {'better':>6}  {'worse':>6}  {'same':>6}"
    )
    for key, e in report["metrics"].items():
        digits = 1 if key.startswith("chars@") else 4
        low, high = e["interval"]
        interval = f"[{low:+.{digits}f}, {high:+.{digits}f}]"
        print(
            f"{key:>16}  {e['a']:>9.{digits}f}  {e['b']:>9.{digits}f}  "
            f"{e['diff']:>+9.{digits}f}  {interval:<22}  "
            f"{e['better']:>6}  {e['worse']:>6}  {e['same']:>6}"
        )
    print(
        "chars@k: better is fewer characters. An interval that leaves out 0 is a difference "
        "another draw of questions would be unlikely to erase."
    )
    return 0
