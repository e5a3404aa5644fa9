"""Tests of parrot_parents.eval.scorer and .questions: metric definitions on hand-made spans,
and agreement with the shared benchmark scorer (skipped when ../shared is absent)."""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from parrot_parents.errors import ConfigurationError, DocumentReadError
from parrot_parents.eval.questions import (
    Question,
    Reference,
    check_references,
    load_questions,
)
from parrot_parents.eval.scorer import (
    budget_cut,
    covered_chars,
    load_run,
    mean_of,
    score_by_corpus,
    score_per_question,
    score_run,
    union_spans,
    write_run,
)

SHARED_BENCH = Path(__file__).resolve().parents[2].parent / "shared" / "benchmarks"
SHARED_SCORER = SHARED_BENCH / "score.py"
DEV_QUESTIONS = SHARED_BENCH / "chunking_eval" / "questions.csv"


def q(corpus: str, *refs: tuple[int, int], qid: int = 0) -> Question:
    return Question(qid, "a question?", corpus, tuple(Reference(s, e) for s, e in refs))


# -- span arithmetic -------------------------------------------------------------------


def test_union_joins_overlapping_and_touching_spans_and_drops_empty_ones() -> None:
    assert union_spans([(10, 20), (0, 5), (5, 8), (15, 30), (40, 40), (50, 49)]) == [
        (0, 8),
        (10, 30),
    ]


def test_covered_counts_each_reference_character_once() -> None:
    # The two passages overlap each other and the reference: 10..30 is covered, once.
    assert covered_chars([(10, 30)], [(0, 20), (15, 40)]) == 20
    # Overlapping references are unioned too.
    assert covered_chars([(10, 20), (15, 30)], [(0, 100)]) == 20
    assert covered_chars([(10, 20)], [(20, 30)]) == 0


def test_budget_cut_keeps_whole_passages_then_a_prefix_of_the_crossing_one() -> None:
    assert budget_cut([(0, 600), (900, 1500), (2000, 2100)], 1000) == [(0, 600), (900, 1300)]
    assert budget_cut([(0, 1000), (5000, 5100)], 1000) == [(0, 1000)]
    assert budget_cut([(0, 10)], 1000) == [(0, 10)]


# -- metric definitions ----------------------------------------------------------------


def test_recall_at_k_is_the_covered_share_of_the_reference_in_the_first_k() -> None:
    questions = [q("a", (100, 200))]
    run = {0: [("a", 0, 150), ("a", 150, 300)]}
    m = score_run(questions, run, ks=[1, 2], budgets=[100])
    assert m["recall@1"] == pytest.approx(0.5)
    assert m["recall@2"] == pytest.approx(1.0)


def test_precision_pays_for_a_character_handed_over_twice() -> None:
    questions = [q("a", (0, 100))]
    run = {0: [("a", 0, 100), ("a", 0, 100)]}
    m = score_run(questions, run, ks=[2], budgets=[100])
    assert m["recall@2"] == pytest.approx(1.0)
    assert m["precision@2"] == pytest.approx(100 / 200)
    assert m["chars@2"] == pytest.approx(200)


def test_iou_is_covered_over_passages_plus_uncovered_reference() -> None:
    questions = [q("a", (0, 100))]
    run = {0: [("a", 50, 250)]}  # covers 50 of 100, spends 200
    m = score_run(questions, run, ks=[1], budgets=[100])
    assert m["iou@1"] == pytest.approx(50 / (200 + 100 - 50))
    assert m["precision@1"] == pytest.approx(50 / 200)


def test_a_passage_of_another_corpus_costs_characters_but_covers_nothing() -> None:
    questions = [q("a", (0, 100))]
    run = {0: [("b", 0, 100), ("a", 0, 100)]}
    m = score_run(questions, run, ks=[1, 2], budgets=[100, 200])
    assert m["recall@1"] == 0.0
    assert m["chars@1"] == pytest.approx(100)
    assert m["recall@2"] == pytest.approx(1.0)
    assert m["precision@2"] == pytest.approx(0.5)
    # The foreign passage eats the whole 100-character budget.
    assert m["recall@100c"] == 0.0
    assert m["recall@200c"] == pytest.approx(1.0)


def test_recall_at_budget_counts_the_prefix_of_the_passage_crossing_the_budget() -> None:
    questions = [q("a", (900, 1100))]
    run = {0: [("a", 0, 600), ("a", 800, 1400)]}
    m = score_run(questions, run, ks=[2], budgets=[1000, 2000])
    # 600 + the first 400 characters of the second passage: 800..1200 covers 900..1100.
    assert m["recall@1000c"] == pytest.approx(1.0)
    m = score_run(questions, run, ks=[2], budgets=[700])
    # 600 + 100: 800..900 covers nothing of the reference.
    assert m["recall@700c"] == 0.0


def test_per_corpus_scores_average_each_corpus_questions_alone() -> None:
    questions = [q("a", (0, 100)), q("b", (0, 100)), q("a", (200, 300)), q("b", (50, 150))]
    run = {
        0: [("a", 0, 100)],
        1: [("a", 0, 100), ("b", 0, 50)],  # a foreign passage costs, covers nothing
        3: [("b", 50, 150)],  # qid 2 is missing: it scores 0
    }
    scores = score_by_corpus(questions, run, ks=(1,), budgets=(100,))
    assert list(scores) == ["a", "b"]
    assert scores["a"]["recall@1"] == pytest.approx(0.5)
    assert scores["a"]["questions"] == 2 and scores["a"]["answered"] == 1
    assert scores["b"]["recall@1"] == pytest.approx(0.5)  # (0 + 1) / 2
    assert scores["b"]["recall@100c"] == pytest.approx(0.5)
    assert scores["b"]["answered"] == 2
    overall = score_run(questions, run, ks=(1,), budgets=(100,))
    weighted = sum(s["recall@100c"] * s["questions"] for s in scores.values()) / len(questions)
    assert weighted == pytest.approx(overall["recall@100c"])


def test_a_question_missing_from_the_run_scores_zero_and_is_not_answered() -> None:
    questions = [q("a", (0, 10), qid=0), q("a", (0, 10), qid=1)]
    m = score_run(questions, {0: [("a", 0, 10)]}, ks=[1], budgets=[10])
    assert m["recall@1"] == pytest.approx(0.5)
    assert (m["questions"], m["answered"]) == (2, 1)


# -- run files -------------------------------------------------------------------------


def test_write_then_load_run_round_trips(tmp_path: Path) -> None:
    run = {1: [("a", 0, 5), ("b", 7, 7)], 0: []}
    path = tmp_path / "run.jsonl"
    write_run(path, run)
    assert [json.loads(line)["qid"] for line in path.read_text().splitlines()] == [0, 1]
    assert load_run(path, 2) == {0: [], 1: [("a", 0, 5), ("b", 7, 7)]}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"qid": 5, "passages": []}', r"qid 5 is not a row of the question set"),
        ('{"qid": 0, "passages": [{"corpus_id": "a", "start": 9, "end": 3}]}', "bad span"),
        ('{"qid": 0, "passages": [{"corpus_id": "a", "start": 1.5, "end": 3}]}', "bad span"),
        ('{"qid": 0, "passages": [', r"run.jsonl:1: not a JSON line"),
        ("[0, []]", "expected an object with a qid and a list of passages"),
        ('{"qid": 0, "passages": {"a": 1}}', "expected an object with a qid"),
        ('{"qid": 0, "passages": [7]}', "bad span"),
        ('{"qid": 0, "passages": [{"start": 1, "end": 3}]}', "has no corpus_id"),
    ],
)
def test_load_run_rejects_bad_lines(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ConfigurationError, match=message):
        load_run(path, 2)


def test_load_run_rejects_a_repeated_qid(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"qid": 0, "passages": []}\n{"qid": 0, "passages": []}\n')
    with pytest.raises(ConfigurationError, match=r"run.jsonl:2: qid 0 appears twice"):
        load_run(path, 1)


# -- question sets ---------------------------------------------------------------------


def _write_csv(path: Path, rows: list[dict[str, str]], header: str) -> Path:
    import csv

    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header.split(","))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_load_questions_reads_references_as_character_spans(tmp_path: Path) -> None:
    refs = json.dumps([{"content": "élan", "start_index": 4, "end_index": 8}])
    path = _write_csv(
        tmp_path / "q.csv",
        [{"question": "What?", "references": refs, "corpus_id": "c"}],
        "question,references,corpus_id",
    )
    (question,) = load_questions(path)
    assert question == Question(0, "What?", "c", (Reference(4, 8, "élan"),))
    check_references([question], {"c": "The élan vital"})


def test_load_questions_names_a_missing_column(tmp_path: Path) -> None:
    path = _write_csv(
        tmp_path / "q.csv", [{"question": "x", "references": "[]"}], "question,references"
    )
    with pytest.raises(ConfigurationError, match=r"lacks the column\(s\) \['corpus_id'\]"):
        load_questions(path)


def test_load_questions_names_the_row_with_bad_references(tmp_path: Path) -> None:
    path = _write_csv(
        tmp_path / "q.csv",
        [
            {
                "question": "ok?",
                "references": '[{"start_index": 0, "end_index": 1}]',
                "corpus_id": "c",
            },
            {"question": "bad?", "references": "not json", "corpus_id": "c"},
        ],
        "question,references,corpus_id",
    )
    with pytest.raises(ConfigurationError, match=r"question 1: references is not JSON"):
        load_questions(path)


def test_load_questions_of_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(DocumentReadError, match=r"nope.csv.*no such file"):
        load_questions(tmp_path / "nope.csv")


def test_check_references_catches_offsets_that_do_not_match_the_content() -> None:
    question = Question(3, "What?", "c", (Reference(0, 4, "élan"),))
    with pytest.raises(ConfigurationError, match=r"question 3: reference \[0, 4\) of 'c' reads"):
        check_references([question], {"c": "The élan vital"})


def test_check_references_catches_an_unknown_corpus() -> None:
    question = Question(0, "What?", "missing", (Reference(0, 1),))
    with pytest.raises(ConfigurationError, match=r"corpus 'missing' not found"):
        check_references([question], {"c": "text"})


# -- agreement with the shared scorer --------------------------------------------------


@pytest.fixture(scope="module")
def shared_scorer() -> ModuleType:
    if not SHARED_SCORER.is_file() or not DEV_QUESTIONS.is_file():
        pytest.skip(f"the shared benchmark is absent ({SHARED_BENCH})")
    spec = importlib.util.spec_from_file_location("shared_score", SHARED_SCORER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _synthetic_run(questions: list[Question], seed: int = 7) -> dict[int, list]:
    """Passages near, over, around and away from the references, in every corpus.

    Includes duplicates, overlaps, empty spans, foreign corpora and skipped questions, so
    that every branch of both scorers is exercised.
    """
    rng = random.Random(seed)
    corpora = sorted({x.corpus_id for x in questions})
    run: dict[int, list] = {}
    for x in questions:
        if rng.random() < 0.05:
            continue  # missing question
        passages = []
        for _ in range(rng.randint(0, 14)):
            ref = rng.choice(x.references)
            kind = rng.random()
            if kind < 0.5:
                start = max(0, ref.start + rng.randint(-800, 400))
                end = start + rng.choice([0, 50, 250, 400, 2000, 4000])
                passages.append((x.corpus_id, start, end))
            elif kind < 0.75:
                passages.append((rng.choice(corpora), ref.start, ref.end))
            elif kind < 0.9 and passages:
                passages.append(rng.choice(passages))  # handed over twice
            else:
                start = rng.randint(0, 100_000)
                passages.append((x.corpus_id, start, start + rng.randint(1, 3000)))
        run[x.qid] = passages
    return run


def test_scores_agree_with_the_shared_scorer_on_a_run(
    shared_scorer: ModuleType, tmp_path: Path
) -> None:
    ours_q = load_questions(DEV_QUESTIONS)
    path = tmp_path / "run.jsonl"
    write_run(path, _synthetic_run(ours_q))
    ks, budgets = [1, 3, 5, 10], [500, 1000, 2000, 4000, 8000]

    theirs_q = shared_scorer.load_questions(str(DEV_QUESTIONS))
    theirs = shared_scorer.score(
        theirs_q, shared_scorer.load_run(str(path), len(theirs_q)), ks, budgets
    )
    ours = score_run(ours_q, load_run(path, len(ours_q)), ks, budgets)

    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
    assert 0.0 < ours["recall@5"] < 1.0  # the run is neither empty nor perfect


def test_per_question_values_average_to_the_scorers_figures_to_the_last_digit(
    shared_scorer: ModuleType,
) -> None:
    # The intervals are drawn from these values: their mean must be the printed figure.
    ours_q = load_questions(DEV_QUESTIONS)
    run = _synthetic_run(ours_q, seed=3)
    ks, budgets = [1, 5], [1000, 8000]
    per_question = score_per_question(ours_q, run, ks, budgets)
    means = score_run(ours_q, run, ks, budgets)
    theirs_q = shared_scorer.load_questions(str(DEV_QUESTIONS))
    theirs = shared_scorer.score(theirs_q, run, ks, budgets)
    assert set(per_question) == {k for k in means if "@" in k}
    for key, values in per_question.items():
        assert len(values) == len(ours_q), key
        assert mean_of(values) == means[key] == theirs[key], key
    assert 0.0 < means["recall@5"] < 1.0


def test_mean_of_adds_left_to_right() -> None:
    values = [1e16, 1.0, -1e16, 1.0]
    assert mean_of(values) == ((((0.0 + 1e16) + 1.0) - 1e16) + 1.0) / 4
    assert mean_of([]) == 0.0


def test_per_corpus_scores_agree_with_the_shared_scorer_on_each_corpus(
    shared_scorer: ModuleType,
) -> None:
    ours_q = load_questions(DEV_QUESTIONS)
    run = _synthetic_run(ours_q, seed=5)
    ks, budgets = [1, 5], [1000, 4000]
    ours = score_by_corpus(ours_q, run, ks, budgets)
    theirs_q = shared_scorer.load_questions(str(DEV_QUESTIONS))
    assert set(ours) == {corpus for corpus, _ in theirs_q} and len(ours) == 3
    for corpus, scores in ours.items():
        qids = [i for i, (c, _) in enumerate(theirs_q) if c == corpus]
        sub_run = {j: run[i] for j, i in enumerate(qids) if i in run}
        theirs = shared_scorer.score([theirs_q[i] for i in qids], sub_run, ks, budgets)
        assert scores == pytest.approx(theirs, rel=1e-12, abs=1e-12), corpus


def test_the_shared_scorer_command_accepts_our_run_file(
    shared_scorer: ModuleType, tmp_path: Path
) -> None:
    questions = load_questions(DEV_QUESTIONS)
    path = tmp_path / "run.jsonl"
    write_run(path, _synthetic_run(questions, seed=11))
    out = subprocess.run(
        [
            sys.executable,
            str(SHARED_SCORER),
            "--questions",
            str(DEV_QUESTIONS),
            "--run",
            str(path),
            "--json",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    theirs = json.loads(out.stdout)
    ours = score_run(questions, load_run(path, len(questions)))
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)
