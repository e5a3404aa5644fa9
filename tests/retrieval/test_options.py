"""One options definition: the per-call, bot-row and HTTP paths agree on every value."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from parrot_parents.bots.settings import validate_bot
from parrot_parents.errors import BotConfigError, ConfigurationError
from parrot_parents.retrieval.modes import ExpansionMode, parse_mode
from parrot_parents.retrieval.options import (
    BUDGET_MAX,
    BUDGETED_LIMIT,
    DEFAULTS,
    LIMIT_MAX,
    RetrievalOptions,
)
from parrot_parents.server.schemas import ContextRequest
from parrot_parents.stores.filters import validate_filter

ROW = {"name": "hr", "collection": "docs"}
# per-call option name -> bot-row column
ROW_KEY = {
    "mode": "expansion_mode",
    "limit": "context_search_limit",
    "budget": "context_budget",
    "expand_to_parent": "expand_to_parent",
}


def _per_call(key: str, value: Any) -> str | None:
    try:
        return str(RetrievalOptions.from_overrides({key: value}).set_fields()[key])
    except ConfigurationError:
        return None


def _bot_row(key: str, value: Any) -> str | None:
    try:
        return str(getattr(validate_bot({**ROW, ROW_KEY[key]: value}), ROW_KEY[key]))
    except BotConfigError:
        return None


def _http(key: str, value: Any) -> str | None:
    try:
        return str(getattr(ContextRequest.model_validate({"question": "q", key: value}), key))
    except ValidationError:
        return None


def _agree(key: str, value: Any) -> None:
    results = {_per_call(key, value), _bot_row(key, value), _http(key, value)}
    assert len(results) == 1, (key, value, results)


_MODE_TEXT = st.one_of(
    st.sampled_from(["parent", "auto_merge", "window", "sideways", ""]).flatmap(
        lambda name: st.builds(
            lambda sep, arg, pad: f"{pad}{name}{sep}{arg}{pad}",
            st.sampled_from([":", "", "::"]),
            st.one_of(
                st.integers(-5, 1200).map(str),
                st.floats(allow_nan=True, allow_infinity=True).map(repr),
                st.sampled_from(["+2", "1e-1", ".5", "0.", "x", "", "1_0", " 3"]),
            ),
            st.sampled_from(["", " ", "\t"]),
        )
    ),
    st.text(max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(_MODE_TEXT)
def test_mode_strings_are_accepted_and_refused_alike(text: str) -> None:
    _agree("mode", text)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["limit", "budget"]),
    st.one_of(
        st.integers(-3, 3),
        st.integers(0, 2000),
        st.integers(LIMIT_MAX - 2, LIMIT_MAX + 2),
        st.integers(BUDGET_MAX - 2, BUDGET_MAX + 2),
        st.integers(),
        st.booleans(),
        st.floats(allow_nan=True),
        st.text(max_size=4),
    ),
)
def test_option_values_are_accepted_and_refused_alike(key: str, value: Any) -> None:
    _agree(key, value)


@settings(max_examples=50, deadline=None)
@given(st.one_of(st.booleans(), st.integers(0, 1), st.sampled_from(["true", "yes", "", None])))
def test_expand_to_parent_is_accepted_and_refused_alike(value: Any) -> None:
    if value is None:  # None means "not set" per call and over HTTP; a row needs a value
        return
    _agree("expand_to_parent", value)


def test_the_bot_row_takes_the_same_bounds() -> None:
    assert validate_bot({**ROW, "context_search_limit": LIMIT_MAX}).context_search_limit == 100
    with pytest.raises(BotConfigError, match=r"positive int \(at most 100\), got 101"):
        validate_bot({**ROW, "context_search_limit": LIMIT_MAX + 1})


def test_lenient_spellings_normalise_to_one_canonical_mode() -> None:
    for text, canonical in (
        (" parent", "parent"),
        ("window:+2", "window:2"),
        ("auto_merge:1e-1", "auto_merge:0.1"),
    ):
        assert str(parse_mode(text)) == canonical
        assert validate_bot({**ROW, "expansion_mode": text}).to_row()["expansion_mode"] == (
            canonical
        )


def test_resolution_order_is_call_then_bot_then_default() -> None:
    bot = RetrievalOptions.from_overrides({"limit": 7, "mode": "window:1"})
    call = RetrievalOptions.from_overrides({"limit": 3})
    resolved = call.resolve(bot)
    assert (resolved.limit, resolved.mode) == (3, ExpansionMode("window", window=1))
    assert resolved.expand_to_parent is DEFAULTS.expand_to_parent is False
    assert RetrievalOptions().resolve().limit == DEFAULTS.limit == 10


def test_a_budget_deepens_the_default_limit_only() -> None:
    budgeted = RetrievalOptions.from_overrides({"budget": 2000})
    assert budgeted.resolve().limit == BUDGETED_LIMIT == 20
    # A limit set anywhere wins over the budget rule: per call, or on the bot.
    assert RetrievalOptions.from_overrides({"budget": 2000, "limit": 5}).resolve().limit == 5
    bot = RetrievalOptions.from_overrides({"limit": 7})
    assert budgeted.resolve(bot).limit == 7
    # The bot's budget counts as a budget too.
    bot_budget = RetrievalOptions.from_overrides({"budget": 4000})
    assert RetrievalOptions().resolve(bot_budget).limit == BUDGETED_LIMIT


@pytest.mark.parametrize("value", [3, None])
def test_unknown_options_are_named_whatever_their_value(value: object) -> None:
    with pytest.raises(ConfigurationError, match="unknown option 'top_k'"):
        RetrievalOptions.from_overrides({"top_k": value})
    # A known option set to None is unset.
    assert RetrievalOptions.from_overrides({"limit": None}).limit is None


def test_rerank_candidates_default_to_four_times_the_limit() -> None:
    resolved = RetrievalOptions.from_overrides({"limit": 5}).resolve()
    assert resolved.candidates(reranking=False) == 5
    assert resolved.candidates(reranking=True) == 20
    fewer = RetrievalOptions.from_overrides({"limit": 5, "rerank_candidates": 2}).resolve()
    assert fewer.candidates(reranking=True) == 5  # never fewer than the limit


_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "expand_to_parent": st.booleans(),
        "limit": st.integers(1, 50),
        "filter": st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 3), max_size=2),
        "rerank_candidates": st.integers(1, 100),
        "budget": st.integers(100, 10_000),
        "mode": st.sampled_from(["parent", "window:1", "auto_merge:0.5"]),
        "search_mode": st.sampled_from(["dense", "lexical", "hybrid"]),
        "rrf_k": st.integers(1, 100),
        "dense_weight": st.floats(0.0, 2.0),
        "lexical_weight": st.floats(0.0, 2.0),
    },
)


@settings(max_examples=200, deadline=None)
@given(_OPTIONS, st.one_of(st.none(), _OPTIONS))
def test_resolve_follows_the_order_of_over(
    call: dict[str, Any], bot: dict[str, Any] | None
) -> None:
    """``resolve`` merges plain dicts (a hot path); it must give what chaining ``over``
    gives: the call's options, then the bot's, the budget's deeper limit, then defaults."""
    options = RetrievalOptions.from_overrides(call)
    base = None if bot is None else RetrievalOptions.from_overrides(bot)
    chained = options.over(base)
    if chained.limit is None and chained.budget is not None:
        chained = chained.model_copy(update={"limit": BUDGETED_LIMIT})
    chained = chained.over(DEFAULTS)
    resolved = options.resolve(base)
    for name in (f.name for f in dataclasses.fields(resolved)):
        assert getattr(resolved, name) == getattr(chained, name), name


_FILTER_KEYS = st.sampled_from(["year", "document_id", "$and", "$or", "$not", "$nor", "gte"])
_FILTER_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet="ab\x00\\\ud800", max_size=3),
)
_FILTERS = st.recursive(
    _FILTER_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(
                _FILTER_KEYS, st.sampled_from(["$gte", "$in", "$eq", "$exists", "$like", "$regex"])
            ),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_FILTER_KEYS, _FILTERS, max_size=3))
def test_filters_are_accepted_and_refused_alike_in_the_same_words(flt: dict[str, Any]) -> None:
    """The store's validator is the one rule: per call and over HTTP a filter is refused
    exactly when the store refuses it, with the store's message."""
    try:
        validate_filter(flt)
        store_error = None
    except ConfigurationError as exc:
        store_error = str(exc)  # the message and its hint
    try:
        RetrievalOptions.from_overrides({"filter": flt})
        per_call = None
    except ConfigurationError as exc:
        per_call = str(exc)
    try:
        ContextRequest.model_validate({"question": "q", "filter": flt})
        http = None
    except ValidationError as exc:
        http = str(exc)
    if store_error is None:
        assert per_call is None and http is None, (flt, per_call, http)
    else:
        assert per_call is not None and store_error in per_call, (flt, store_error, per_call)
        assert http is not None and store_error in http, (flt, store_error, http)
