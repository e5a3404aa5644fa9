"""A folder ingested on the server's machine reaches no caller with that machine's paths:
each row's ``source`` is the file's path under the folder ingested, on every surface."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.bots.manager import BotManager
from parrot_parents.bots.repository import BotRepository
from parrot_parents.cli.main import main
from parrot_parents.server.app import create_app
from tests.migrations.support import in_thread
from tests.server.conftest import AUTH, TOKEN


def test_sources_are_relative_to_the_folder_ingested(
    bots_dsn: str, tmp_path: Path, embeddings: Any, capsys: Any
) -> None:
    folder = tmp_path / "handbooks"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "pay.md").write_text(
        "# Pay\n\nSalaries are paid monthly, on the last working day of each month.\n"
    )
    (folder / "leave.txt").write_text("Every employee has twenty-five days of paid leave.")
    assert main(["ingest", str(folder), "--dsn", bots_dsn, "--collection", "files"]) == 0
    capsys.readouterr()
    in_thread(asyncio.run, _read_back(bots_dsn, str(tmp_path), embeddings))


async def _read_back(bots_dsn: str, local: str, embeddings: Any) -> None:
    async with BotRepository(bots_dsn) as repo:
        await repo.create({"name": "files", "collection": "files", "expand_to_parent": True})

    bot = await Chatbot.from_database("files", dsn=bots_dsn, embedding=embeddings)
    try:
        retrieval = await bot.retrieve("When are salaries paid?")
        sources = {p.source for p in retrieval.passages}
        assert "handbooks/hr/pay.md" in sources
        assert local not in retrieval.context + json.dumps(retrieval.meta.to_dict())
    finally:
        await bot.close()

    async with BotManager(bots_dsn, embedding=embeddings) as manager:
        client = TestClient(TestServer(create_app(manager, token=TOKEN)))
        await client.start_server()
        response = await client.post(
            "/api/v1/bots/files/context",
            json={"question": "When are salaries paid?"},
            headers=AUTH,
        )
        body = await response.text()
        assert response.status == 200, body
        assert "handbooks/hr/pay.md" in body
        assert local not in body
        listed = await client.get("/api/v1/collections/files/documents", headers=AUTH)
        text = await listed.text()
        assert "handbooks/leave.txt" in text and local not in text
        await client.close()


@pytest.mark.parametrize("how", ["file", "root"])
def test_a_file_named_directly_or_under_a_root_is_named_relative_to_it(
    tmp_path: Path, how: str
) -> None:
    from parrot_parents.loaders.text import TextLoader

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "x.md").write_text("text")
    if how == "file":
        loader = TextLoader(tmp_path / "a" / "b" / "x.md")
        expected = "x.md"
    else:
        loader = TextLoader(tmp_path / "a" / "b", root=tmp_path / "a")
        expected = "b/x.md"
    (doc,) = loader.load()
    assert doc.metadata["source"] == expected


def test_a_local_models_path_is_shown_by_its_folders_name(
    bots_dsn: str, tmp_path: Path, capsys: Any
) -> None:
    from parrot_parents.embeddings.sentence_transformer import default_model_path

    model = str(default_model_path())  # the bundled model, by its absolute path
    (tmp_path / "note.txt").write_text("Salaries are paid monthly, on the last working day.")
    args = ["--dsn", bots_dsn, "--collection", "by_path", "--model", model]
    assert main(["ingest", str(tmp_path / "note.txt"), *args]) == 0
    capsys.readouterr()
    in_thread(asyncio.run, _collections_listed(bots_dsn, model))


async def _collections_listed(bots_dsn: str, model: str) -> None:
    async with BotManager(bots_dsn) as manager:
        client = TestClient(TestServer(create_app(manager, token=TOKEN)))
        await client.start_server()
        try:
            response = await client.get("/api/v1/collections", headers=AUTH)
            body = await response.json()
            shown = {c["name"]: c["embedding_model"] for c in body["collections"]}
            assert shown["by_path"] == Path(model).name
            assert model not in json.dumps(body)
        finally:
            await client.close()
