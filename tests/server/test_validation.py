"""Malformed bodies get a 400 that says what is wrong; nothing internal leaks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from parrot_parents.bots.manager import BotManager
from parrot_parents.cli.main import main
from parrot_parents.errors import ConfigurationError
from parrot_parents.retrieval.options import RetrievalOptions
from tests.server.conftest import MakeClient

URL = "/api/v1/bots/hr/context"
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "the body must be a JSON object; it is empty"),
        (b"{", "the body is not valid JSON: Expecting property name enclosed in double quotes"),
        (b"\xff\xfe", "the body is not UTF-8 text"),
        (b'["When are salaries paid?"]', "the body must be a JSON object, got list"),
        (b'"hi"', "the body must be a JSON object, got str"),
    ],
)
async def test_not_a_json_object(make_client: MakeClient, body: bytes, message: str) -> None:
    client = await make_client()
    resp = await client.post(URL, data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400
    assert (await resp.json())["error"].startswith(message)


@pytest.mark.parametrize(
    ("body", "key", "message"),
    [
        ({}, "question", "required key is missing"),
        ({"question": ""}, "question", "must not be empty"),
        ({"question": "   "}, "question", "must not be blank"),
        ({"question": "x" * 4001}, "question", "must be at most 4000 characters, got 4001"),
        ({"question": "pay \ud800"}, "question", "must not contain lone surrogates"),
        ({"question": "pay\x00day"}, "question", "must not contain NUL characters"),
        # A filter's NUL in the words Python and the CLI give it.
        ({"question": "q", "filter": {"t": "a\x00"}}, "filter", "filter['t'] contains a NUL"),
        (
            {"question": "q", "filter": {"t": {"$in": ["b", "a\x00"]}}},
            "filter",
            "contains a NUL character",
        ),
        ({"question": "q", "filter": {"t\x00": 1}}, "filter", "contains a NUL character"),
        ({"question": 42}, "question", "Input should be a valid string, got 42"),
        # The words of RetrievalOptions (every surface's), the value echoed as JSON.
        (
            {"question": "q", "limit": "5"},
            "limit",
            'limit must be a positive int (at most 100), got "5"',
        ),
        (
            {"question": "q", "limit": 5.5},
            "limit",
            "limit must be a positive int (at most 100), got 5.5",
        ),
        (
            {"question": "q", "limit": 0},
            "limit",
            "limit must be a positive int (at most 100), got 0",
        ),
        (
            {"question": "q", "limit": 101},
            "limit",
            "limit must be a positive int (at most 100), got 101",
        ),
        ({"question": "q", "expand_to_parent": "yes"}, "expand_to_parent", "valid boolean"),
        ({"question": "q", "prf": "yes"}, "prf", "valid boolean"),
        (
            {"question": "q", "budget": -3},
            "budget",
            "budget must be a positive int (at most 10,000,000), got -3",
        ),
        ({"question": "q", "mode": "window:0"}, "mode", "the window size N must be >= 1"),
        ({"question": "q", "mode": "sideways"}, "mode", "must be 'parent', 'auto_merge:T'"),
        ({"question": "q", "filter": ["a"]}, "filter", "Input should be a valid dictionary"),
        # The store's words, not one line per member of the value's type union.
        (
            {"question": "q", "filter": {"a": {"b": 1}}},
            "filter",
            "filter['a']: an object value must hold operators such as {'$gte': 2022}, got key 'b'",
        ),
        ({"question": "q", "top_k": 3}, "top_k", "unknown key (known keys: budget, "),
    ],
)
async def test_invalid_fields(
    make_client: MakeClient, body: dict[str, Any], key: str, message: str
) -> None:
    client = await make_client()
    resp = await client.post(URL, json=body)
    assert resp.status == 400
    data = await resp.json()
    assert data["error"].startswith("invalid body: ")
    detail = next(d for d in data["details"] if d["key"] == key)
    assert message in detail["message"]


async def test_every_bad_field_is_listed(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.post(URL, json={"question": 1, "limit": "x", "extra": True})
    assert [d["key"] for d in (await resp.json())["details"]] == ["question", "limit", "extra"]


async def test_a_body_over_the_limit_is_refused(make_client: MakeClient) -> None:
    client = await make_client(max_body_bytes=1024)
    resp = await client.post(URL, json={"question": "x" * 2000})
    assert resp.status == 413
    assert (await resp.json())["error"] == "the body is larger than the limit of 1024 bytes"


async def test_the_default_limit_is_64_kib(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.post(URL, data=b"{" + b" " * 70_000 + b"}", headers=JSON)
    assert resp.status == 413


async def test_errors_carry_no_internals(make_client: MakeClient) -> None:
    client = await make_client()
    bodies = [b"{", b"[]", b'{"question": 1}', b'{"question": "q", "limit": -1}']
    for body in bodies:
        text = await (await client.post(URL, data=body, headers=JSON)).text()
        for leak in ("Traceback", 'File "', "SELECT", "pydantic", "sqlalchemy"):
            assert leak not in text


@pytest.mark.parametrize("question", ["", "   ", "x" * 5000, "pay \ud800", "pay\x00day"])
async def test_a_bad_question_has_the_same_words_as_in_python(
    make_client: MakeClient, question: str
) -> None:
    # Word for word: HTTP added ", got '<the question>'" after the shared words once.
    from parrot_parents.stores.questions import question_problem

    client = await make_client()
    resp = await client.post(URL, json={"question": question})
    assert resp.status == 400
    detail = next(d for d in (await resp.json())["details"] if d["key"] == "question")
    assert detail["message"] == question_problem(question)


_BAD_VALUES = [
    ("limit", 0, ["--limit", "0"]),
    ("limit", 101, None),
    ("budget", 0, ["--budget", "0"]),
    ("rerank_candidates", 0, None),
    ("rrf_k", 0, ["--rrf-k", "0"]),
    ("dense_weight", -1.5, ["--dense-weight", "-1.5"]),
    ("lexical_weight", 11.0, None),
    ("mode", "window:0", ["--mode", "window:0"]),
    ("filter", {"year": {"gte": 1}}, ["--filter", '{"year": {"gte": 1}}']),
    ("filter", {"draft": {"$in": True}}, None),
]


@pytest.mark.parametrize(("option", "value", "argv"), _BAD_VALUES)
async def test_a_bad_option_reads_the_same_on_every_surface(
    make_client: MakeClient,
    manager: BotManager,
    option: str,
    value: Any,
    argv: list[str] | None,
) -> None:
    with pytest.raises(ConfigurationError) as python:
        RetrievalOptions.from_overrides({option: value})
    words = python.value.message
    with pytest.raises(ConfigurationError) as bot:
        await manager.get("hr").retrieve("When are salaries paid?", **{option: value})
    assert bot.value.message == words
    # HTTP says the same, once, with a value echoed as JSON (never a Python literal).
    over_http = words.replace(repr(value), json.dumps(value))
    client = await make_client()
    resp = await client.post(URL, json={"question": "q", option: value})
    assert resp.status == 400
    data = await resp.json()
    assert data["error"] == f"invalid body: {over_http}"
    assert data["details"] == [{"key": option, "message": over_http}]


@pytest.mark.parametrize(("option", "value", "argv"), [c for c in _BAD_VALUES if c[2]])
def test_a_bad_option_reads_the_same_in_the_cli(
    capsys: pytest.CaptureFixture[str], option: str, value: Any, argv: list[str]
) -> None:
    with pytest.raises(ConfigurationError) as python:
        RetrievalOptions.from_overrides({option: value})
    assert main(["ask", "When are salaries paid?", *argv]) == 2
    assert capsys.readouterr().err == f"parrot-parents: error: {python.value.message}\n"


async def test_http_echoes_json_values_as_json(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.post(URL, json={"question": "q", "limit": True, "rrf_k": "5"})
    messages = [d["message"] for d in (await resp.json())["details"]]
    assert messages == [
        "limit must be a positive int (at most 100), got true",
        'rrf_k: Input should be a valid integer, got "5"',
    ]
