"""``parrot-parents compare``: two run files of one question set, end to end through
``main`` on real files, and its refusals of bad input (exit code 2, one clear line)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from parrot_parents.cli.main import main
from parrot_parents.eval.scorer import write_run

N = 40  # questions; both runs answer all of them


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A question CSV and three run files: exact answers, answers for odd qids only, and a
    copy of the latter."""
    questions = tmp_path / "questions.csv"
    exact: dict[int, list[tuple[str, int, int]]] = {}
    with questions.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["question", "references", "corpus_id"])
        for qid in range(N):
            corpus, start = "ab"[qid % 2], 1000 * qid
            end = start + 100 + 10 * qid
            refs = [{"content": None, "start_index": start, "end_index": end}]
            writer.writerow([f"question {qid}?", json.dumps(refs), corpus])
            exact[qid] = [(corpus, start, end)]
    half = {qid: (p if qid % 2 else []) for qid, p in exact.items()}
    paths = {"questions": questions}
    for name, run in (("exact", exact), ("half", half), ("half2", half)):
        paths[name] = tmp_path / f"{name}.jsonl"
        write_run(paths[name], run)
    return paths


def compare(files: dict[str, Path], a: str | Path, b: str | Path, *extra: str) -> int:
    argv = ["compare", str(files.get(str(a), a)), str(files.get(str(b), b))]
    return main([*argv, "--questions", str(files["questions"]), *extra])


def test_a_better_run_shows_a_positive_difference_with_an_interval_above_zero(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert compare(files, "half", "exact", "--ks", "1,5", "--budgets", "100,2000") == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if re.match(r"\s+\w+@", line)}
    assert list(lines) == [
        "chars@1",
        "chars@5",
        "iou@1",
        "iou@5",
        "precision@1",
        "precision@5",
        "recall@1",
        "recall@5",
        "recall@100c",
        "recall@2000c",
    ]
    # metric  A  B  B-A  [low, high]  better  worse  same: half the questions gained.
    fields = re.fullmatch(
        r"\s*recall@2000c\s+0\.5000\s+1\.0000\s+\+0\.5000\s+"
        r"\[\+(\d\.\d{4}), \+(\d\.\d{4})\]\s+20\s+0\s+20",
        lines["recall@2000c"],
    )
    assert fields, lines["recall@2000c"]
    low, high = (float(x) for x in fields.groups())
    assert 0 < low < 0.5 < high <= 1.0
    assert f"{N} questions, {N} answered by both" in out
    # More characters handed over is worse, not better.
    assert re.search(r"\s0\s+20\s+20$", lines["chars@1"])


def test_json_output_and_a_run_against_its_copy(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert compare(files, "half", "half2", "--ks", "1", "--budgets", "1000", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["questions"] == report["answered"] == N
    assert (report["resamples"], report["confidence"]) == (2000, 0.95)
    assert list(report["metrics"]) == [
        "chars@1",
        "iou@1",
        "precision@1",
        "recall@1",
        "recall@1000c",
    ]
    for entry in report["metrics"].values():
        assert entry["diff"] == 0.0 and entry["interval"] == [0.0, 0.0]
        assert (entry["better"], entry["worse"], entry["same"]) == (0, 0, N)
        assert entry["a"] == entry["b"]


def test_the_same_seed_reproduces_the_report_to_the_last_digit(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    reports = []
    for seed in ("7", "7", "8"):
        assert compare(files, "half", "exact", "--json", "--seed", seed, "--resamples", "500") == 0
        reports.append(json.loads(capsys.readouterr().out))
    assert reports[0] == reports[1]
    # chars@1 differs by another amount on each question: its interval moves with the seed.
    assert reports[0]["metrics"]["chars@1"] != reports[2]["metrics"]["chars@1"]
    assert reports[0]["seed"] == 7 and reports[0]["resamples"] == 500


def _bad_run(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("missing", r"A: no file '.*nowhere\.jsonl'"),
        ("malformed", r"bad\.jsonl:2: not a JSON line"),
        ("outside", rf"bad\.jsonl:1: qid {N} is not a row of the question set"),
        ("fewer", r"A answers 1 questions and B 40, not the same ones \(qid 1 only in B\)"),
        ("empty", r"A: '.*bad\.jsonl' answers no question"),
        ("questions", r"--questions: no file"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_code_2(
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    which: str,
    message: str,
) -> None:
    a: str | Path
    if which == "missing":
        a = tmp_path / "nowhere.jsonl"
    elif which == "malformed":
        a = _bad_run(tmp_path, '{"qid": 0, "passages": []}\n{"qid": 1, "passages": [\n')
    elif which == "outside":
        a = _bad_run(tmp_path, json.dumps({"qid": N, "passages": []}) + "\n")
    elif which == "fewer":
        a = _bad_run(tmp_path, '{"qid": 0, "passages": []}\n')
    elif which == "empty":
        a = _bad_run(tmp_path, "\n")
    else:
        a = "half"
        files = {**files, "questions": tmp_path / "no.csv"}
    assert compare(files, a, "exact") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("parrot-parents: error: ")
    assert re.search(message, line), line


def test_bad_options_are_usage_errors(files: dict[str, Path]) -> None:
    for extra in (["--resamples", "0"], ["--seed", "-1"], ["--ks", "x"]):
        with pytest.raises(SystemExit) as exc:
            compare(files, "half", "exact", *extra)
        assert exc.value.code == 2
