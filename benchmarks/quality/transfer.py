# ruff: noqa: E501 - the Markdown tables are written as they appear
"""The transfer protocol: does each default lever carry over to a corpus it was not tuned on?

Folds leave one corpus out: chatlogs, state_of_the_union and wikitexts of the shared dev
set (``chunking_eval``, all three in one collection, as the dev tables run them), and
``structured_eval`` (the wikitexts text with Markdown headings, its own collection). The
two wikitexts corpora hold the same text, so each leaves the other out with it: a fold's
*tuning corpora* are the others (chatlogs' fold tunes on state_of_the_union, wikitexts
and structured_eval; wikitexts' and structured_eval's on chatlogs and state_of_the_union).

Every configuration is one ``parrot-parents eval --budget B`` process per data set and
budget (B = 1000, 2000, 4000 characters), scored at its own budget (recall@Bc) on each
corpus's questions alone, by the shared scorer (``../shared/benchmarks/score.py``,
imported, never modified) on the run file; the eval's own ``per_corpus`` figures must
agree. One run scores every corpus, so every fold reads the same runs. The
configurations:

* **the defaults**: no flag but ``--budget``;
* **the defaults without one lever** (:data:`LEVERS`): ``--no-trim``,
  ``--no-late-chunking`` (trimming needs its sentence vectors, so it goes too),
  ``--strategy plain`` (no indexed header rows), ``--search-mode dense`` (no BM25 branch),
  ``--no-structure`` and ``--no-preamble``. The last two only change a document with
  Markdown headings or tables; on a data set without any (``structure_of`` finds none,
  as eval reads them) the rows are those of the defaults, so the defaults' scores stand
  for them there and no run is made;
* **the tuned parameter's grid** (:data:`GRID`): the lexical branch's weight in the
  fusion (the dense weight stays 1; RRF ranks depend only on the ratio). Trimming's share
  and decay are not options of ``eval``, so they are not tuned here.

The **tuned** row takes, per fold and budget, the grid value with the best mean recall
over the tuning corpora (:func:`choose_on_others`; a tie keeps the default) and scores it
on the left-out corpus. **The rule** (:func:`lever_verdict`) reads each question's
recall, since one question moves a fold by 0.7 to 1.8 points: a lever stays unless
removing it is better on some fold and budget with the paired 95 % bootstrap interval of
the difference wholly on that side (questions resampled,
:func:`~parrot_parents.eval.intervals.paired_differences`), or the mean of defaults minus
without over every fold's questions together, at some budget, is below zero.

Writes the section ``<!-- transfer:start -->`` of ``docs/benchmarks.md``; run files and
eval outputs go to ``.bench/runs/transfer/``::

    nice -n 19 python -m benchmarks run transfer      # ~40 min on 2 shared cores
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import (
    CHUNKING_EVAL,
    REPO_ROOT,
    SHARED,
    command,
    commit_of,
    machine,
    replace_section,
)
from parrot_parents.eval.intervals import paired_differences
from parrot_parents.eval.scorer import mean_of

DOC = REPO_ROOT / "docs" / "benchmarks.md"
MARKER = "transfer"
RUNS = REPO_ROOT / ".bench" / "runs" / "transfer"
BUDGETS = (1000, 2000, 4000)


@dataclass(frozen=True)
class DataSet:
    """A question set and its corpora: one collection, one eval run per configuration."""

    name: str
    path: Path

    @property
    def questions(self) -> Path:
        return self.path / "questions.csv"

    @property
    def corpora(self) -> Path:
        return self.path / "corpora"


DATA_SETS = (DataSet("dev", CHUNKING_EVAL), DataSet("structured", SHARED / "structured_eval"))
#: The scored corpora (corpus id, as the report names it), one fold each.
CORPORA: tuple[tuple[str, str], ...] = (
    ("chatlogs", "chatlogs"),
    ("state_of_the_union", "state_of_the_union"),
    ("wikitexts", "wikitexts"),
    ("wikitexts_md", "structured_eval"),
)
#: Corpora that hold the same text: leaving one out leaves out all.
SAME_TEXT: tuple[frozenset[str], ...] = (frozenset({"wikitexts", "wikitexts_md"}),)


@dataclass(frozen=True)
class Config:
    """One configuration: ``slug`` (run file names), ``label``, its ``eval`` flags.

    ``structural``: it only changes documents with Markdown headings or tables.
    """

    slug: str
    label: str
    flags: tuple[str, ...] = ()
    structural: bool = False


DEFAULTS = Config("defaults", "defaults")
#: ``(lever, the defaults without it)``.
LEVERS: tuple[tuple[str, Config], ...] = (
    ("sentence trimming", Config("no-trim", "no trimming", ("--no-trim",))),
    (
        "late chunking (and so trimming)",
        Config("no-late", "late chunking off", ("--no-late-chunking",)),
    ),
    ("indexed header rows", Config("plain", "plain strategy", ("--strategy", "plain"))),
    ("hybrid search", Config("dense", "dense only", ("--search-mode", "dense"))),
    ("section parents", Config("no-structure", "no section parents", ("--no-structure",), True)),
    ("preamble", Config("no-preamble", "no preamble", ("--no-preamble",), True)),
)
#: The tuned parameter's grid: lexical weight (dense weight 1); 1.0 is the defaults.
GRID: tuple[tuple[float, Config], ...] = (
    (0.5, Config("lexical-0.5", "lexical weight 0.5", ("--lexical-weight", "0.5"))),
    (1.0, DEFAULTS),
    (2.0, Config("lexical-2", "lexical weight 2", ("--lexical-weight", "2.0"))),
)

#: ``{(config slug, corpus id, budget): recall@Bc of each of the corpus's questions, in file order}``.
PerQuestion = Mapping[tuple[str, str, int], Sequence[float]]


# -- the protocol (pure) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Fold:
    """One left-out corpus: ``corpus`` is scored, ``tuning`` are the corpora a choice is
    made on (every corpus but it and those holding the same text)."""

    corpus: str
    tuning: tuple[str, ...]


def make_folds(corpora: Sequence[str], same_text: Sequence[frozenset[str]] = ()) -> list[Fold]:
    """One fold per corpus, in order; a corpus leaves out every group of ``same_text``
    it belongs to."""
    folds = []
    for corpus in corpora:
        out = {corpus}.union(*(group for group in same_text if corpus in group))
        folds.append(Fold(corpus, tuple(c for c in corpora if c not in out)))
    return folds


def choose_on_others(
    candidates: Sequence[str], scores: Mapping[tuple[str, str], float], tuning: Sequence[str]
) -> str:
    """The candidate with the highest mean score over the ``tuning`` corpora
    (``scores[(candidate, corpus)]``); on a tie, the earlier one.

    Raises:
        ValueError: no candidates or no tuning corpora.
    """
    if not candidates or not tuning:
        raise ValueError(f"need candidates and tuning corpora, got {candidates!r}, {tuning!r}")
    means = {c: sum(scores[(c, t)] for t in tuning) / len(tuning) for c in candidates}
    return max(candidates, key=lambda c: (means[c], -candidates.index(c)))


@dataclass(frozen=True)
class Effect:
    """What a lever adds over some questions: ``diff`` is the mean recall of the defaults
    minus that of the defaults without the lever; ``low`` and ``high`` bound its paired
    95 % percentile bootstrap interval (questions resampled, both runs on the same draws);
    ``questions`` counts them."""

    diff: float
    low: float
    high: float
    questions: int


def effect(defaults: Sequence[float], without: Sequence[float]) -> Effect:
    """:class:`Effect` of per-question recall lists in the same question order.

    The interval is that of ``without - defaults`` negated (the percentile bootstrap is
    symmetric under negation), so "the defaults without it are better with the interval
    wholly above zero" reads here as ``high < 0``.

    Raises:
        ValueError: lists of different lengths.
    """
    d = paired_differences({"recall": list(without)}, {"recall": list(defaults)})["recall"]
    # Two means of the same values summed in another order can differ in the last digit.
    return Effect(round(d.diff, 12), d.low, d.high, len(defaults))


@dataclass(frozen=True)
class Verdict:
    """A lever under the rule (:func:`lever_verdict`).

    Attributes:
        kept: the rule keeps it.
        worst: the fold and budget where it adds least (lowest ``diff``; the first on a tie).
        where: that key, ``(corpus, budget)``.
        against: keys whose interval lies wholly below zero (removing it is better there).
        pooled: ``{budget: Effect}`` over every fold's questions together.
    """

    kept: bool
    worst: Effect
    where: Any
    against: tuple[Any, ...]
    pooled: dict[int, Effect]

    @property
    def pooled_negative(self) -> list[int]:
        """Budgets whose pooled point estimate is below zero."""
        return [b for b, e in self.pooled.items() if e.diff < 0]


def lever_verdict(
    defaults: Mapping[tuple[str, int], Sequence[float]],
    without: Mapping[tuple[str, int], Sequence[float]],
) -> Verdict:
    """Apply the rule to per-question recall keyed ``(fold corpus, budget)``.

    A lever goes when, on some fold and budget, the paired 95 % interval of
    defaults - without lies wholly below zero, or when at some budget the mean of
    defaults - without over every fold's questions together (each key's list in order,
    pooled per budget) is below zero (the point estimate; its interval is reported
    beside it). Otherwise it stays.

    Raises:
        ValueError: no keys, ``without`` lacks one, or two lists of a key differ in length.
    """
    if not defaults or set(defaults) - set(without):
        raise ValueError(f"without lacks {sorted(set(defaults) - set(without))!r} or no keys")
    cells = {k: effect(defaults[k], without[k]) for k in defaults}
    where = min(cells, key=lambda k: cells[k].diff)
    against = tuple(k for k in cells if cells[k].high < 0)
    pooled = {}
    for budget in dict.fromkeys(b for _, b in defaults):
        keys = [k for k in defaults if k[1] == budget]
        pooled[budget] = effect(
            [v for k in keys for v in defaults[k]], [v for k in keys for v in without[k]]
        )
    kept = not against and all(e.diff >= 0 for e in pooled.values())
    return Verdict(kept, cells[where], where, against, pooled)


# -- runs ------------------------------------------------------------------------------------


def _shared_scorer() -> Any:
    spec = importlib.util.spec_from_file_location("shared_score", SHARED / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def score_per_corpus(scorer: Any, questions: Path, run_file: Path, budget: int) -> dict[str, float]:
    """recall@``budget``c of each corpus's questions alone, by the shared scorer."""
    qs = scorer.load_questions(str(questions))
    run = scorer.load_run(str(run_file), len(qs))
    out = {}
    for corpus in dict.fromkeys(c for c, _ in qs):
        qids = [i for i, (c, _) in enumerate(qs) if c == corpus]
        sub = {j: run[i] for j, i in enumerate(qids) if i in run}
        out[corpus] = scorer.score([qs[i] for i in qids], sub, [1], [budget])[f"recall@{budget}c"]
    return out


def recall_per_question(questions: Path, run_file: Path, budget: int) -> dict[str, list[float]]:
    """recall@``budget``c of each question, by corpus, in file order (this package's scorer,
    whose means are the shared scorer's to the last digit)."""
    from parrot_parents.eval.questions import load_questions
    from parrot_parents.eval.scorer import load_run, score_per_question

    qs = load_questions(questions)
    values = score_per_question(qs, load_run(run_file, len(qs)), [1], [budget])[f"recall@{budget}c"]
    out: dict[str, list[float]] = {}
    for q, value in zip(qs, values, strict=True):
        out.setdefault(q.corpus_id, []).append(value)
    return out


def has_structure(data: DataSet) -> bool:
    """Whether any corpus of ``data`` has Markdown headings or tables, read as eval reads it."""
    from parrot_parents.eval.questions import load_corpora
    from parrot_parents.loaders.structure.reading import structure_of

    return any(
        not structure_of(text, "markdown").empty for text in load_corpora(data.corpora).values()
    )


def corpus_ids(data: DataSet) -> list[str]:
    """The corpus ids of ``data``'s questions, in order of first appearance."""
    from parrot_parents.eval.questions import load_questions

    return list(dict.fromkeys(q.corpus_id for q in load_questions(data.questions)))


def _eval(config: Config, data: DataSet, budget: int, reuse: bool) -> tuple[Path, dict[str, Any]]:
    # Not with_suffix: a slug such as "lexical-0.5" would lose everything after its dot,
    # and every budget and data set of it would share one file.
    stem = f"{config.slug}-{data.name}-{budget}"
    out, report = RUNS / f"{stem}.jsonl", RUNS / f"{stem}.json"
    if reuse and out.is_file() and report.is_file():
        return out, json.loads(report.read_text())
    cmd = [sys.executable, "-m", "parrot_parents", "eval", "--questions", str(data.questions)]
    cmd += ["--corpora", str(data.corpora), "--out", str(out), "--budget", str(budget)]
    cmd += ["--ks", "1", "--budgets", str(budget), "--json", *config.flags]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:])} failed:\n{done.stderr[-3000:]}")
    report.write_text(done.stdout)
    return out, json.loads(done.stdout)


def _configs() -> Iterator[Config]:
    yield DEFAULTS
    yield from (config for _, config in LEVERS)
    yield from (config for _, config in GRID if config is not DEFAULTS)


def measure(
    budgets: Sequence[int], reuse: bool
) -> tuple[dict[tuple[str, str, int], list[float]], int]:
    """Run every configuration; returns ``(per-question recall, eval runs made)``. For each
    budget, every configuration once, in order."""
    scorer = _shared_scorer()
    structured = {data.name: has_structure(data) for data in DATA_SETS}
    scores: dict[tuple[str, str, int], list[float]] = {}
    runs = 0
    for budget in budgets:
        for config in _configs():
            for data in DATA_SETS:
                if config.structural and not structured[data.name]:
                    for corpus in corpus_ids(data):
                        scores[(config.slug, corpus, budget)] = scores[
                            (DEFAULTS.slug, corpus, budget)
                        ]
                    continue
                run_file, report = _eval(config, data, budget, reuse)
                runs += 1
                shared = score_per_corpus(scorer, data.questions, run_file, budget)
                values = recall_per_question(data.questions, run_file, budget)
                for corpus, recall in shared.items():
                    own = report["per_corpus"][corpus][f"recall@{budget}c"]
                    mine = mean_of(values[corpus])
                    if abs(own - recall) > 1e-9 or abs(mine - recall) > 1e-9:
                        raise RuntimeError(
                            f"eval, the shared scorer and the per-question recall disagree on {corpus}: {own}, {recall}, {mine}"
                        )
                    scores[(config.slug, corpus, budget)] = values[corpus]
                figures = ", ".join(f"{c} {r:.3f}" for c, r in shared.items())
                print(f"{config.label} @{budget} ({data.name}): {figures}", flush=True)
    return scores, runs


# -- report ----------------------------------------------------------------------------------


def _points(margin: float) -> str:
    points = margin * 100 + 0.0  # no "-0.0"
    # A difference under 0.05 points still decides a pooled verdict by its sign: it must
    # not print as zero.
    text = f"{points:+.1f}" if points == 0 or abs(points) >= 0.05 else f"{points:+.1g}"
    return text.replace("-", "−")


def _effect(e: Effect) -> str:
    """``+2.9 [+0.8, +5.1]``: points, and the 95 % interval."""
    return f"{_points(e.diff)} [{_points(e.low)}, {_points(e.high)}]"


def _means(per_question: PerQuestion) -> dict[tuple[str, str, int], float]:
    return {k: mean_of(v) for k, v in per_question.items()}


def verdict_text(verdict: Verdict, names: Mapping[str, str]) -> str:
    """The verdict cell: stays, or goes and why (each cell of the rule that removes it)."""
    if verdict.kept:
        return "**stays**"
    why = [
        f"removing it is better at {names[c]} @{b}c, interval below zero"
        for c, b in verdict.against
    ]
    why += [f"pooled effect negative @{b}c" for b in verdict.pooled_negative]
    return "**goes**: " + "; ".join(why)


def render(
    per_question: PerQuestion, budgets: Sequence[int]
) -> tuple[str, list[tuple[str, Verdict]]]:
    """The section's tables and each lever's verdict, from per-question recall."""
    scores = _means(per_question)
    names = dict(CORPORA)
    folds = make_folds([c for c, _ in CORPORA], SAME_TEXT)
    # The defaults first: a tie keeps them.
    grid = [DEFAULTS.slug, *(config.slug for _, config in GRID if config is not DEFAULTS)]
    values = {config.slug: value for value, config in GRID}
    keys = [(fold.corpus, budget) for fold in folds for budget in budgets]
    defaults = {k: per_question[(DEFAULTS.slug, *k)] for k in keys}
    verdicts = [
        (lever, lever_verdict(defaults, {k: per_question[(c.slug, *k)] for k in keys}))
        for lever, c in LEVERS
    ]
    head = ["fold (tuned on)", "budget", "**defaults**"]
    head += [config.label for _, config in LEVERS]
    head += [f"lexical weight {v:g}" for v, c in GRID if c is not DEFAULTS]
    head += ["**tuned** (weight chosen on the others)"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for fold in folds:
        for budget in budgets:
            key = (fold.corpus, budget)
            cells = [
                f"{names[fold.corpus]} ({', '.join(names[t] for t in fold.tuning)})",
                f"{budget}c",
            ]
            cells.append(f"**{scores[(DEFAULTS.slug, *key)]:.3f}**")
            cells += [
                f"{scores[(c.slug, *key)]:.3f} ({_effect(effect(defaults[key], per_question[(c.slug, *key)]))})"
                for _, c in LEVERS
            ]
            cells += [f"{scores[(c.slug, *key)]:.3f}" for _, c in GRID if c is not DEFAULTS]
            at = {
                (slug, corpus): scores[(slug, corpus, budget)]
                for slug in grid
                for corpus, _ in CORPORA
            }
            chosen = choose_on_others(grid, at, fold.tuning)
            cells.append(f"{scores[(chosen, *key)]:.3f} ({values[chosen]:g})")
            lines.append("| " + " | ".join(cells) + " |")
    pooled_head = " / ".join(f"{b}c" for b in budgets)
    rule = [
        "| lever | the defaults without it | least it adds on a fold: defaults − without, points [95 %] | at | pooled over every fold's questions, points [95 %]: "
        + pooled_head
        + " | verdict |",
        "|---|---|---:|---|---:|---|",
    ]
    for (lever, config), (_, verdict) in zip(LEVERS, verdicts, strict=True):
        corpus, budget = verdict.where
        pooled = " / ".join(_effect(verdict.pooled[b]) for b in budgets)
        rule.append(
            f"| {lever} | `{' '.join(config.flags)}` | {_effect(verdict.worst)} | "
            f"{names[corpus]} @{budget}c | {pooled} | {verdict_text(verdict, names)} |"
        )
    return "\n".join([*lines, "", *rule]), verdicts


def print_verdicts(verdicts: Sequence[tuple[str, Verdict]]) -> None:
    """One line per lever's verdict on standard output: stays or goes, where it adds
    least, and its pooled effect per budget."""
    names = {c: c for c, _ in CORPORA}
    for lever, verdict in verdicts:
        pooled = ", ".join(f"@{b} {_effect(e)}" for b, e in verdict.pooled.items())
        print(
            f"{lever}: {verdict_text(verdict, names)}; least {_effect(verdict.worst)} points "
            f"at {verdict.where}; pooled {pooled}"
        )


def protocol_parser(description: str) -> argparse.ArgumentParser:
    """The command line of a benchmark under the protocol: ``--budgets`` (characters,
    comma-separated; parsed by :func:`budgets_of`) and ``--doc`` (the document written)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--budgets",
        default=",".join(map(str, BUDGETS)),
        help="characters, comma-separated (default 1000,2000,4000)",
    )
    parser.add_argument(
        "--doc", type=Path, default=DOC, help="the document to write (default docs/benchmarks.md)"
    )
    return parser


def budgets_of(text: str) -> list[int]:
    """The budgets of a ``--budgets`` value, in characters."""
    return [int(b) for b in text.split(",") if b]


def main(argv: list[str] | None = None) -> int:
    parser = protocol_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="read the eval outputs an earlier run left in .bench/runs/transfer/ instead of running them again",
    )
    args = parser.parse_args(argv)
    budgets = budgets_of(args.budgets)
    RUNS.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = commit_of()  # before the run writes the document
    scores, runs = measure(budgets, args.reuse)
    minutes = (time.monotonic() - started) / 60
    tables, verdicts = render(scores, budgets)
    sizes = [len(scores[(DEFAULTS.slug, c, budgets[0])]) for c, _ in CORPORA]
    pooled = " + ".join(map(str, sizes)) + f" = {sum(sizes)} questions"
    reused = " (eval outputs of an earlier run reused: `--reuse`)" if args.reuse else ""
    body = "\n".join(
        [
            tables,
            "",
            f"Each cell: recall@Bc of the left-out corpus's questions, from one `parrot-parents eval --budget B` run per configuration, data set and budget ({runs} runs, {minutes:.0f} min{reused}), scored by `../shared/benchmarks/score.py`. "
            "A fold's tuning corpora are in brackets. **Tuned**: the lexical weight (dense weight 1; the defaults: 1) with the best mean recall over the tuning corpora at that budget, its value in brackets. "
            "Beside each lever's recall, in brackets: what the lever adds there, the defaults minus the defaults without it in points, and its paired 95 % percentile bootstrap interval (the fold's questions resampled 2000 times, both runs on the same draws; seed fixed). "
            f"The verdict table: the fold and budget where a lever adds least, and its effect pooled over every fold's questions at each budget ({pooled}; the wikitexts questions count twice, once on each form of the text, so the pooled interval is somewhat narrower than independent questions would give). "
            "Section parents and the preamble change only text with Markdown headings or tables: on the three dev corpora (none) their cells are the defaults' scores, not runs.",
            "",
            f"Measured on {commit}, {date}; {machine()}; the machine was shared with other work. Regenerate with `{command(__name__, argv or [])}`.",
        ]
    )
    replace_section(args.doc, MARKER, body, heading="## Transfer protocol")
    print(body)
    print_verdicts(verdicts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
