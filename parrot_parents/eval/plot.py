"""Recall against the character budget: curves from run files, drawn with matplotlib.

A curve is recall@Bc at each budget B (characters), from one run cut at every B
(:func:`curve_from_run`) or from one run retrieved per budget (:func:`curve_from_budget_runs`).
matplotlib (extra ``[plots]``) is imported only when a figure is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parrot_parents.errors import ConfigurationError
from parrot_parents.eval.questions import Question, is_int
from parrot_parents.eval.scorer import Run, score_run

__all__ = [
    "PLOT_BUDGETS",
    "Curve",
    "curve_from_budget_runs",
    "curve_from_run",
    "curves_table",
    "draw_curves",
    "require_matplotlib",
]

#: Budgets of a plot, in characters: 1000 to 8000 in steps of 500.
PLOT_BUDGETS: tuple[int, ...] = tuple(range(1000, 8001, 500))


@dataclass(frozen=True)
class Curve:
    """A labelled curve: ``points`` are ``(budget in characters, recall in [0, 1])``,
    sorted by budget."""

    label: str
    points: tuple[tuple[int, float], ...]

    def recall_at(self, budget: int) -> float | None:
        """The recall at ``budget`` characters, or None when the curve has no such point."""
        return dict(self.points).get(budget)


def curve_from_run(
    label: str, questions: Sequence[Question], run: Run, budgets: Sequence[int] = PLOT_BUDGETS
) -> Curve:
    """recall@Bc of one run at every budget (the scorer's cut of the ranked passages)."""
    scores = score_run(questions, run, ks=(), budgets=sorted(set(budgets)))
    return Curve(label, tuple((b, float(scores[f"recall@{b}c"])) for b in sorted(set(budgets))))


def curve_from_budget_runs(
    label: str, questions: Sequence[Question], runs: Mapping[int, Run]
) -> Curve:
    """One point per run: ``runs`` maps a budget B to the run retrieved with budget B,
    scored by recall@Bc."""
    if not runs:
        raise ConfigurationError(f"curve {label!r}: no runs")
    points = []
    for budget in sorted(runs):
        if not is_int(budget) or budget < 1:
            raise ConfigurationError(f"curve {label!r}: bad budget {budget!r}")
        scores = score_run(questions, runs[budget], ks=(), budgets=(budget,))
        points.append((budget, float(scores[f"recall@{budget}c"])))
    return Curve(label, tuple(points))


def curves_table(curves: Sequence[Curve], budgets: Sequence[int]) -> str:
    """A Markdown table of the curves at ``budgets`` (``—`` where a curve has no point)."""
    head = "| retriever | " + " | ".join(f"recall@{b}c" for b in budgets) + " |"
    rule = "|---|" + "---:|" * len(budgets)
    rows = []
    for c in curves:
        cells = []
        for b in budgets:
            value = c.recall_at(b)
            cells.append("—" if value is None else f"{value:.3f}")
        rows.append(f"| {c.label} | " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *rows])


def require_matplotlib() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend.

    Raises:
        ConfigurationError: matplotlib is not installed (with the command that adds it).
    """
    try:
        import matplotlib
    except ImportError:
        raise ConfigurationError(
            "plotting needs matplotlib, which is not installed",
            hint='pip install "parrot-parents[plots]"',
        ) from None
    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    return plt


def draw_curves(
    curves: Sequence[Curve],
    out: str | Path,
    *,
    title: str = "Recall against the context budget",
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Draw ``curves`` (x: budget in characters, y: recall) to ``out`` (PNG, SVG or PDF
    by suffix). Returns the path written.

    ``metadata`` (default none) is stored in the file: in a PNG as text chunks, any key;
    SVG and PDF take only their format's keys (``Title``, ``Creator``...), as matplotlib's
    ``savefig(metadata=...)`` does.

    Raises:
        ConfigurationError: no curves, a curve without points, the output folder missing,
            or matplotlib missing.
    """
    if not curves:
        raise ConfigurationError("nothing to plot: no curves")
    for c in curves:
        if not c.points:
            raise ConfigurationError(f"curve {c.label!r} has no points")
    path = Path(out)
    if not path.parent.resolve().is_dir():
        raise ConfigurationError(f"output folder {str(path.parent)!r} does not exist")
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    try:
        markers = "osD^vP*X<>"
        for i, c in enumerate(curves):
            xs = [b for b, _ in c.points]
            ys = [r for _, r in c.points]
            ax.plot(xs, ys, marker=markers[i % len(markers)], markersize=4, label=c.label)
        ax.set_xlabel("context budget (characters)")
        ax.set_ylabel("recall (share of the answer's characters)")
        ax.set_title(title)
        ax.set_ylim(0, 1)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(path, metadata=dict(metadata) if metadata else None)
    finally:
        plt.close(fig)
    return path
