"""The strategy grammar: every spec of the seed parses, or is refused with a clear error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parrot_parents.errors import ConfigurationError
from parrot_parents.retrieval.modes import MAX_WINDOW
from parrot_parents.strategies.spec import (
    DEFAULT_MAX_DOCUMENT_CHARS,
    MAX_COUNT,
    STRATEGY_NAMES,
    StrategySpec,
    parse_strategy,
)


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_every_name_parses_alone(name: str) -> None:
    spec = parse_strategy(name)
    assert spec.name == name
    assert parse_strategy(str(spec)) == spec  # the canonical form round-trips


def test_none_is_plain() -> None:
    assert parse_strategy(None) == StrategySpec()
    assert parse_strategy(None).retrieval_overrides() == {"expand_to_parent": False}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", StrategySpec("plain")),
        ("parent-document", StrategySpec("parent-document")),
        ("parent-document:4", StrategySpec("parent-document", group=4)),
        ("parent-document:group=4", StrategySpec("parent-document", group=4)),
        ("sentence-window", StrategySpec("sentence-window", window=2)),
        ("sentence-window:1", StrategySpec("sentence-window", window=1)),
        (" sentence-window : window = 3 ", StrategySpec("sentence-window", window=3)),
        ("hierarchical", StrategySpec("hierarchical", threshold=0.5)),
        ("hierarchical:4", StrategySpec("hierarchical", group=4, threshold=0.5)),
        (
            "hierarchical:4,threshold=1",
            StrategySpec("hierarchical", group=4, threshold=1.0),
        ),
        (
            "contextual",
            StrategySpec(
                "contextual", context="model", max_document_chars=DEFAULT_MAX_DOCUMENT_CHARS
            ),
        ),
        (
            "contextual:model=openai:gpt-4o-mini",
            StrategySpec(
                "contextual",
                context="model",
                model="openai:gpt-4o-mini",
                max_document_chars=DEFAULT_MAX_DOCUMENT_CHARS,
            ),
        ),
        ("contextual:extractive", StrategySpec("contextual", context="extractive")),
        ("contextual:context=extractive", StrategySpec("contextual", context="extractive")),
        (
            "hypothetical-questions",
            StrategySpec("hypothetical-questions", count=3, max_document_chars=12000),
        ),
        (
            "hypothetical-questions:count=2",
            StrategySpec("hypothetical-questions", count=2, max_document_chars=12000),
        ),
        (
            "hypothetical-questions:5",
            StrategySpec("hypothetical-questions", count=5, max_document_chars=12000),
        ),
        ("propositions", StrategySpec("propositions", count=6, max_document_chars=12000)),
        ("propositions:4", StrategySpec("propositions", count=4, max_document_chars=12000)),
        ("summary", StrategySpec("summary", max_document_chars=12000)),
        (
            "summary:max_document_chars=500",
            StrategySpec("summary", max_document_chars=500),
        ),
    ],
)
def test_seed_specs_parse(text: str, expected: StrategySpec) -> None:
    assert parse_strategy(text) == expected


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("parent-document:1", r"at least 2 children, got 1"),
        ("hierarchical:group=1", r"at least 2 children, got 1"),
        ("sentence-window:0", r"at least 1 neighbour on each side, got 0"),
        (f"sentence-window:{MAX_WINDOW + 1}", r"at most 1000"),
        ("hierarchical:threshold=0", r"threshold must be in \(0, 1\], got 0"),
        ("hierarchical:threshold=1.01", r"threshold must be in \(0, 1\], got 1.01"),
        ("hierarchical:threshold=nan", r"threshold must be in \(0, 1\]"),
        ("hierarchical:threshold=half", r"threshold must be a number"),
        ("hypothetical-questions:count=0", r"count must be in \[1, 20\], got 0"),
        ("propositions:21", r"count must be in \[1, 20\], got 21"),
        ("propositions:two", r"count must be a whole number, got 'two'"),
        ("summary:max_document_chars=0", r"max_document_chars must be >= 1, got 0"),
        ("summary:3", r"summary takes no positional parameter"),
        ("plain:1", r"plain takes no positional parameter"),
        ("plain:", r"nothing after ':'"),
        ("sentence-window:size=2", r"unknown parameter 'size' for sentence-window"),
        ("sentence-window:2,window=3", r"'window' is given twice"),
        ("contextual:model=", r"'model' has no value"),
        ("contextual:context=magic", r"context must be 'model' or 'extractive'"),
        ("contextual:extractive,model=m", r"extractive variant calls no model"),
        ("raptor", r"unknown strategy; use one of plain, parent-document"),
        ("", r"unknown strategy"),
    ],
)
def test_bad_specs_are_refused_with_a_clear_error(text: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match) as info:
        parse_strategy(text)
    assert repr(text.strip()) in str(info.value)  # the message names the spec


def test_a_non_string_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="must be a string"):
        parse_strategy(3)  # type: ignore[arg-type]


def test_free_strategies_map_onto_the_existing_modes() -> None:
    assert parse_strategy("plain").retrieval_overrides() == {"expand_to_parent": False}
    assert parse_strategy("parent-document:3").retrieval_overrides() == {
        "expand_to_parent": True,
        "mode": "parent",
    }
    assert parse_strategy("sentence-window:2").retrieval_overrides() == {
        "expand_to_parent": True,
        "mode": "window:2",
    }
    assert parse_strategy("hierarchical:threshold=0.25").retrieval_overrides() == {
        "expand_to_parent": True,
        "mode": "auto_merge:0.25",
    }
    assert parse_strategy("parent-document:3").parent_size(400) == 1200
    assert parse_strategy("parent-document").parent_size(400) is None


def test_model_backed_strategies_index_rows() -> None:
    for name in ("contextual", "hypothetical-questions", "propositions", "summary"):
        spec = parse_strategy(name)
        assert spec.indexes_rows and spec.needs_model and not spec.expand
    extractive = parse_strategy("contextual:extractive")
    assert extractive.indexes_rows and not extractive.needs_model


@given(st.integers(min_value=-5, max_value=30))
def test_group_boundary(group: int) -> None:
    for name in ("parent-document", "hierarchical"):
        if group >= 2:
            assert parse_strategy(f"{name}:{group}").group == group
        else:
            with pytest.raises(ConfigurationError, match="at least 2 children"):
                parse_strategy(f"{name}:{group}")


@given(st.integers(min_value=-3, max_value=MAX_WINDOW + 3))
def test_window_boundary(window: int) -> None:
    if 1 <= window <= MAX_WINDOW:
        spec = parse_strategy(f"sentence-window:window={window}")
        assert spec.mode == f"window:{window}"
    else:
        with pytest.raises(ConfigurationError, match="window must"):
            parse_strategy(f"sentence-window:{window}")


@given(st.floats(min_value=-0.5, max_value=1.5, allow_nan=False))
def test_threshold_boundary(threshold: float) -> None:
    text = f"hierarchical:threshold={threshold!r}"
    if 0.0 < threshold <= 1.0:
        assert parse_strategy(text).threshold == threshold
    else:
        with pytest.raises(ConfigurationError, match=r"in \(0, 1\]"):
            parse_strategy(text)


@given(st.integers(min_value=-2, max_value=MAX_COUNT + 3))
def test_count_boundary(count: int) -> None:
    for name in ("hypothetical-questions", "propositions"):
        if 1 <= count <= MAX_COUNT:
            spec = parse_strategy(f"{name}:count={count}")
            assert spec.count == count
            assert parse_strategy(str(spec)) == spec
        else:
            with pytest.raises(ConfigurationError, match="count must be in"):
                parse_strategy(f"{name}:{count}")
