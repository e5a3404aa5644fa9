"""Recall-versus-budget curves: scoring, drawing, and the ``plot`` command."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from parrot_parents.cli.main import main
from parrot_parents.errors import ConfigurationError
from parrot_parents.eval.plot import (
    PLOT_BUDGETS,
    Curve,
    curve_from_budget_runs,
    curve_from_run,
    curves_table,
    draw_curves,
)
from parrot_parents.eval.questions import Question, Reference
from parrot_parents.eval.scorer import write_run

PNG = b"\x89PNG\r\n\x1a\n"
# Two questions; answers at characters 1000-1500 of "a" and 0-200 of "b".
QUESTIONS = [
    Question(0, "q0", "a", (Reference(1000, 1500),)),
    Question(1, "q1", "b", (Reference(0, 200),)),
]
# Ranked: 1000 useless characters, then the answer of q0; q1's answer first.
RUN = {0: [("a", 0, 1000), ("a", 1000, 1500)], 1: [("b", 0, 200), ("b", 500, 900)]}


def test_a_single_run_is_cut_by_the_scorer_at_every_budget() -> None:
    curve = curve_from_run("ranked", QUESTIONS, RUN, budgets=(1000, 1250, 1500))
    # q0 gets nothing at 1000, half its answer at 1250, all at 1500; q1 always all.
    assert curve.points == ((1000, 0.5), (1250, 0.75), (1500, 1.0))
    assert [b for b, _ in curve_from_run("x", QUESTIONS, RUN).points] == list(PLOT_BUDGETS)


def test_runs_per_budget_are_each_scored_at_their_own_budget() -> None:
    packed_1000 = {0: [("a", 1000, 1500)], 1: [("b", 0, 200)]}  # what a packer would hand over
    curve = curve_from_budget_runs("packed", QUESTIONS, {2000: RUN, 1000: packed_1000})
    assert curve.points == ((1000, 1.0), (2000, 1.0))
    assert curve.recall_at(1000) == 1.0 and curve.recall_at(1500) is None
    with pytest.raises(ConfigurationError):
        curve_from_budget_runs("none", QUESTIONS, {})


def test_recall_never_falls_as_the_budget_grows() -> None:
    rng = random.Random(15)
    for _ in range(50):
        run = {
            q.qid: [
                (q.corpus_id if rng.random() < 0.8 else "x", s, s + rng.randint(1, 900))
                for s in (rng.randint(0, 3000) for _ in range(rng.randint(0, 12)))
            ]
            for q in QUESTIONS
        }
        recalls = [r for _, r in curve_from_run("r", QUESTIONS, run).points]
        assert recalls == sorted(recalls) and all(0.0 <= r <= 1.0 for r in recalls)


def test_table_marks_missing_points() -> None:
    table = curves_table([Curve("a", ((1000, 0.5),)), Curve("b", ((2000, 0.25),))], (1000, 2000))
    assert table.splitlines()[2:] == ["| a | 0.500 | — |", "| b | — | 0.250 |"]


def test_draw_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = draw_curves([curve_from_run("ranked", QUESTIONS, RUN)], tmp_path / "c.png")
    assert out.read_bytes()[:8] == PNG
    with pytest.raises(ConfigurationError, match="does not exist"):
        draw_curves([curve_from_run("r", QUESTIONS, RUN)], tmp_path / "no" / "c.png")
    with pytest.raises(ConfigurationError, match="no curves"):
        draw_curves([], tmp_path / "c.png")


def test_a_missing_matplotlib_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(ConfigurationError, match="matplotlib") as info:
        draw_curves([curve_from_run("r", QUESTIONS, RUN)], tmp_path / "c.png")
    assert "parrot-parents[plots]" in (info.value.hint or "")
    assert not (tmp_path / "c.png").exists()


def _questions_csv(path: Path) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["question", "references", "corpus_id"])
        for q in QUESTIONS:
            refs = [{"start_index": r.start, "end_index": r.end} for r in q.references]
            w.writerow([q.question, json.dumps(refs), q.corpus_id])
    return path


def test_plot_command_overlays_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    questions = _questions_csv(tmp_path / "q.csv")
    write_run(tmp_path / "ranked.jsonl", RUN)
    write_run(tmp_path / "b1000.jsonl", {0: [("a", 1000, 1500)], 1: [("b", 0, 200)]})
    write_run(tmp_path / "b2000.jsonl", RUN)
    out = tmp_path / "curves.png"
    code = main(
        [
            "plot",
            str(tmp_path / "ranked.jsonl"),
            f"1000={tmp_path / 'b1000.jsonl'},2000={tmp_path / 'b2000.jsonl'}",
            "--questions",
            str(questions),
            "--labels",
            "ranked",
            "packed",
            "--out",
            str(out),
            "--budgets",
            "1000,2000",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0 and out.read_bytes()[:8] == PNG
    assert "| ranked | 0.500 | 1.000 |" in printed and "| packed | 1.000 | 1.000 |" in printed

    assert main(["plot", str(tmp_path / "ranked.jsonl"), "--questions", str(questions),
                 "--labels", "a", "b", "--out", str(out)]) == 2  # fmt: skip
    assert "1 run(s) but 2 label(s)" in capsys.readouterr().err
    assert main(["plot", "1000=", "--questions", str(questions), "--out", str(out)]) == 2
    assert "BUDGET=FILE" in capsys.readouterr().err


def test_help_does_not_import_matplotlib() -> None:
    code = (
        "import sys\n"
        "from parrot_parents.cli.main import main\n"
        "for cmd in (['plot', '--help'], ['eval', '--help'], ['--help']):\n"
        "    try:\n"
        "        main(cmd)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('matplotlib' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "--plot FILE.png" in done.stdout and "--labels" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "False"


def test_eval_plot_fails_before_the_ingest_without_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["eval", "--questions", str(tmp_path / "missing.csv"), "--corpora", str(tmp_path)]
    code = main([*argv, "--out", str(tmp_path / "run.jsonl"), "--plot", str(tmp_path / "c.png")])
    assert code == 2
    # The questions file does not exist either: the plot's requirement was checked first.
    assert "matplotlib" in capsys.readouterr().err
    assert not (tmp_path / "run.jsonl").exists()
