"""A bot's scope cannot be weakened by accident, and one that keeps no row is said out loud."""

from __future__ import annotations

import asyncio
import json

import pytest

from parrot_parents import migrations
from parrot_parents.bots.repository import BotRepository
from parrot_parents.bots.scope_check import ScopeWarning
from parrot_parents.errors import BotConfigError
from tests.cli.test_bots_cli import run
from tests.migrations.support import (  # noqa: F401
    COLLECTION,
    bots_dsn_fixture,
    in_thread,
    template_dsn_fixture,
)


def add(
    capsys: pytest.CaptureFixture[str], dsn: str, name: str, scope: str | None, on: str = COLLECTION
) -> tuple[int, str, str]:
    """``bots add NAME --collection ON [--scope SCOPE]``: its status, stdout and stderr."""
    scoped = [] if scope is None else ["--scope", scope]
    return run(capsys, "bots", "add", name, "--collection", on, *scoped, "--dsn", dsn)


def test_an_empty_scope_is_refused_on_every_write(
    bots_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = ["--dsn", bots_dsn]
    code, _, err = add(capsys, bots_dsn, "hr", "{}")
    assert code == 2 and "empty scope" in err and "--scope none" in err, err
    code, _, err = add(capsys, bots_dsn, "hr", '{"document_id": "pay"}')
    assert code == 0, err
    for change in (["--scope", "{}"], ["scope={}"]):
        code, _, err = run(capsys, "bots", "set", "hr", *change, *dsn)
        assert code == 2 and "bot 'hr': scope: an empty scope" in err, err
    shown = json.loads(run(capsys, "bots", "show", "hr", *dsn)[1])
    assert shown["scope"] == {"document_id": "pay"}
    # Removing the scope stays possible, said by name.
    code, _, err = run(capsys, "bots", "set", "hr", "--scope", "none", *dsn)
    assert code == 0, err

    async def through_the_repository() -> None:
        async with BotRepository(bots_dsn) as repo:
            with pytest.raises(BotConfigError, match="empty scope"):
                await repo.put("hr", {"collection": COLLECTION, "scope": {}})
            with pytest.raises(BotConfigError, match="empty scope"):
                await repo.update("hr", {"scope": {}})

    in_thread(asyncio.run, through_the_repository())


def test_bots_list_shows_each_scope(bots_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    dsn = ["--dsn", bots_dsn]
    scope = '{"document_id": {"$in": ["pay", "leave"]}}'
    add(capsys, bots_dsn, "hr", scope)
    add(capsys, bots_dsn, "all", None)
    _, out, _ = run(capsys, "bots", "list", *dsn)
    lines = out.splitlines()
    assert lines[0].split()[-2:] == ["SCOPE", "STATUS"]
    assert lines[1].split()[-2:] == ["-", "valid"]  # all
    assert lines[2].split()[-2:] == ['{"document_id":{"$in":["pay","leave"]}}', "valid"]  # hr


def test_a_scope_that_keeps_no_row_is_saved_with_a_warning_naming_why(
    bots_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = ["--dsn", bots_dsn]
    code, out, err = add(capsys, bots_dsn, "hr", '{"tennant": "acme"}')
    assert code == 0 and out.startswith("added bot 'hr'")
    assert err.startswith("warning: bot 'hr': scope: ")
    assert "no row of collection 'handbook' carries the key 'tennant'" in err
    assert "the bot will find nothing" in err
    # The value ingest stored is a number: the same digits as a string keep nothing.
    code, _, err = run(capsys, "bots", "set", "hr", "--scope", '{"chunk_index": "1"}', *dsn)
    assert code == 0
    assert 'carries chunk_index = "1" (a string): rows carry chunk_index as a number 1' in err
    code, _, err = run(capsys, "bots", "set", "hr", 'scope={"document_id": "payroll"}', *dsn)
    assert code == 0 and 'carries document_id = "payroll" (rows carry document_id as ' in err
    # Each key keeps rows, but no row carries both.
    both = '{"document_id": "pay", "source": "leave.md"}'
    code, _, err = run(capsys, "bots", "set", "hr", "--scope", both, *dsn)
    assert code == 0 and "carries all of" in err
    code, _, err = run(capsys, "bots", "set", "hr", "--scope", '{"chunk_index": 1}', *dsn)
    assert (code, err) == (0, "")

    # An empty collection: the scope cannot be checked yet, and that is said instead.
    in_thread(migrations.upgrade, bots_dsn, collections=["later"])
    code, _, err = add(capsys, bots_dsn, "new", '{"a": 1}', on="later")
    assert code == 0 and "collection 'later' has no rows yet" in err

    async def through_the_repository() -> None:
        async with BotRepository(bots_dsn) as repo:
            with pytest.warns(ScopeWarning, match="carries the key 'tennant'"):
                await repo.put("py", {"collection": COLLECTION, "scope": {"tennant": "a"}})
            with pytest.warns(ScopeWarning, match="carries the key 'tennant'"):
                await repo.update("hr", {"scope": {"tennant": "a"}})

    in_thread(asyncio.run, through_the_repository())
