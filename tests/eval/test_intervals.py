"""Tests of parrot_parents.eval.intervals: percentile bootstrap intervals over questions and
paired intervals of the difference of two runs, on per-question values from the scorer."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parrot_parents.eval.intervals import (
    DEFAULT_SEED,
    paired_differences,
    percentile_interval,
    percentile_intervals,
)
from parrot_parents.eval.questions import Question, Reference, load_questions
from parrot_parents.eval.scorer import mean_of, score_per_question

DEV_QUESTIONS = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "benchmarks"
    / "chunking_eval"
    / "questions.csv"
)


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    """The shared dev set when present, else 120 made-up questions of two corpora."""
    if DEV_QUESTIONS.is_file():
        return load_questions(DEV_QUESTIONS)
    rng = random.Random(1)
    out = []
    for qid in range(120):
        start = rng.randint(0, 50_000)
        ref = Reference(start, start + rng.randint(40, 400))
        out.append(Question(qid, "why?", "ab"[qid % 2], (ref,)))
    return out


def exact_run(questions: list[Question]) -> dict[int, list[tuple[str, int, int]]]:
    """Every question answered with exactly its reference spans."""
    return {q.qid: [(q.corpus_id, r.start, r.end) for r in q.references] for q in questions}


def half_run(questions: list[Question]) -> dict[int, list[tuple[str, int, int]]]:
    """The exact answer for odd qids, nothing for even ones."""
    return {qid: (p if qid % 2 else []) for qid, p in exact_run(questions).items()}


def noisy_values(n: int, seed: int = 4) -> list[float]:
    rng = random.Random(seed)
    return [rng.choice([0.0, 1.0, rng.random()]) for _ in range(n)]


# -- one run ---------------------------------------------------------------------------


def test_the_interval_holds_the_mean_and_lies_within_the_values(
    questions: list[Question],
) -> None:
    per_question = score_per_question(questions, half_run(questions), (1, 5), (1000, 4000))
    intervals = percentile_intervals(per_question)
    assert set(intervals) == set(per_question)
    for key, (low, high) in intervals.items():
        values = per_question[key]
        assert min(values) <= low < mean_of(values) < high <= max(values), key
    low, high = intervals["recall@1000c"]
    # About half the questions are answered: the mean is near 0.5, and 276 (or 120)
    # questions cannot pin it down to better than several points.
    assert 0.03 < high - low < 0.3


def test_a_metric_constant_over_the_questions_has_a_zero_width_interval() -> None:
    for value in (0.0, 1.0, 0.1, 1234.5):
        values = [value] * 276
        assert percentile_interval(values) == (mean_of(values),) * 2
    assert percentile_interval([]) == (0.0, 0.0)
    assert percentile_interval([0.3]) == (0.3, 0.3)


def test_the_same_seed_gives_the_same_interval_and_another_seed_another() -> None:
    values = noisy_values(276)
    first = percentile_interval(values)
    assert percentile_interval(values) == first
    assert percentile_interval(values, seed=DEFAULT_SEED) == first
    assert percentile_interval(values, seed=DEFAULT_SEED + 1) != first


def test_every_metric_of_one_call_is_resampled_with_the_same_questions() -> None:
    values = noisy_values(100)
    both = percentile_intervals({"x": values, "y": values})
    assert both["x"] == both["y"] == percentile_interval(values)


def test_more_confidence_gives_a_wider_interval() -> None:
    values = noisy_values(276)
    low90, high90 = percentile_interval(values, confidence=0.90)
    low99, high99 = percentile_interval(values, confidence=0.99)
    assert low99 < low90 and high90 < high99


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"resamples": 0}, "resamples must be a positive int"),
        ({"confidence": 1.0}, "confidence must lie strictly between 0 and 1"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        percentile_interval([0.0, 1.0], **kwargs)  # type: ignore[arg-type]


def test_lists_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        percentile_intervals({"x": [0.0, 1.0], "y": [1.0]})
    with pytest.raises(ValueError, match="different lengths"):
        paired_differences({"x": [0.0, 1.0]}, {"x": [1.0]})
    with pytest.raises(ValueError, match="different metrics"):
        paired_differences({"x": [0.0]}, {"y": [1.0]})


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=300),
    st.integers(min_value=0, max_value=2**32),
)
def test_the_interval_brackets_the_mean_of_any_values(values: list[float], seed: int) -> None:
    low, high = percentile_interval(values, resamples=200, seed=seed)
    mean = mean_of(values)
    assert low <= mean <= high
    # Within the values, but for the mean itself where rounding puts it a digit outside.
    assert min(min(values), mean) <= low and high <= max(max(values), mean)


# -- two runs --------------------------------------------------------------------------


def test_a_run_against_itself_differs_by_exactly_zero(questions: list[Question]) -> None:
    run = half_run(questions)
    per_question = score_per_question(questions, run)
    diffs = paired_differences(per_question, per_question)
    assert list(diffs) == list(per_question)
    for key, d in diffs.items():
        assert (d.diff, d.low, d.high) == (0.0, 0.0, 0.0), key
        assert (d.higher, d.lower, d.tied) == (0, 0, len(questions)), key
        assert d.a == d.b == mean_of(per_question[key])


def test_a_strictly_better_run_gives_an_interval_wholly_above_zero(
    questions: list[Question],
) -> None:
    a = score_per_question(questions, half_run(questions), (1, 5), (2000,))
    b = score_per_question(questions, exact_run(questions), (1, 5), (2000,))
    diffs = paired_differences(a, b)
    n_even = (len(questions) + 1) // 2
    for key in ("recall@1", "recall@5", "recall@2000c", "precision@1", "iou@5"):
        d = diffs[key]
        assert d.diff == mean_of(b[key]) - mean_of(a[key]) > 0, key
        assert 0 < d.low < d.diff < d.high, key
        assert (d.higher, d.lower) == (n_even, 0), key
    # B hands over characters where A handed over none.
    assert diffs["chars@1"].low > 0 and diffs["chars@1"].higher == n_even


def test_pairing_narrows_the_interval_of_a_difference_the_questions_share() -> None:
    # B is A plus 0.01 on every question: the per-question spread cancels out.
    a = noisy_values(276)
    b = [x + 0.01 for x in a]
    d = paired_differences({"m": a}, {"m": b})["m"]
    assert d.high - d.low < 1e-9
    assert d.diff == pytest.approx(0.01)
    low_a, high_a = percentile_interval(a)
    assert high_a - low_a > 0.05  # each run alone is far less certain
