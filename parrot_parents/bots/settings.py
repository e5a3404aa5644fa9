"""Strict configuration of a database-driven bot: one row of the ``bots`` table.

:func:`validate_bot` is the single gate every row passes, when it is loaded and when it is
written (repository, CLI, HTTP API). It rejects unknown keys, wrong types (no coercion:
``"5"`` is not an int) and out-of-range values, and raises one
:class:`~parrot_parents.errors.BotConfigError` naming the bot and every bad key. The row's
columns and defaults: docs/service.md ("The row"). The retrieval settings are the options
of :mod:`parrot_parents.retrieval.options` but ``filter``, named as in
:data:`SETTING_NAMES` (``limit``, ``budget`` and ``mode`` are ``context_search_limit``,
``context_budget`` and ``expansion_mode``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from parrot_parents.bots.registries import Registries, default_registries
from parrot_parents.errors import BotConfigError, ConfigurationError, NamedProblem
from parrot_parents.retrieval.modes import ExpansionMode
from parrot_parents.retrieval.options import (
    DEFAULTS,
    Budget,
    Limit,
    RerankCandidates,
    RetrievalOptions,
    RrfK,
    SearchMode,
    Weight,
    echo_value,
    option_problem,
)
from parrot_parents.retrieval.scope import validate_scope
from parrot_parents.strict_json import InvalidJSON, loads_strict

__all__ = [
    "BOT_KEYS",
    "SETTING_NAMES",
    "BotSettings",
    "apply_changes",
    "parse_assignment",
    "validate_bot",
    "validation_problems",
]

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
COLLECTION_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
_STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)

#: The spec's names of three options on a bot (a row, and ``Chatbot(...)``).
_SPEC_NAMES = {
    "limit": "context_search_limit",
    "budget": "context_budget",
    "mode": "expansion_mode",
}
#: Every option a bot holds -> the name of its setting: all of
#: :class:`~parrot_parents.retrieval.options.RetrievalOptions` but ``filter``.
SETTING_NAMES: dict[str, str] = {
    name: _SPEC_NAMES.get(name, name) for name in RetrievalOptions.model_fields if name != "filter"
}


class BotSettings(BaseModel):
    """A validated bot row (without its id and timestamps); frozen.

    The retrieval settings use the same field types and limits as the per-call options
    (:mod:`parrot_parents.retrieval.options`); unset (None) follows the package default.
    """

    model_config = _STRICT

    # The retrieval settings (SETTING_NAMES) are written out so that a type checker sees
    # them; tests/retrieval/test_option_surfaces.py holds them to RetrievalOptions.
    # expand_to_parent and expansion_mode are NOT NULL columns: they hold the default.

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field("", max_length=2000)
    collection: str = Field(pattern=COLLECTION_PATTERN)
    expand_to_parent: bool = bool(DEFAULTS.expand_to_parent)
    expansion_mode: ExpansionMode = DEFAULTS.mode or ExpansionMode()
    context_search_limit: Limit | None = None
    rerank_candidates: RerankCandidates | None = None
    context_budget: Budget | None = None
    search_mode: SearchMode | None = None
    rrf_k: RrfK | None = None
    dense_weight: Weight | None = None
    lexical_weight: Weight | None = None
    trim: bool | None = None
    prf: bool | None = None
    reranker_config: dict[str, Any] | None = None
    parent_searcher_config: dict[str, Any] | None = Field(
        default_factory=lambda: {"type": "in_table"}
    )
    scope: dict[str, Any] | None = None
    enabled: bool = True

    def to_row(self) -> dict[str, Any]:
        """Column values for an INSERT/UPDATE."""
        return self.model_dump()

    def retrieval_settings(self) -> dict[str, Any]:
        """The retrieval settings by setting name (the keyword arguments of a bot)."""
        return {setting: getattr(self, setting) for setting in SETTING_NAMES.values()}


#: The retrieval option each setting column holds, for the options' own words.
_OPTION_OF_SETTING = {setting: option for option, setting in SETTING_NAMES.items()}

#: Keys a row (and a write) may carry.
BOT_KEYS = tuple(BotSettings.model_fields)
_JSON_KEYS = {"reranker_config", "parent_searcher_config", "scope"}
_STR_KEYS = {"name", "description", "collection", "expansion_mode"}
#: The keys whose value is a JSON object or null; ``none`` stands for null, as it does
#: for the ``--scope`` and ``--parent-searcher-config`` flags.
_OBJECT_KEYS = {"scope", "reranker_config", "parent_searcher_config"}


def validation_problems(
    exc: ValidationError,
    model: type[BaseModel],
    prefix: str = "",
    *,
    options: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    """``[(dotted key, message), ...]`` of a pydantic error, in the package's wording:
    ``unknown key (known keys: ...)``, ``required key is missing``, the question check's
    words (never the question), a retrieval option's words as
    :class:`~parrot_parents.retrieval.options.RetrievalOptions` says them (a
    :class:`NamedProblem`), or pydantic's message followed by ``got <value>``.

    Args:
        options: field name -> retrieval option name, for the fields that hold one.

    Values are echoed as JSON (``true``, ``"5"``): a row, like an HTTP body, is JSON.
    """
    out: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        key = prefix + ".".join(str(p) for p in err["loc"])
        field = str(err["loc"][0]) if err["loc"] else ""
        if err["type"] == "extra_forbidden":
            known = sorted(model.model_fields)
            msg = f"unknown key (known keys: {', '.join(known) or 'none'})"
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"] == "value_error" and err["loc"] == ("question",):
            # A question is never echoed (it may be long or unprintable): the words of
            # the question check are the whole message, as on every other surface.
            msg = err["msg"].removeprefix("Value error, ")
        elif options and field in options:
            key = prefix + field
            shown = option_problem(err, options[field], key, as_json=True)
            msg = NamedProblem(shown)
        else:
            value = echo_value(err["input"], as_json=True)
            msg = f"{err['msg'].removeprefix('Value error, ')}, got {value}"
        out.append((key, msg))
    return out


def validate_bot(
    data: Mapping[str, Any],
    *,
    registries: Registries | None = None,
) -> BotSettings:
    """Validate a bot row or write strictly and return :class:`BotSettings`.

    Args:
        data: column values (``id``, ``created_at`` and ``updated_at`` are ignored).
        registries: type names for the two JSON configs; the process default when None.

    Raises:
        BotConfigError: every problem found, each as ``(dotted key, message)``; the message
            names the bot, e.g. ``bot 'hr': reranker_config.batch_size: Input should be a
            valid integer, got "8"``; values are echoed as JSON, as a row holds them.
    """
    if not isinstance(data, Mapping):
        got = echo_value(data, as_json=True)
        raise BotConfigError(None, [("", f"expected a mapping of keys, got {got}")])
    values = {k: v for k, v in data.items() if k not in ("id", "created_at", "updated_at")}
    name = values.get("name") if isinstance(values.get("name"), str) else None
    if registries is None:
        registries = default_registries()
    problems: list[tuple[str, str]] = []
    plugins: dict[str, dict[str, Any] | None] = {}
    for key, registry in (
        ("reranker_config", registries.rerankers),
        ("parent_searcher_config", registries.parent_searchers),
    ):
        raw = values.get(key, BotSettings.model_fields[key].get_default(call_default_factory=True))
        if not isinstance(raw, dict):
            continue
        try:
            type_name, params = registry.validate(raw)
        except ValidationError as exc:
            problems += validation_problems(exc, registry.config_model(raw["type"]), f"{key}.")
        except ConfigurationError as exc:
            problems.append((f"{key}.type", exc.message))
        else:
            plugins[key] = {"type": type_name, **params}
    try:
        settings = BotSettings.model_validate(values)
    except ValidationError as exc:
        found = validation_problems(exc, BotSettings, options=_OPTION_OF_SETTING)
        raise BotConfigError(name, found + problems) from None
    if settings.scope is not None:
        try:
            validate_scope(settings.scope)
        except ConfigurationError as exc:
            problems.append(("scope", exc.message.removeprefix("scope: ")))
    if settings.expand_to_parent and settings.parent_searcher_config is None:
        problems.append(
            ("expand_to_parent", "true needs a parent_searcher_config, e.g. {'type': 'in_table'}")
        )
    if problems:
        raise BotConfigError(settings.name, problems)
    return settings.model_copy(update=plugins)


def parse_assignment(text: str) -> tuple[str, Any]:
    """Parse one ``key=value`` of ``parrot-parents bots set``.

    String keys (``name``, ``description``, ``collection``, ``expansion_mode``) keep the
    text as it is. Other values are read as JSON (``true``, ``5``, ``null``,
    ``{"type": "in_table"}``); a value that is not JSON stays a string, so validation
    then names the wrong type. ``reranker_config.model=/models/x`` sets one key inside a
    JSON config. ``limit``, ``budget`` and ``mode`` (the ``bots add`` flag names) stand for
    ``context_search_limit``, ``context_budget`` and ``expansion_mode``. ``none`` removes a
    JSON config or the scope (``scope=none``), as the flags' ``none`` does.

    Raises:
        ConfigurationError: no ``=`` or an empty key; a JSON value with a duplicate key,
            NaN or Infinity.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigurationError(f"expected key=value, got {text!r}")
    # The short names of the `bots add` flags are accepted too.
    key = _SPEC_NAMES.get(key, key)
    if key in _STR_KEYS:
        return key, raw
    if key in _OBJECT_KEYS and raw.strip().lower() == "none":
        return key, None
    try:
        return key, loads_strict(raw)
    except InvalidJSON as exc:
        try:
            json.loads(raw)
        except (json.JSONDecodeError, ValueError):
            return key, raw  # not JSON: the text itself
        # JSON that the server would refuse (a duplicate key, NaN...) is refused here too.
        raise ConfigurationError(f"{key}: {exc}") from None


def apply_changes(current: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``current`` updated with ``changes``; dotted keys update inside a JSON config.

    ``{"reranker_config.batch_size": 8}`` sets one key of ``reranker_config`` (creating the
    object when it was null). Unknown keys are kept, so that :func:`validate_bot` names them.
    """
    out = dict(current)
    for key, value in changes.items():
        head, dot, sub = key.partition(".")
        if dot and head in _JSON_KEYS:
            config = dict(out.get(head) or {})
            config[sub] = value
            out[head] = config
        else:
            out[key] = value
    return out
