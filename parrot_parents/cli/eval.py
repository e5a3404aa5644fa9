"""``parrot-parents eval``: maps its options to an :class:`~parrot_parents.eval.runner.EvalConfig`.

All logic lives in :mod:`parrot_parents.eval`; the command is described by its ``--help``.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from parrot_parents.cli.common import (
    add_backend_option,
    add_dsn_option,
    add_lexical_backend_option,
    add_model_option,
    add_retrieval_options,
    add_strategy_option,
    print_json,
    retrieval_overrides,
)
from parrot_parents.cli.ingest import add_size_options, add_structure_options
from parrot_parents.loaders.defaults import DEFAULT_PARENT_SIZE, DEFAULT_THRESHOLD

if TYPE_CHECKING:
    from parrot_parents.eval.runner import EvalConfig, EvalResult

__all__ = ["config_from_args", "evaluate", "figure_line", "plot_run", "register", "run_label"]


def _int_list(value: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in value.split(",") if x.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated ints such as 1,3,5,10, got {value!r}"
        ) from exc
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"expected positive ints, got {value!r}")
    return out


def add_cutoffs(p: argparse.ArgumentParser) -> None:
    """``--ks`` (passage cut-offs of the @k metrics) and ``--budgets`` (characters of
    recall@Bc), as every command that scores a run takes them."""
    p.add_argument(
        "--ks",
        type=_int_list,
        default=(1, 3, 5, 10),
        help="passage cut-offs of the @k metrics (default 1,3,5,10)",
    )
    p.add_argument(
        "--budgets",
        type=_int_list,
        default=(1000, 2000, 4000, 8000),
        help="character budgets of recall@Bc (default 1000,2000,4000,8000)",
    )


def figure_line(key: str, value: float, interval: tuple[float, float] | None = None) -> str:
    """One metric as ``eval`` prints it: ``    recall@2000c  0.9210  [0.8970, 0.9430]``.

    Ratios get 4 decimals, ``chars@k`` (characters) 1; no interval, no brackets.
    """
    digits = 1 if key.startswith("chars@") else 4
    line = f"{key:>16}  {value:.{digits}f}"
    if interval is not None:
        line += f"  [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"
    return line


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "eval",
        help="score retrieval on questions with character-span references",
        description="Ingest DIR/<corpus_id>.md into a fresh collection, retrieve for every "
        "question, write the run file and print recall/precision/iou@k, recall@Bc "
        "(B characters of context), chars@k, each with its 95 % bootstrap interval over "
        "the questions, and timings. Sizes are in characters. To compare two run files: "
        "parrot-parents compare.",
    )
    p.add_argument(
        "--questions", required=True, help="CSV with columns question, references, corpus_id"
    )
    p.add_argument("--corpora", required=True, help="directory of <corpus_id>.md files")
    p.add_argument("--out", required=True, help="run file to write (JSONL)")
    add_size_options(
        p,
        parent_size="parent_chunk size in characters; the 3-level threshold defaults to "
        "it too, so any document longer than N is cut into N-character "
        f"parent_chunks (default: {DEFAULT_PARENT_SIZE}, threshold {DEFAULT_THRESHOLD})",
        threshold="documents longer than this many characters get parent_chunks "
        f"(default: --parent-size, else {DEFAULT_THRESHOLD})",
    )
    add_structure_options(p)
    add_retrieval_options(p)  # nothing set: the package defaults (what Chatbot() does)
    add_strategy_option(p)
    p.add_argument(
        "--reranker",
        default=None,
        metavar="MODEL",
        help="cross-encoder model name or directory to rerank the children",
    )
    add_backend_option(p)
    add_lexical_backend_option(p)
    add_dsn_option(p)
    add_model_option(p)
    p.add_argument(
        "--collection",
        default=None,
        help="table to create (must be new or empty; default: eval_<random>)",
    )
    p.add_argument(
        "--keep", action="store_true", help="keep the collection after the run (default: drop it)"
    )
    add_cutoffs(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--plot",
        default=None,
        metavar="FILE.png",
        help="also draw recall against the character budget (1000 to 8000, the scorer's "
        "cut of this run's passages) to FILE (needs matplotlib: "
        'pip install "parrot-parents[plots]")',
    )
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """The :class:`EvalConfig` described by parsed ``eval`` options: each field from the
    option of its name, the retrieval options as :func:`retrieval_overrides` reads them."""
    from dataclasses import fields

    from parrot_parents.eval.runner import EvalConfig

    given = {f.name: getattr(args, f.name) for f in fields(EvalConfig) if hasattr(args, f.name)}
    return EvalConfig(**{**given, **retrieval_overrides(args)})


async def evaluate(args: argparse.Namespace) -> EvalResult:
    """Run the evaluation described by parsed ``eval`` options (progress on stderr)."""
    from pathlib import Path

    from parrot_parents.errors import ConfigurationError
    from parrot_parents.eval.runner import run_eval

    # Fail before the (long) ingest, not when the run file is written at the end.
    out_dir = Path(args.out).expanduser().resolve().parent
    if not out_dir.is_dir():
        raise ConfigurationError(f"--out: directory {str(out_dir)!r} does not exist")
    return await run_eval(
        args.questions,
        args.corpora,
        args.out,
        config_from_args(args),
        log=lambda msg: print(msg, file=sys.stderr),
    )


def run_label(config: EvalConfig) -> str:
    """A short legend for a run's curve, e.g. ``expand (parent), c400, limit 10``."""
    resolved = config.options().resolve()
    what = f"expand ({resolved.mode})" if resolved.expand_to_parent else "children only"
    parts = [what, f"c{config.child_size}", f"limit {resolved.limit}", resolved.search_mode]
    if config.budget is not None:
        parts.append(f"budget {config.budget}")
    return ", ".join(parts)


def plot_run(args: argparse.Namespace, result: EvalResult) -> None:
    """Draw the run's recall-versus-budget curve to ``args.plot``."""
    from parrot_parents.eval.plot import curve_from_run, draw_curves
    from parrot_parents.eval.questions import load_questions
    from parrot_parents.eval.scorer import load_run

    questions = load_questions(args.questions)
    run_passages = load_run(result.run_path, len(questions))
    curve = curve_from_run(run_label(result.config), questions, run_passages)
    draw_curves([curve], args.plot, title=f"Recall against the context budget: {args.out}")
    # stdout stays one JSON object with --json
    print(f"plot: {args.plot}", file=sys.stderr if args.json else sys.stdout)


async def run(args: argparse.Namespace) -> int:
    from parrot_parents.cli.common import describe_strategy
    from parrot_parents.eval.scorer import metric_order

    if args.plot:
        from pathlib import Path

        from parrot_parents.errors import ConfigurationError
        from parrot_parents.eval.plot import require_matplotlib

        # Fail before the (long) ingest: matplotlib and the plot's folder must exist.
        require_matplotlib()
        if not Path(args.plot).expanduser().resolve().parent.is_dir():
            raise ConfigurationError(f"--plot: the folder of {args.plot!r} does not exist")
    result = await evaluate(args)
    if args.plot:
        plot_run(args, result)
    if args.json:
        print_json(result.to_dict())
        return 0
    m, t, i = result.metrics, result.timings, result.ingest
    print(
        f"questions {m['questions']}, answered {m['answered']}; "
        "[95 % bootstrap interval over the questions]"
    )
    for key in sorted((k for k in m if "@" in k), key=metric_order):
        print(figure_line(key, m[key], result.intervals.get(key)))
    print(
        f"ingest: {t['ingest_seconds']:.1f} s, {t['ingest_tokens']} tokens, "
        # Each corpus file of --corpora is one document of the collection.
        f"{t['ingest_tokens_per_second']:.0f} tokens/s ({i['corpora']} document(s), "
        f"{i['parents']} parents, {i['children']} children, "
        f"late chunking {'on' if i['late_chunking'] else 'off'})"
    )
    print(
        f"query: p50 {t['query_p50_ms']:.1f} ms, p95 {t['query_p95_ms']:.1f} ms, "
        f"mean {t['query_mean_ms']:.1f} ms over {t['queries']} questions "
        "(query embedding included)"
    )
    print(describe_strategy(i["strategy"]))
    d = result.diagnostics
    if d["fallbacks"] or d["text_mismatches"]:
        print(
            f"warning: {d['fallbacks']} question(s) with a pipeline fallback, "
            f"{d['text_mismatches']} passage(s) whose text differs from their span",
            file=sys.stderr,
        )
    kept = f"kept as {result.collection!r}" if result.kept else "dropped"
    print(f"run: {result.run_path} (collection {kept})")
    return 0
