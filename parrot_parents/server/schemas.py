"""Request bodies of the HTTP service: strict pydantic models and the JSON reader.

Bodies are JSON objects of at most ``max_body_bytes`` (64 KiB by default). Unknown keys,
wrong types (no coercion: ``"5"`` is not an int) and out-of-range values are rejected
with a 400 whose ``details`` name each bad key.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from aiohttp import web
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from parrot_parents.bots.config import parse_expansion_mode, validation_problems
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.filters import validate_filter
from parrot_parents.strict_json import InvalidJSON, find_nul, loads_strict

__all__ = ["AskRequest", "BadRequest", "ContextRequest", "read_body"]

M = TypeVar("M", bound=BaseModel)


#: JSON scalar allowed as a plain (equality) metadata filter value.
Scalar = str | int | float | bool


def _operators_or_filter(value: dict[str, Any]) -> dict[str, Any]:
    """A nested object must be operators (``{"$gte": 2022}``) or a nested filter."""
    if any(str(k).startswith("$") for k in value) or any(
        isinstance(v, dict | list) for v in value.values()
    ):
        return value
    raise ValueError(
        "a nested object must hold operators such as {'$gte': 2022}; "
        "write {'$not': [{...}]} to negate a plain filter"
    )


#: A filter value over HTTP: a scalar (equality), an operator object, or a list
#: (``$and``/``$or``/``$not``). Checked in full by :func:`validate_filter`.
FilterValue = Scalar | Annotated[dict[str, Any], AfterValidator(_operators_or_filter)] | list[Any]


class BadRequest(Exception):
    """A body that cannot be used; becomes a 400 with ``message`` and ``details``."""

    def __init__(self, message: str, details: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []


class ContextRequest(BaseModel):
    """Body of ``POST /api/v1/bots/{name}/context``; every field but ``question`` is an
    optional per-call override (omitted or null: the bot's setting)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    question: str = Field(min_length=1, max_length=4000, description="the user's question")
    expand_to_parent: bool | None = Field(None, description="fold hits into their parents")
    limit: int | None = Field(None, ge=1, le=100, description="children kept after rerank")
    filter: dict[str, FilterValue] | None = Field(
        None,
        max_length=20,
        description="metadata filter (langchain-postgres operators), e.g. "
        "{'source': 'x.md'} or {'year': {'$gte': 2022}}",
    )
    rerank_candidates: int | None = Field(
        None, ge=1, le=1000, description="children searched before reranking"
    )
    budget: int | None = Field(None, ge=1, le=10_000_000, description="context size budget")
    mode: str | None = Field(
        None, max_length=40, description="'parent', 'auto_merge:T' or 'window:N'"
    )

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("filter")
    @classmethod
    def _filter(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                validate_filter(value)
            except ConfigurationError as exc:
                raise ValueError(exc.message) from None
        return value

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return parse_expansion_mode(value)
        except ConfigurationError as exc:
            raise ValueError(exc.message.split(": ", 1)[-1]) from None

    def overrides(self) -> dict[str, Any]:
        """The per-call overrides as keyword arguments (unset ones are None)."""
        return self.model_dump(exclude={"question", "max_tokens"})


class AskRequest(ContextRequest):
    """Body of ``POST /api/v1/bots/{name}/ask``: the context request plus ``max_tokens``."""

    max_tokens: int | None = Field(None, ge=1, le=32768, description="answer length cap")


async def read_body(request: web.Request, model: type[M]) -> M:
    """Read the request's JSON object and validate it with ``model``.

    The size limit is the application's ``client_max_size`` (aiohttp answers 413 past it).

    Raises:
        BadRequest: not JSON, not an object, or invalid for ``model``.
    """
    raw = await request.read()
    if not raw.strip():
        raise BadRequest("the body must be a JSON object; it is empty")
    data = _parse(raw)
    if not isinstance(data, dict):
        raise BadRequest(f"the body must be a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(exc, model)
        details = [{"key": key, "message": msg} for key, msg in problems]
        summary = "; ".join(f"{key}: {msg}" for key, msg in problems)
        raise BadRequest(f"invalid body: {summary}", details) from None


async def read_object(request: web.Request) -> dict[str, Any]:
    """Read a JSON object body without a fixed model (bot writes; validated by the caller).

    Raises:
        BadRequest: empty, not JSON, or not an object.
    """
    raw = await request.read()
    data = _parse(raw) if raw.strip() else None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def _parse(raw: bytes) -> Any:
    """Strict JSON (no NaN/Infinity, no huge numbers, bounded nesting), no NUL anywhere.

    Raises:
        BadRequest: "the body is not valid JSON: ..." or a NUL in a named key.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the body is not UTF-8 text") from None
    try:
        data = loads_strict(text)
    except InvalidJSON as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    where = find_nul(data)
    if where is not None:
        raise BadRequest(
            f"invalid body: {where}: must not contain NUL characters",
            [{"key": where, "message": "must not contain NUL characters"}],
        )
    return data
