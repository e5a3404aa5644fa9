"""The one check of a question (a search's text query), made at the boundary of every
surface (Python API, adapters, CLI, HTTP) before any model loads or any SQL runs.

A question is a ``str`` of 1 to :data:`MAX_QUESTION_CHARS` (4000) characters that is not
blank, holds no NUL (PostgreSQL text cannot store it) and no lone surrogate (U+D800 to
U+DFFF); other control characters are accepted. It lives in the lowest layer that takes a
question, so the store's own searches check it too; ``parrot_parents.retrieval``
re-exports it.
"""

from __future__ import annotations

import re
from typing import Any

from parrot_parents.errors import ConfigurationError

__all__ = ["MAX_QUESTION_CHARS", "check_question", "question_problem"]

#: Longest question accepted, in characters (code points).
MAX_QUESTION_CHARS = 4000

_SURROGATE = re.compile("[\ud800-\udfff]")


def question_problem(question: Any) -> str | None:
    """What is wrong with ``question``, in the words every surface reports, else None.

    The words complete "question: ...", e.g. ``"must not be blank"``. They never quote the
    question (it may be long, or not printable).
    """
    if not isinstance(question, str):
        return f"must be a string, got {type(question).__name__}"
    if not question:
        return "must not be empty"
    if len(question) > MAX_QUESTION_CHARS:
        return f"must be at most {MAX_QUESTION_CHARS} characters, got {len(question)}"
    if "\x00" in question:
        return "must not contain NUL characters"
    if _SURROGATE.search(question) is not None:
        return "must not contain lone surrogates (U+D800 to U+DFFF are not valid Unicode)"
    if not question.strip():
        return "must not be blank"
    return None


def check_question(question: Any) -> str:
    """``question`` when it is a valid question (see the module), unchanged.

    Raises:
        ConfigurationError: ``"question: <problem>"``, with the words of
            :func:`question_problem`; nothing has been loaded or sent at that point.
    """
    problem = question_problem(question)
    if problem is not None:
        raise ConfigurationError(f"question: {problem}")
    return str(question)
