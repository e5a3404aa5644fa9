"""Strict validation of bot rows: every error names the bot and the key."""

from __future__ import annotations

from typing import Any

import pytest

from parrot_parents.bots.settings import (
    BOT_KEYS,
    apply_changes,
    parse_assignment,
    validate_bot,
)
from parrot_parents.errors import BotConfigError, ConfigurationError

BASE = {"name": "hr", "collection": "handbook"}


def test_defaults() -> None:
    s = validate_bot(BASE)
    assert s.expand_to_parent is False
    assert s.expansion_mode == "parent"
    assert s.context_search_limit is None  # 10, or 20 with a budget (retrieval options)
    assert s.context_budget is None
    assert s.reranker_config is None
    assert s.parent_searcher_config == {"type": "in_table"}
    assert s.enabled is True
    assert set(s.to_row()) == set(BOT_KEYS)


def test_id_and_timestamps_of_a_loaded_row_are_ignored() -> None:
    validate_bot({**BASE, "id": 3, "created_at": "x", "updated_at": "y"})


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"limit": 5}, r"bot 'hr': limit: unknown key \(known keys: collection, "),
        (
            {"context_search_limit": "5"},
            "bot 'hr': context_search_limit must be a positive int \\(at most 100\\), got \"5\"",
        ),
        # The words of RetrievalOptions, under the row's name of the option.
        ({"context_search_limit": 5.0}, r"context_search_limit must be a positive int \(at"),
        ({"context_search_limit": True}, r"context_search_limit must be a positive int \(at"),
        (
            {"context_search_limit": 0},
            r"context_search_limit must be a positive int \(at most 100\), got 0",
        ),
        # One limit for every surface (retrieval.options.LIMIT_MAX), as over HTTP.
        ({"context_search_limit": 101}, r"\(at most 100\), got 101"),
        ({"expand_to_parent": "yes"}, "expand_to_parent: Input should be a valid boolean"),
        ({"expand_to_parent": 1}, "expand_to_parent: Input should be a valid boolean"),
        ({"context_budget": -1}, r"context_budget must be a positive int \(at most 10,000,000\)"),
        ({"collection": "hand book"}, "collection: String should match pattern"),
        ({"name": "../etc"}, "name: String should match pattern"),
        ({"description": "x" * 2001}, "description: String should have at most 2000"),
        (
            {"expansion_mode": "window:0"},
            r'expansion_mode "window:0": the window size N must be >= 1',
        ),
        ({"expansion_mode": "auto_merge:0"}, r"the auto_merge threshold T must be in \(0, 1\]"),
        ({"expansion_mode": "auto_merge:1.5"}, r"threshold T must be in \(0, 1\]"),
        ({"expansion_mode": "sideways"}, "must be 'parent', 'auto_merge:T'"),
        ({"reranker_config": "cross_encoder"}, "reranker_config: Input should be a valid dict"),
        (
            {"reranker_config": {"model": "m"}},
            "reranker_config.type: missing 'type'; known "
            r"types: \['cross_encoder'\]",
        ),
        (
            {"reranker_config": {"type": "nope"}},
            r"reranker_config.type: unknown reranker type "
            r"'nope'; known types: \['cross_encoder'\]",
        ),
        (
            {"reranker_config": {"type": "cross_encoder", "batchsize": 8}},
            r"reranker_config.batchsize: unknown key \(known keys: batch_size, device, "
            r"max_length, model\)",
        ),
        (
            {"reranker_config": {"type": "cross_encoder", "batch_size": "8"}},
            'reranker_config.batch_size: Input should be a valid integer, got "8"',
        ),
        (
            {"reranker_config": {"type": "cross_encoder", "device": "tpu"}},
            "reranker_config.device: String should match pattern",
        ),
        (
            {"parent_searcher_config": {"type": "in_table", "table": "x"}},
            r"parent_searcher_config.table: unknown key \(known keys: none\)",
        ),
        (
            {"parent_searcher_config": {"type": "elsewhere"}},
            "parent_searcher_config.type: unknown parent searcher type 'elsewhere'",
        ),
        (
            {"expand_to_parent": True, "parent_searcher_config": None},
            "expand_to_parent: true needs a parent_searcher_config",
        ),
    ],
)
def test_strict_errors_name_the_bot_and_the_key(change: dict[str, Any], match: str) -> None:
    with pytest.raises(BotConfigError, match=match) as info:
        validate_bot({**BASE, **change})
    assert info.value.bot == change.get("name", "hr")
    assert isinstance(info.value, ValueError)  # generic callers still catch it


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(BotConfigError) as info:
        validate_bot(
            {
                **BASE,
                "context_search_limit": "5",
                "colour": "red",
                "reranker_config": {"type": "cross_encoder", "batch_size": 0},
            }
        )
    keys = [key for key, _ in info.value.problems]
    assert keys == ["context_search_limit", "colour", "reranker_config.batch_size"]


def test_missing_required_keys() -> None:
    with pytest.raises(BotConfigError, match="bot: name: required key is missing; collection: "):
        validate_bot({})
    with pytest.raises(BotConfigError, match="expected a mapping of keys"):
        validate_bot(["hr"])  # type: ignore[arg-type]


def test_plugin_configs_are_normalised_but_keep_only_given_keys() -> None:
    s = validate_bot({**BASE, "reranker_config": {"batch_size": 4, "type": "cross_encoder"}})
    assert s.reranker_config == {"type": "cross_encoder", "batch_size": 4}


@pytest.mark.parametrize("mode", ["parent", "auto_merge:0.5", "auto_merge:1", "window:3"])
def test_expansion_modes_accepted(mode: str) -> None:
    assert validate_bot({**BASE, "expansion_mode": mode}).expansion_mode == mode


def test_expansion_mode_error_names_the_value() -> None:
    with pytest.raises(BotConfigError, match='expansion_mode "window:0": the window size'):
        validate_bot({**BASE, "expansion_mode": "window:0"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("expand_to_parent=true", ("expand_to_parent", True)),
        ("context_search_limit=5", ("context_search_limit", 5)),
        ("context_budget=null", ("context_budget", None)),
        ("description=HR handbook, 2026", ("description", "HR handbook, 2026")),
        ("description=5", ("description", "5")),
        ("expansion_mode=window:2", ("expansion_mode", "window:2")),
        ("context_search_limit=five", ("context_search_limit", "five")),
        (
            'reranker_config={"type": "cross_encoder"}',
            ("reranker_config", {"type": "cross_encoder"}),
        ),
        ("reranker_config.model=/models/x", ("reranker_config.model", "/models/x")),
        # none removes an object, as the flags' none does; elsewhere it is text.
        ("scope=none", ("scope", None)),
        ("parent_searcher_config=None", ("parent_searcher_config", None)),
        ("reranker_config=none", ("reranker_config", None)),
        ("description=none", ("description", "none")),
        ("context_budget=none", ("context_budget", "none")),
    ],
)
def test_parse_assignment(text: str, expected: tuple[str, Any]) -> None:
    assert parse_assignment(text) == expected


def test_parse_assignment_needs_an_equals_sign() -> None:
    with pytest.raises(ConfigurationError, match="expected key=value, got 'expand_to_parent'"):
        parse_assignment("expand_to_parent")


def test_apply_changes_reaches_into_json_configs() -> None:
    current = {**BASE, "reranker_config": None}
    out = apply_changes(current, {"reranker_config.model": "/m", "expand_to_parent": True})
    assert out["reranker_config"] == {"model": "/m"}
    assert out["expand_to_parent"] is True
    assert current["reranker_config"] is None  # not mutated


def test_set_accepts_the_short_flag_names() -> None:
    from parrot_parents.bots.settings import parse_assignment

    assert parse_assignment("limit=5") == ("context_search_limit", 5)
    assert parse_assignment("budget=2000") == ("context_budget", 2000)
    assert parse_assignment("mode=window:1") == ("expansion_mode", "window:1")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('reranker_config={"type": "a", "type": "b"}', "duplicate key 'type'"),
        ("context_budget=NaN", "NaN"),
    ],
)
def test_parse_assignment_refuses_json_the_server_refuses(text: str, problem: str) -> None:
    # The same value sent over HTTP is a 400; `bots set` must not keep the last key.
    with pytest.raises(ConfigurationError, match=problem):
        parse_assignment(text)
