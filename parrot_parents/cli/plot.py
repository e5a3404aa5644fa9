"""``parrot-parents plot``: the command line of :mod:`parrot_parents.eval.plot` (see ``--help``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from parrot_parents.cli.eval import _int_list
from parrot_parents.errors import ConfigurationError

__all__ = ["parse_run_spec", "register"]


def parse_run_spec(spec: str) -> Path | dict[int, Path]:
    """``FILE`` or ``B=FILE,B=FILE,...`` (budgets in characters).

    Raises:
        ConfigurationError: a malformed pair or a repeated budget.
    """
    if "=" not in spec:
        return Path(spec)
    out: dict[int, Path] = {}
    for pair in spec.split(","):
        budget, sep, path = pair.partition("=")
        if not sep or not budget.strip().isdigit() or not path or int(budget) < 1:
            raise ConfigurationError(
                f"run {spec!r}: expected FILE or BUDGET=FILE,BUDGET=FILE,...",
                hint="e.g. 1000=runs/b1000.jsonl,2000=runs/b2000.jsonl",
            )
        if int(budget) in out:
            raise ConfigurationError(f"run {spec!r}: budget {budget} appears twice")
        out[int(budget)] = Path(path)
    return out


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "plot",
        help="draw recall against the character budget for one or more run files",
        description="Score run files (from `parrot-parents eval`, or any retriever writing "
        "the same JSONL) at budgets of 1000 to 8000 characters, print the figures and draw "
        "the curves in one PNG. A RUN of the form B=FILE,B=FILE,... is one run per budget "
        "(retrieved with --budget B), each scored at its own budget. Needs matplotlib: "
        'pip install "parrot-parents[plots]".',
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run file, or B=FILE,B=FILE,...")
    p.add_argument(
        "--questions", required=True, help="the question CSV the runs answer (references)"
    )
    p.add_argument(
        "--labels", nargs="+", default=None, help="one legend label per RUN (default: file names)"
    )
    p.add_argument("--out", required=True, metavar="FILE.png", help="figure to write")
    p.add_argument(
        "--budgets",
        type=_int_list,
        default=None,
        help="budgets in characters for single runs (default 1000,1500,...,8000)",
    )
    p.add_argument("--title", default="Recall against the context budget", help="figure title")
    p.set_defaults(func=run)


async def run(args: argparse.Namespace) -> int:
    from parrot_parents.eval.plot import (
        PLOT_BUDGETS,
        curve_from_budget_runs,
        curve_from_run,
        curves_table,
        draw_curves,
        require_matplotlib,
    )
    from parrot_parents.eval.questions import load_questions
    from parrot_parents.eval.scorer import load_run

    require_matplotlib()  # before any scoring: say at once what is missing
    specs = [parse_run_spec(s) for s in args.runs]
    labels = args.labels or [
        s.stem if isinstance(s, Path) else Path(next(iter(s.values()))).stem for s in specs
    ]
    if len(labels) != len(specs):
        raise ConfigurationError(f"{len(specs)} run(s) but {len(labels)} label(s)")
    questions = load_questions(args.questions)
    budgets = tuple(args.budgets or PLOT_BUDGETS)
    curves = []
    for label, spec in zip(labels, specs, strict=True):
        if isinstance(spec, Path):
            curves.append(curve_from_run(label, questions, load_run(spec, len(questions)), budgets))
        else:
            runs = {b: load_run(path, len(questions)) for b, path in spec.items()}
            curves.append(curve_from_budget_runs(label, questions, runs))
    shown = sorted({b for c in curves for b, _ in c.points})
    print(curves_table(curves, shown))
    draw_curves(curves, args.out, title=args.title)
    print(f"plot: {args.out}")
    return 0
