"""The headline figure (``docs/budget_curve.png``) and its table show today's defaults.

The benchmark that draws them takes 15 minutes, so nothing here runs it: the figure
carries the settings its packed curves were measured with (a PNG text chunk), and these
tests compare them with the package defaults as they are now. When a default changes,
the first test fails until the figure is drawn again (``python -m benchmarks run
budget_curve``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.common import CHUNKING_EVAL
from benchmarks.quality import budget_curve as bc
from parrot_parents.eval.scorer import write_run
from tests.conftest import REPO_ROOT

DOC = REPO_ROOT / "docs" / "benchmarks.md"
PNG = REPO_ROOT / "docs" / "budget_curve.png"
REGENERATE = "regenerate it with `python -m benchmarks run budget_curve`"


def _defaults_record(png: Path) -> dict[str, object]:
    record = bc.figure_metadata(png)
    assert record is not None, f"{png} does not say what it measured; {REGENERATE}"
    rows = {r["key"]: r for r in record["curves"]}
    assert bc.DEFAULTS_KEY in rows, f"{png} has no defaults curve; {REGENERATE}"
    return rows[bc.DEFAULTS_KEY]


def test_the_figures_defaults_row_is_todays_defaults() -> None:
    row = _defaults_record(PNG)
    now = bc.settings(bc.DEFAULTS_KEY)
    drawn = row["settings"]
    assert isinstance(drawn, dict)
    changed = {k: (drawn.get(k), now.get(k)) for k in now.keys() | drawn.keys()}
    changed = {k: v for k, v in changed.items() if v[0] != v[1]}
    assert not changed, f"the figure's defaults row is not today's defaults, {REGENERATE}: " + (
        ", ".join(f"{k} drawn {a!r}, now {b!r}" for k, (a, b) in sorted(changed.items()))
    )
    expected = bc.label("defaults", now)
    assert row["label"] == expected
    table = DOC.read_text(encoding="utf-8")
    section = table[
        table.index("<!-- budget-curve:start -->") : table.index("<!-- budget-curve:end -->")
    ]
    assert f"| {expected} |" in section, f"docs/benchmarks.md's table lacks {expected!r}"


def test_the_defaults_row_sets_nothing_and_names_the_package_defaults() -> None:
    from parrot_parents.loaders import defaults
    from parrot_parents.retrieval.options import BUDGETED_LIMIT, DEFAULTS

    assert {k: o for k, _, o in bc.PACKED}[bc.DEFAULTS_KEY] == ()
    s = bc.settings(bc.DEFAULTS_KEY)
    assert s["child_size"] == defaults.DEFAULT_CHILD_SIZE
    assert s["strategy"] == defaults.DEFAULT_STRATEGY
    assert s["search_mode"] == DEFAULTS.search_mode
    assert s["expand_to_parent"] == DEFAULTS.expand_to_parent
    assert s["limit"] == BUDGETED_LIMIT  # with a budget and no limit set
    label = bc.label("defaults", s)
    assert f"c{defaults.DEFAULT_CHILD_SIZE}" in label and DEFAULTS.search_mode in label
    # The tuned row differs from the defaults only where it says so.
    tuned = bc.settings("ours-tuned")
    assert {k for k in s if s[k] != tuned[k]} == {
        "child_size",
        "expand_to_parent",
        "mode",
        "search_mode",
    }


@pytest.mark.skipif(
    not CHUNKING_EVAL.is_dir(), reason="../shared/benchmarks is not beside the checkout"
)
@pytest.mark.parametrize("stale", [False, True])
def test_a_rendered_figure_records_what_its_runs_measured(tmp_path: Path, stale: bool) -> None:
    """render() writes the measured settings into the PNG; settings saved by a run under
    other defaults are what the figure then shows, and the check above catches them."""
    questions, _ = bc.smoke_subset(
        CHUNKING_EVAL / "questions.csv", CHUNKING_EVAL / "corpora", 3, tmp_path / "data"
    )
    from parrot_parents.eval.questions import load_questions

    qs = load_questions(questions)
    answers = {q.qid: [(q.corpus_id, r.start, r.end) for r in q.references] for q in qs}
    runs = tmp_path / "runs"
    runs.mkdir()
    for b in bc.SMOKE_BUDGETS:
        write_run(runs / f"{bc.DEFAULTS_KEY}-b{b}.jsonl", answers)
    measured = bc.settings(bc.DEFAULTS_KEY)
    if stale:
        measured = {**measured, "expand_to_parent": True, "search_mode": "dense", "limit": 10}
    (runs / f"{bc.DEFAULTS_KEY}.settings.json").write_text(json.dumps(measured))
    png, doc = tmp_path / "curve.png", tmp_path / "bench.md"
    bc.render(questions, {}, "now", [], runs=runs, png=png, doc=doc, budgets=bc.SMOKE_BUDGETS)
    row = _defaults_record(png)
    assert row["settings"] == measured
    assert f"| {bc.label('defaults', measured)} | 1.000 |" in doc.read_text(encoding="utf-8")
    assert (row["settings"] == bc.settings(bc.DEFAULTS_KEY)) is not stale
