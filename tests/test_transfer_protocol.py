"""The transfer protocol's pure parts: the folds, the choice on the other folds, the
0.3-point rule, and the table they make. No database, no model, no eval run."""

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


def test_a_lever_stays_when_it_never_costs_more_than_0_3_points() -> None:
    defaults = {("a", 1000): 0.800, ("a", 2000): 0.900, ("b", 1000): 0.700}
    without = {("a", 1000): 0.803, ("a", 2000): 0.880, ("b", 1000): 0.650}
    verdict = lever_verdict(defaults, without)
    assert verdict.kept and verdict.where == ("a", 1000)
    assert verdict.worst == pytest.approx(-0.003)


def test_a_lever_goes_when_one_fold_and_budget_loses_more_than_0_3_points() -> None:
    defaults = {("a", 1000): 0.800, ("a", 2000): 0.900, ("b", 1000): 0.700}
    without = {("a", 1000): 0.700, ("a", 2000): 0.904, ("b", 1000): 0.600}
    verdict = lever_verdict(defaults, without)
    assert not verdict.kept
    assert verdict.where == ("a", 2000) and verdict.worst == pytest.approx(-0.004)


def test_the_rule_needs_every_fold_and_budget_on_both_sides() -> None:
    with pytest.raises(ValueError, match="without lacks"):
        lever_verdict({("a", 1000): 0.8}, {})


def test_the_table_has_a_row_per_fold_and_budget_and_a_verdict_per_lever() -> None:
    slugs = [DEFAULTS.slug, *(c.slug for _, c in LEVERS), *(c.slug for _, c in GRID)]
    scores = {(s, c, b): 0.5 for s in slugs for c, _ in CORPORA for b in (1000, 2000)}
    # Trimming costs 1 point on structured_eval at 2000; the lexical weight 2 wins on
    # chatlogs alone, so every fold but chatlogs's chooses it, and scores it where it ties.
    scores[("no-trim", "wikitexts_md", 2000)] = 0.51
    scores[("lexical-2", "chatlogs", 1000)] = 0.6
    text, verdicts = render(scores, (1000, 2000))
    rows = [line for line in text.splitlines() if re.search(r"\| \d+c \| ", line)]
    assert len(rows) == len(CORPORA) * 2
    assert rows[0].startswith("| chatlogs (state_of_the_union, wikitexts, structured_eval) | 1000c")
    assert rows[0].endswith("| 0.500 (1) |")  # chatlogs is not in its own tuning set
    assert rows[2].endswith("| 0.500 (2) |")  # chosen on chatlogs, scored on the speech
    assert rows[3].endswith("| 0.500 (1) |")  # at 2000 the weights tie: the default stays
    assert dict((lever, v.kept) for lever, v in verdicts) == {
        lever: lever != "sentence trimming" for lever, _ in LEVERS
    }
    assert "| sentence trimming | `--no-trim` | −1.0 | structured_eval @2000c | **fails**" in text
