"""The transfer protocol's pure parts: the folds, the choice on the other folds, the
rule that keeps or removes a lever, and the table they make. No database, no model, no eval run."""

from __future__ import annotations

import re

import pytest

from benchmarks.quality.transfer import (
    CORPORA,
    DEFAULTS,
    GRID,
    LEVERS,
    SAME_TEXT,
    Fold,
    _points,
    choose_on_others,
    lever_verdict,
    make_folds,
    render,
)


def test_each_corpus_is_a_fold_tuned_on_the_others() -> None:
    assert make_folds(["a", "b", "c"]) == [
        Fold("a", ("b", "c")),
        Fold("b", ("a", "c")),
        Fold("c", ("a", "b")),
    ]


def test_corpora_of_the_same_text_leave_the_tuning_set_together() -> None:
    folds = make_folds([c for c, _ in CORPORA], SAME_TEXT)
    assert folds == [
        Fold("chatlogs", ("state_of_the_union", "wikitexts", "wikitexts_md")),
        Fold("state_of_the_union", ("chatlogs", "wikitexts", "wikitexts_md")),
        Fold("wikitexts", ("chatlogs", "state_of_the_union")),
        Fold("wikitexts_md", ("chatlogs", "state_of_the_union")),
    ]
    for fold in folds:
        assert fold.corpus not in fold.tuning


def test_the_choice_reads_only_the_tuning_corpora() -> None:
    scores = {
        ("x", "held"): 0.99,  # best on the left-out corpus: must not matter
        ("x", "t1"): 0.50,
        ("x", "t2"): 0.50,
        ("y", "held"): 0.10,
        ("y", "t1"): 0.70,
        ("y", "t2"): 0.40,
    }
    assert choose_on_others(["x", "y"], scores, ["t1", "t2"]) == "y"  # 0.55 > 0.50
    assert choose_on_others(["x", "y"], scores, ["t2"]) == "x"


def test_a_tie_keeps_the_earlier_candidate() -> None:
    scores = {("d", "t"): 0.5, ("e", "t"): 0.5}
    assert choose_on_others(["d", "e"], scores, ["t"]) == "d"
    assert choose_on_others(["e", "d"], scores, ["t"]) == "e"


def test_a_choice_needs_candidates_and_tuning_corpora() -> None:
    with pytest.raises(ValueError, match="need candidates and tuning corpora"):
        choose_on_others(["x"], {}, [])


def test_a_lever_stays_when_no_fold_clearly_prefers_it_gone_and_the_pooled_effect_holds() -> None:
    # Removing it wins two questions of fold b and loses one (the fold's figure moves by
    # 10 points, the interval holds zero); the lever wins more on fold a: the pooled
    # effect is positive.
    defaults = {("a", 1000): [1.0] * 6 + [0.0] * 4, ("b", 1000): [0.0, 0.0, 1.0] + [0.5] * 7}
    without = {("a", 1000): [0.0] * 10, ("b", 1000): [1.0, 1.0, 0.0] + [0.5] * 7}
    verdict = lever_verdict(defaults, without)
    assert verdict.kept and verdict.against == ()
    assert verdict.where == ("b", 1000) and verdict.worst.diff == pytest.approx(-0.1)
    assert verdict.worst.low < 0 < verdict.worst.high
    assert verdict.pooled[1000].diff == pytest.approx(0.25)  # (6 - 1) / 20
    assert verdict.pooled[1000].questions == 20


def test_a_lever_goes_when_removing_it_is_better_on_a_fold_beyond_the_interval() -> None:
    # Removing it wins 8 of fold b's 10 questions and loses none: the interval of
    # defaults - without lies wholly below zero, whatever it wins elsewhere.
    defaults = {("a", 1000): [1.0] * 40, ("b", 1000): [0.0] * 8 + [1.0] * 2}
    without = {("a", 1000): [0.0] * 40, ("b", 1000): [1.0] * 10}
    verdict = lever_verdict(defaults, without)
    assert not verdict.kept and verdict.against == (("b", 1000),)
    assert verdict.worst.high < 0
    assert verdict.pooled[1000].diff > 0  # not what removes it


def test_a_lever_goes_when_its_pooled_effect_is_negative_at_one_budget() -> None:
    # No fold is clearly better without it, but over every fold's questions at 2000 the
    # defaults score lower: the point estimate decides, its interval holding zero.
    defaults = {
        ("a", 1000): [1.0, 0.0, 0.5, 0.5],
        ("a", 2000): [0.0, 1.0, 0.5, 0.5],
        ("b", 1000): [0.5] * 4,
        ("b", 2000): [0.0, 1.0, 0.5, 0.5],
    }
    without = {
        ("a", 1000): [0.0, 1.0, 0.5, 0.5],
        ("a", 2000): [1.0, 0.0, 0.5, 0.6],
        ("b", 1000): [0.5] * 4,
        ("b", 2000): [1.0, 0.0, 0.5, 0.6],
    }
    verdict = lever_verdict(defaults, without)
    assert verdict.against == ()
    assert verdict.pooled[1000].diff == 0  # not negative: it does not remove the lever
    assert verdict.pooled[2000].diff == pytest.approx(-0.025)  # -0.2 / 8
    assert verdict.pooled[2000].low < 0 < verdict.pooled[2000].high
    assert verdict.pooled_negative == [2000] and not verdict.kept


def test_a_lever_that_changes_nothing_stays() -> None:
    same = {("a", 1000): [0.2, 0.9], ("b", 1000): [1.0]}
    verdict = lever_verdict(same, same)
    assert verdict.kept
    assert (verdict.worst.diff, verdict.worst.low, verdict.worst.high) == (0, 0, 0)


def test_a_difference_too_small_for_one_decimal_keeps_its_sign() -> None:
    assert [_points(x) for x in (0.0, -0.0, 0.012, -0.000116, 0.0004)] == [
        "+0.0",
        "+0.0",
        "+1.2",
        "−0.01",
        "+0.04",
    ]


def test_the_rule_needs_every_fold_and_budget_on_both_sides() -> None:
    with pytest.raises(ValueError, match="without lacks"):
        lever_verdict({("a", 1000): [0.8]}, {})


def test_the_table_has_a_row_per_fold_and_budget_and_a_verdict_per_lever() -> None:
    slugs = [DEFAULTS.slug, *(c.slug for _, c in LEVERS), *(c.slug for _, c in GRID)]
    half = [0.0, 1.0] * 5
    scores = {(s, c, b): list(half) for s in slugs for c, _ in CORPORA for b in (1000, 2000)}
    # Without trimming, structured_eval at 2000 wins every question the defaults lose: the
    # interval lies below zero. The lexical weight 2 wins on chatlogs alone, so every fold
    # but chatlogs's chooses it, and scores it where it ties.
    scores[("no-trim", "wikitexts_md", 2000)] = [1.0] * 10
    scores[("lexical-2", "chatlogs", 1000)] = [1.0] * 6 + [0.0] * 4
    text, verdicts = render(scores, (1000, 2000))
    rows = [line for line in text.splitlines() if re.search(r"\| \d+c \| ", line)]
    assert len(rows) == len(CORPORA) * 2
    assert rows[0].startswith("| chatlogs (state_of_the_union, wikitexts, structured_eval) | 1000c")
    assert rows[0].endswith("| 0.500 (1) |")  # chatlogs is not in its own tuning set
    assert rows[2].endswith("| 0.500 (2) |")  # chosen on chatlogs, scored on the speech
    assert rows[3].endswith("| 0.500 (1) |")  # at 2000 the weights tie: the default stays
    assert "| 1.000 (−50.0 [−80.0, −20.0]) |" in rows[7]
    assert dict((lever, v.kept) for lever, v in verdicts) == {
        lever: lever != "sentence trimming" for lever, _ in LEVERS
    }
    assert (
        "| sentence trimming | `--no-trim` | −50.0 [−80.0, −20.0] | structured_eval @2000c | "
        "+0.0 [+0.0, +0.0] / −12.5 [−22.6, −2.5] | **goes**: removing it is better at "
        "structured_eval @2000c, interval below zero; pooled effect negative @2000c |"
    ) in text
    assert "| hybrid search | `--search-mode dense` | +0.0 [+0.0, +0.0] |" in text
