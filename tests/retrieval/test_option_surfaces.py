"""Every surface of the retrieval options has exactly the fields of ``RetrievalOptions``.

``RetrievalOptions`` is the one list. Where a surface is derived from it (the HTTP request
bodies, a bot's ``options``/``config``, ``bots add``, ``EvalConfig.options``, the
adapters), these tests check the result; where a surface must be spelled out (a
``TypedDict`` and a dataclass for the type checker, the bot row's pydantic model and its
table, ``Chatbot``'s keyword arguments, the CLI flags that ``--help`` reads without
pydantic), they hold it to the same names, defaults and limits. Adding an option to
``RetrievalOptions`` fails here until every surface has it.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from typing import Any

import annotated_types
import pytest

from parrot_parents.bots.abstract import AbstractBot
from parrot_parents.bots.repository import bots_table
from parrot_parents.bots.settings import SETTING_NAMES, BotSettings, validate_bot
from parrot_parents.cli.common import RETRIEVAL_FLAGS
from parrot_parents.cli.main import build_parser
from parrot_parents.eval.runner import EvalConfig
from parrot_parents.integrations.common import OPTION_NAMES
from parrot_parents.integrations.langchain import ParentChildRetriever
from parrot_parents.retrieval import options as options_module
from parrot_parents.retrieval.options import (
    BUDGETED_LIMIT,
    DEFAULTS,
    ResolvedOptions,
    RetrievalOptions,
    RetrievalOverrides,
)
from parrot_parents.server.openapi import build_spec
from parrot_parents.server.schemas import AskRequest, ContextRequest

OPTIONS = list(RetrievalOptions.model_fields)
#: What a bot row holds besides its retrieval settings.
ROW_ONLY = {
    "name",
    "description",
    "collection",
    "reranker_config",
    "parent_searcher_config",
    "scope",
    "enabled",
}


def _bounds(name: str) -> tuple[Any, Any] | None:
    """``(ge, le)`` of an option's type, None when it has none."""
    found: dict[str, Any] = {}
    for arg in typing.get_args(RetrievalOptions.model_fields[name].annotation):
        for meta in getattr(arg, "__metadata__", ()):
            for item in getattr(meta, "metadata", ()):
                if isinstance(item, annotated_types.Ge):
                    found["ge"] = item.ge
                if isinstance(item, annotated_types.Le):
                    found["le"] = item.le
    return (found["ge"], found["le"]) if found else None


def _not_none(annotation: Any) -> Any:
    """``X`` of ``X | None`` (and ``X`` itself)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else typing.Union[tuple(args)]  # noqa: UP007
    return annotation


def test_the_per_call_typed_dict_has_every_option() -> None:
    assert list(typing.get_type_hints(RetrievalOverrides)) == OPTIONS


def test_resolved_options_have_every_option_and_no_default_of_their_own() -> None:
    fields = dataclasses.fields(ResolvedOptions)
    assert [f.name for f in fields] == OPTIONS
    assert all(f.default is dataclasses.MISSING for f in fields)
    resolved = RetrievalOptions().resolve()
    for name, value in DEFAULTS.set_fields().items():
        assert getattr(resolved, name) == value, name


def test_the_options_table_of_the_module_names_every_option() -> None:
    doc = options_module.__doc__ or ""
    assert all(f"``{name}``" in doc for name in OPTIONS)


def test_the_bot_row_holds_every_option_but_filter_with_the_same_types() -> None:
    assert list(SETTING_NAMES) == [n for n in OPTIONS if n != "filter"]
    fields = BotSettings.model_fields
    assert set(fields) == ROW_ONLY | set(SETTING_NAMES.values())
    for option, setting in SETTING_NAMES.items():
        ours, theirs = fields[setting], RetrievalOptions.model_fields[option]
        assert _not_none(ours.annotation) == _not_none(theirs.annotation), setting
        # NOT NULL columns hold the package default; the others are NULL until set.
        default = (
            getattr(DEFAULTS, option) if ours.annotation is _not_none(ours.annotation) else None
        )
        assert ours.default == default, setting


def test_the_bots_table_has_a_column_for_every_key_of_the_row() -> None:
    columns = set(bots_table().c.keys())
    assert columns == set(BotSettings.model_fields) | {"id", "created_at", "updated_at"}


def test_a_bot_takes_every_setting_with_the_rows_defaults() -> None:
    params = inspect.signature(AbstractBot.__init__).parameters
    not_settings = {
        "self",
        "name",
        "store",
        "parent_searcher",
        "reranker",
        "owns_store",
        "settings",
        "scope",
    }
    assert set(params) - not_settings == set(SETTING_NAMES.values())
    for setting in SETTING_NAMES.values():
        default = params[setting].default
        row_default = BotSettings.model_fields[setting].default
        assert default == row_default or str(default) == str(row_default), setting


def test_a_row_builds_a_bot_whose_options_are_its_settings() -> None:
    settings = {
        "context_search_limit": 7,
        "rerank_candidates": 30,
        "context_budget": 1500,
        "expansion_mode": "window:2",
        "search_mode": "lexical",
        "rrf_k": 20,
        "dense_weight": 0.5,
        "lexical_weight": 2.0,
    }
    row = validate_bot({"name": "b", "collection": "c", **settings})
    bot = AbstractBot(**row.retrieval_settings())
    wanted = {o: row.retrieval_settings()[s] for o, s in SETTING_NAMES.items()}
    assert bot.options == RetrievalOptions.from_overrides(wanted)
    assert set(bot.config()) == {
        "name",
        "reranker",
        "parent_searcher",
        "scope",
        *SETTING_NAMES.values(),
    }


def test_the_http_bodies_take_every_option_with_its_field() -> None:
    for model in (ContextRequest, AskRequest):
        fields = model.model_fields
        for name in OPTIONS:
            assert fields[name].annotation == RetrievalOptions.model_fields[name].annotation
            assert fields[name].metadata == RetrievalOptions.model_fields[name].metadata
    assert set(ContextRequest.model_fields) == {"question", *OPTIONS}
    spec = build_spec()["components"]["schemas"]
    assert set(spec["ContextRequest"]["properties"]) == {"question", *OPTIONS}
    assert set(spec["BotSettings"]["properties"]) == set(BotSettings.model_fields)


def test_the_cli_flags_are_the_options_with_their_defaults_and_limits() -> None:
    assert [row[0] for row in RETRIEVAL_FLAGS] == OPTIONS
    stated = {name: default for name, _, _, _, default in RETRIEVAL_FLAGS}
    for name in OPTIONS:
        value = getattr(DEFAULTS, name)
        if name == "limit":
            assert stated[name] == f"{value}, or {BUDGETED_LIMIT} with a budget"
        elif name == "rerank_candidates":
            assert value is None and stated[name] == "4 x the limit"
        elif value is None:
            assert stated[name] == "none", name
        elif isinstance(value, bool):
            assert stated[name] == ("on" if value else "off"), name
        else:
            assert stated[name] == str(value), name
    for name, _, kind, meaning, _ in RETRIEVAL_FLAGS:
        assert kind is _flag_type(name), name
        bounds = _bounds(name)
        if bounds is not None:
            lo, hi = (f"{b:,}" if isinstance(b, int) else f"{b:g}" for b in bounds)
            assert f"{lo}..{hi}" in meaning, name


def _flag_type(name: str) -> type:
    base = _not_none(RetrievalOptions.model_fields[name].annotation)
    base = typing.get_args(base)[0] if typing.get_origin(base) is typing.Annotated else base
    return base if base in (bool, int, float) else str


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["ask", "q"], OPTIONS),
        (["eval", "--questions", "q", "--corpora", "c", "--out", "o"], OPTIONS),
        (["bots", "add", "b", "--collection", "c"], list(SETTING_NAMES)),
    ],
)
def test_each_command_takes_the_options_unset(argv: list[str], wanted: list[str]) -> None:
    args = vars(build_parser().parse_args(argv))
    assert {name: args.get(name, "missing") for name in OPTIONS if name in args} == dict.fromkeys(
        wanted
    )


def test_eval_config_has_every_option_unset() -> None:
    fields = {f.name: f for f in dataclasses.fields(EvalConfig)}
    for name in OPTIONS:
        assert fields[name].default is None, name
    config = EvalConfig(
        limit=5, rerank_candidates=40, filter={"source": "a.md"}, search_mode="dense"
    )
    assert config.options().set_fields() == {
        "limit": 5,
        "rerank_candidates": 40,
        "filter": {"source": "a.md"},
        "search_mode": "dense",
    }


def test_the_adapters_take_every_option() -> None:
    assert list(OPTION_NAMES) == OPTIONS
    assert ParentChildRetriever.model_fields["options"].annotation is RetrievalOptions


def test_spec_aliases_are_documented() -> None:
    for alias in ("context_search_limit", "expand_to_parent"):
        assert re.search(rf"\b{alias}\b", AbstractBot.__doc__ or ""), alias
