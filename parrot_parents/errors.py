"""Exception hierarchy of parrot-parents.

Every error raised on purpose by the package derives from :class:`ParrotParentsError`.
Client mistakes also derive from the matching built-in (``ValueError``,
``FileNotFoundError``) so that generic callers still catch them.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BotConfigError",
    "BotNotFoundError",
    "CollectionNotFoundError",
    "ConfigurationError",
    "DocumentReadError",
    "LLMError",
    "LLMNotConfiguredError",
    "LexicalIndexMissingError",
    "ModelLoadError",
    "ModelMismatchError",
    "NamedProblem",
    "ParrotParentsError",
    "SchemaMismatchError",
    "StoreError",
    "problem_text",
]


class ParrotParentsError(Exception):
    """Base class of every error raised by parrot-parents.

    ``hint`` optionally says how to fix the problem; it is appended to ``str(err)``.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")


class ConfigurationError(ParrotParentsError, ValueError):
    """A parameter, identifier or configuration value is invalid."""


class SchemaMismatchError(ParrotParentsError):
    """An existing table does not have the schema the store expects.

    Attributes:
        expected_dimension: the embedding dimension of the configured model.
        actual_dimension: the dimension of the ``embedding`` column in the table.
    """

    def __init__(
        self,
        message: str,
        *,
        expected_dimension: int | None = None,
        actual_dimension: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.expected_dimension = expected_dimension
        self.actual_dimension = actual_dimension
        super().__init__(message, hint=hint)


class ModelMismatchError(SchemaMismatchError):
    """A collection's vectors were made by another embedding model than the one that
    would embed now, or by two (an unfinished re-embed); see
    :mod:`parrot_parents.stores.postgres.collections.model_contract`.

    Attributes:
        recorded: the collection's model, described (name, fingerprint, dimension).
        actual: the model that would embed, described alike.
    """

    def __init__(self, message: str, *, recorded: str, actual: str, **kwargs: Any) -> None:
        """The keyword arguments of :class:`SchemaMismatchError` pass through."""
        self.recorded = recorded
        self.actual = actual
        super().__init__(message, **kwargs)


class StoreError(ParrotParentsError):
    """The database could not be reached or refused an operation.

    Attributes:
        sqlstate: the PostgreSQL SQLSTATE code of the failure (e.g. ``"22021"``), or None
            when there is none (the server could not be reached at all).
        unavailable: True when the server could not be reached or went away (an outage,
            worth retrying later: HTTP 503), False when it refused the operation.
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        sqlstate: str | None = None,
        unavailable: bool = False,
    ) -> None:
        self.sqlstate = sqlstate
        self.unavailable = unavailable
        super().__init__(message, hint=hint)


class CollectionNotFoundError(StoreError, LookupError):
    """A read, delete or drop named a collection that does not exist (reads never create
    one; the first write does), or the collection was dropped under a store that had it
    open (``sqlstate`` ``"42P01"``). Not an outage: ``unavailable`` is False."""


class LexicalIndexMissingError(StoreError):
    """Lexical or hybrid search on a collection that has no lexical index yet."""


class DocumentReadError(ParrotParentsError, ValueError):
    """A source file could not be read as text (bad encoding, NUL bytes, missing)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot read {path!r}: {reason}")


class ModelLoadError(ParrotParentsError, ValueError):
    """A model could not be loaded, or is not of a supported shape."""


class NamedProblem(str):
    """A problem message that names its key itself (an option's, in the words of
    :class:`~parrot_parents.retrieval.options.RetrievalOptions`, e.g. ``limit must be a
    positive int (at most 100), got 0``): shown alone, never after ``key:``."""

    __slots__ = ()


def problem_text(key: str, message: str) -> str:
    """One ``(key, message)`` problem as a line: ``key: message``, or the message alone
    when the key is empty or the message names it (:class:`NamedProblem`)."""
    return message if not key or isinstance(message, NamedProblem) else f"{key}: {message}"


class BotConfigError(ConfigurationError):
    """A bot's configuration (a row of the ``bots`` table, or a write to it) is invalid.

    Attributes:
        bot: the bot's name (``None`` when the name itself is missing).
        problems: ``[(key, message), ...]``; ``key`` is dotted, e.g.
            ``"reranker_config.batch_size"``.
    """

    def __init__(
        self,
        bot: str | None,
        problems: list[tuple[str, str]],
        *,
        hint: str | None = None,
    ) -> None:
        self.bot = bot
        self.problems = list(problems)
        who = "bot" if bot is None else f"bot {bot!r}"
        detail = "; ".join(problem_text(key, msg) for key, msg in self.problems)
        super().__init__(f"{who}: {detail}", hint=hint)


class BotNotFoundError(ParrotParentsError, LookupError):
    """No bot of that name exists (or it is disabled)."""

    def __init__(self, name: str, *, hint: str | None = None) -> None:
        self.name = name
        super().__init__(f"no bot named {name!r}", hint=hint)


class LLMError(ParrotParentsError):
    """The LLM endpoint failed or answered something that is not a chat completion.

    Attributes:
        status: the HTTP status of the endpoint's answer, when there was one.
    """

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None):
        self.status = status
        super().__init__(message, hint=hint)


class LLMNotConfiguredError(ParrotParentsError):
    """``ask`` was called but no LLM endpoint is configured."""
