"""``ask`` refuses a bad question at once, with the words of the HTTP service: before the
model loads, before the database is reached, before the model or database stacks are even
imported (checked on ``sys.modules`` in a fresh interpreter, as in test_light_imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.cli.test_light_imports import HEAVY, PROBE

#: A server that is not there: reaching for it would be another error.
NOWHERE = "postgresql://postgres@127.0.0.1:9/none"


def _ask(question: bytes, *flags: str) -> tuple[dict[str, object], str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), "ask", question, *flags],
        capture_output=True,
        timeout=60,
        env={**os.environ, "PARROT_PARENTS_DSN": NOWHERE},
    )
    lines = out.stderr.decode("utf-8", "replace").strip().splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1])


@pytest.mark.parametrize(
    ("question", "words"),
    [
        (b"", "question: must not be empty"),
        (b"   ", "question: must not be blank"),
        (b"pay \xff day", "question: must not contain lone surrogates"),  # not UTF-8
        (b"x" * 4001, "question: must be at most 4000 characters, got 4001"),
    ],
    ids=["empty", "blank", "not-utf8", "too-long"],
)
@pytest.mark.parametrize("where", [(), ("--server", "http://127.0.0.1:9", "--bot", "hr")])
def test_a_bad_question_is_refused_before_anything_loads(
    question: bytes, words: str, where: tuple[str, ...]
) -> None:
    result, said = _ask(question, *where)
    assert result == {"code": 2, "heavy": []}, said
    assert said.startswith(f"parrot-parents: error: {words}"), said
