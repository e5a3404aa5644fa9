"""Request bodies of the HTTP service: strict pydantic models and the JSON reader.

Bodies are JSON objects of at most ``max_body_bytes`` (64 KiB by default). Unknown keys,
wrong types (no coercion: ``"5"`` is not an int) and out-of-range values are rejected
with a 400 whose ``details`` name each bad key.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from parrot_parents.bots.settings import validation_problems
from parrot_parents.errors import problem_text
from parrot_parents.retrieval.options import RetrievalOptions
from parrot_parents.server.timeouts import read_bytes
from parrot_parents.stores.questions import MAX_QUESTION_CHARS, question_problem
from parrot_parents.stores.records.values import MAX_ID_BYTES
from parrot_parents.strict_json import InvalidJSON, find_nul, loads_strict

__all__ = [
    "AskRequest",
    "BadRequest",
    "ContextRequest",
    "DeleteRequest",
    "ErrorAnswer",
    "query_flag",
    "read_body",
]

#: Longest document id the routes accept: the store's own limit, in bytes of UTF-8, so
#: every id that can be stored can be read and deleted.
MAX_DOCUMENT_ID = MAX_ID_BYTES
#: Most document ids one ``POST .../documents/delete`` takes.
MAX_DELETE_IDS = 1000


def id_too_long(document_id: str) -> bool:
    """Whether ``document_id`` is longer than :data:`MAX_DOCUMENT_ID` bytes of UTF-8."""
    return len(document_id.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_ID


M = TypeVar("M", bound=BaseModel)


class ErrorAnswer(Exception):
    """An error answer a handler raises; the error middleware sends it as JSON."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        details: list[dict[str, str]] | None = None,
        hint: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details or []
        self.hint = hint
        self.code = code


class BadRequest(ErrorAnswer):
    """A body that cannot be used; becomes a 400 with ``message`` and ``details``."""

    def __init__(self, message: str, details: list[dict[str, str]] | None = None) -> None:
        super().__init__(400, message, details=details)


def path_document_id(request: web.Request) -> str:
    """The ``document_id`` of the path.

    Raises:
        BadRequest: longer than :data:`MAX_DOCUMENT_ID` bytes of UTF-8.
    """
    document_id = request.match_info["document_id"]
    if id_too_long(document_id):
        raise BadRequest(f"document_id is longer than {MAX_DOCUMENT_ID} bytes of UTF-8")
    return document_id


#: The values a boolean query parameter takes, spelled exactly so (lowercase, as in JSON).
_FLAGS = {"true": True, "false": False}


def query_flag(request: web.Request, name: str) -> bool:
    """The boolean query parameter ``name``: ``true`` or ``false`` exactly; absent is false.

    Any other spelling (``True``, ``1``, ``yes``, empty) is refused rather than read as
    false: a client that meant "yes" must not get "no" silently.

    Raises:
        BadRequest: another value, or the parameter given more than once.
    """
    values = request.query.getall(name, [])
    if not values:
        return False
    if len(values) == 1 and values[0] in _FLAGS:
        return _FLAGS[values[0]]
    got = values[0] if len(values) == 1 else values
    message = f"must be true or false (lowercase), once; got {got!r}"
    raise BadRequest(f"query parameter {name}: {message}", [{"key": name, "message": message}])


class _Question(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    question: str = Field(
        min_length=1, max_length=MAX_QUESTION_CHARS, description="the user's question"
    )

    @field_validator("question", mode="before")
    @classmethod
    def _question(cls, value: Any) -> Any:
        # The rules and words of every surface (the Python API, the CLI, the adapters);
        # another type is left to the strict field, which names it.
        problem = question_problem(value) if isinstance(value, str) else None
        if problem is not None:
            raise ValueError(problem)
        return value

    def options(self) -> RetrievalOptions:
        """The per-call retrieval options of this body (unset ones stay unset)."""
        return RetrievalOptions(**{k: getattr(self, k) for k in RetrievalOptions.model_fields})


#: Body of ``POST /api/v1/bots/{name}/context``: the question, then every per-call option
#: with the field types, limits and descriptions of :class:`RetrievalOptions` (omitted or
#: null: the bot's setting).
_OPTION_FIELDS: dict[str, Any] = {
    name: (f.annotation, f) for name, f in RetrievalOptions.model_fields.items()
}
ContextRequest = create_model("ContextRequest", __base__=_Question, **_OPTION_FIELDS)
_OPTIONS = {name: name for name in _OPTION_FIELDS}


class AskRequest(ContextRequest):
    """Body of ``POST /api/v1/bots/{name}/ask``: the context request plus ``max_tokens``."""

    max_tokens: int | None = Field(None, ge=1, le=32768, description="answer length cap")


class DeleteRequest(BaseModel):
    """Body of ``POST .../documents/delete``; the byte limit of an id is checked apart."""

    model_config = ConfigDict(strict=True, extra="forbid")

    document_ids: list[Annotated[str, Field(min_length=1, max_length=MAX_DOCUMENT_ID)]] = Field(
        min_length=1, max_length=MAX_DELETE_IDS
    )


async def read_body(request: web.Request, model: type[M]) -> M:
    """Read the request's JSON object (:func:`read_object`) and validate it with ``model``.

    Raises:
        BadRequest: as :func:`read_object`, or invalid for ``model``.
        web.HTTPRequestTimeout: the body did not arrive within the body timeout.
    """
    data = await read_object(request)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # The options in the words of every other surface, values echoed as JSON.
        problems = validation_problems(exc, model, options=_OPTIONS)
        details = [{"key": key, "message": msg} for key, msg in problems]
        summary = "; ".join(problem_text(key, msg) for key, msg in problems)
        raise BadRequest(f"invalid body: {summary}", details) from None


async def read_object(request: web.Request) -> dict[str, Any]:
    """Read the request's JSON object, not yet validated (bot writes validate it
    themselves). The size limit is the application's ``client_max_size`` (aiohttp answers
    413 past it); the time limit its body timeout
    (:func:`~parrot_parents.server.timeouts.read_bytes`).

    Raises:
        BadRequest: empty, not JSON (duplicate keys included), or not an object.
        ErrorAnswer: 415, a body sent with another ``Content-Type`` than JSON.
        web.HTTPRequestTimeout: the body did not arrive within the body timeout.
    """
    if not request.body_exists:
        raise BadRequest("the body must be a JSON object; it is empty")
    # A form or a text body is not read as JSON on a guess: the client said what it sent.
    if request.content_type != "application/json":
        sent = request.headers.get("Content-Type")
        raise ErrorAnswer(
            415,
            "the body must be sent as application/json, "
            + ("without a Content-Type" if sent is None else f"not {sent!r}"),
            hint="send the header 'Content-Type: application/json'",
        )
    raw = await read_bytes(request)
    if not raw.strip():
        raise BadRequest("the body must be a JSON object; it is empty")
    data = _parse(raw)
    if not isinstance(data, dict):
        raise BadRequest(f"the body must be a JSON object, got {type(data).__name__}")
    return data


#: Body members read as filters (:mod:`parrot_parents.stores.filters`).
_FILTERS = ("filter", "scope")


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
    # A filter or a scope names where its NUL is in the filter language's own words, as
    # it does from Python and the CLI (the language refuses NUL in every key and value).
    checked = (
        {k: v for k, v in data.items() if k not in _FILTERS} if isinstance(data, dict) else data
    )
    where = find_nul(checked)
    if where is not None:
        raise BadRequest(
            f"invalid body: {where}: must not contain NUL characters",
            [{"key": where, "message": "must not contain NUL characters"}],
        )
    return data
