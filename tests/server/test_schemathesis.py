"""Schemathesis against a served instance: every operation of the shipped description,
with its default checks, must hold.

The server runs for real on 127.0.0.1 (a random port) in a thread of its own, over a copy
of the bots template with the example corpus (examples/corpus) ingested as ``example``,
two bots on it and a local chat-completions server behind ``/ask``; each operation is
called with the token. Examples are few and drawn deterministically, so the test is the
same on every run and stays within about a minute.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    positive_data_acceptance,
)

from parrot_parents.bots.manager import BotManager
from parrot_parents.bots.repository import BotRepository
from parrot_parents.llm.client import ChatCompletionsClient, LLMSettings
from parrot_parents.server.app import create_app
from parrot_parents.server.protocol import make_runner
from tests.conftest import REPO_ROOT
from tests.llm.conftest import ChatServer
from tests.migrations.support import example_database
from tests.server.conftest import AUTH, TOKEN

SPEC = REPO_ROOT / "parrot_parents" / "server" / "openapi.json"
#: schemathesis' own list of the statuses that reject invalid data, plus 413: a body
#: over the size limit (documented) is refused before its content is looked at, which
#: is how a schema-violating array of 1,001 ids is refused.
_REJECTIONS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428"]
CONFIG = schemathesis.Config.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": [*_REJECTIONS, "429", "5xx"]}}}
)


def _with_examples(spec: dict[str, Any]) -> dict[str, Any]:
    """The shipped description, with the served bots as the examples of the read routes'
    ``name`` (drawn names name no bot: only examples reach a retrieval)."""
    for path, item in spec["paths"].items():
        if path.startswith("/api/v1/bots/{name}/"):
            for parameter in item.get("parameters", []):
                if parameter["name"] == "name":
                    parameter["example"] = "example_parents"
    return spec


schema = schemathesis.openapi.from_dict(
    _with_examples(json.loads(SPEC.read_text(encoding="utf-8"))), config=CONFIG
)


async def _listen(runner: web.AppRunner) -> str:
    """Start ``runner`` on a free port of 127.0.0.1; its base URL."""
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return f"http://127.0.0.1:{runner.addresses[0][1]}"


class Served:
    """The service on a loop of its own thread, so that schemathesis' blocking client
    and the server never wait on each other."""

    def __init__(self, dsn: str, embeddings: Any) -> None:
        self.dsn = dsn
        self.embeddings = embeddings
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.base_url = ""

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    async def _start(self) -> None:
        async with BotRepository(self.dsn) as repo:
            await repo.create({"name": "example", "collection": "example"})
            await repo.create(
                {"name": "example_parents", "collection": "example", "expand_to_parent": True}
            )
        chat = ChatServer()
        chat_app = web.Application()
        chat_app.router.add_post("/v1/chat/completions", chat.handle)
        self.chat_runner = web.AppRunner(chat_app)
        chat_url = await _listen(self.chat_runner)
        self.manager = BotManager(self.dsn, embedding=self.embeddings)
        await self.manager.load()
        llm = ChatCompletionsClient(
            LLMSettings(base_url=f"{chat_url}/v1", model="tiny-chat", timeout_s=5)
        )
        app = create_app(self.manager, token=TOKEN, llm=llm, close_on_cleanup=True)
        self.runner = make_runner(app)
        self.base_url = await _listen(self.runner)

    async def _stop(self) -> None:
        await self.runner.cleanup()
        await self.chat_runner.cleanup()

    def __enter__(self) -> Served:
        self.thread.start()
        self.run(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.run(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
            self.loop.close()


@pytest.fixture(scope="module")
def served(pg_dsn: str, template_dsn: str, embeddings: Any) -> Iterator[Served]:
    with (
        example_database(pg_dsn, template_dsn, embeddings) as dsn,
        Served(dsn, embeddings) as server,
    ):
        yield server


@schema.parametrize()
@settings(
    max_examples=8,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_holds_to_the_description(case: Any, served: Served) -> None:
    case.call_and_validate(
        base_url=served.base_url, headers=AUTH, excluded_checks=_false_positives(case)
    )


#: Body keys whose values a JSON Schema cannot describe: a filter or a scope is checked
#: by the filter language, a reranker or parent-searcher config by the type it names
#: (from the plugins installed). The service answers 400 naming the key.
_FREE_FORM = {"filter", "scope", "reranker_config", "parent_searcher_config"}


def _false_positives(case: Any) -> list[Any]:
    """The checks that cannot hold for ``case``, each for a reason of the description's
    language, not of the service."""
    excluded = []
    body = case.body if isinstance(case.body, dict) else {}
    if (
        any(body.get(k) is not None for k in _FREE_FORM)
        or any("." in k for k in body)
        # A PATCH is validated with the row it changes: expansion on a row without a
        # parent searcher is refused, and the body alone cannot say whether it has one.
        or (case.method == "PATCH" and {"expand_to_parent", "parent_searcher_config"} & set(body))
        or _integral_float(body)
    ):
        # Schema-valid is not valid here, for a reason JSON Schema cannot state (see
        # _FREE_FORM: a dotted key sets one key of a config; _integral_float). Every other
        # body is still held to positive_data_acceptance.
        excluded.append(positive_data_acceptance)
    if case.path == "/api/v1/collections/{collection}/documents/delete":
        # This path is also DELETE .../documents/{document_id} for the document whose id
        # is "delete", so the server rightly lists DELETE in its Allow header; the check
        # matches the literal path only.
        excluded.append(allow_header_conformance)
    return excluded


def _integral_float(value: Any) -> bool:
    """Whether ``value`` holds a float with no fraction, such as ``8.0``: JSON Schema calls
    it an integer, the service (strict, as documented) does not; it answers 400."""
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(_integral_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_integral_float(v) for v in value)
    return False


def test_each_operation_is_a_test_of_its_own(request: pytest.FixtureRequest) -> None:
    """Every operation of the description is collected under a node id of its own, so that
    a parallel run (pytest-xdist hands tests out by id) runs each of them."""
    items = [
        item
        for item in request.session.items
        if item.name.startswith("test_every_operation_holds_to_the_description[")
    ]
    if not items:
        pytest.skip("the operations are not collected in this run (-k, or a node id)")
    assert len({item.nodeid for item in items}) == len(items), sorted(i.nodeid for i in items)
    assert all(item.nodeid.endswith(f"::{item.name}") for item in items)
