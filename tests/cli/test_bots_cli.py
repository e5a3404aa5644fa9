"""``parrot-parents bots``: manage rows without SQL, validated exactly as the API does."""

from __future__ import annotations

import asyncio
import json

import pytest

from parrot_parents.bots.repository import BotRepository
from parrot_parents.cli.main import main
from parrot_parents.errors import BotConfigError
from tests.migrations.support import (  # noqa: F401
    COLLECTION,
    bots_dsn_fixture,
    empty_dsn_fixture,
    in_thread,
    template_dsn_fixture,
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_add_list_show_set_remove(bots_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    dsn = ["--dsn", bots_dsn]
    code, out, _ = run(
        capsys,
        "bots",
        "add",
        "hr",
        "--collection",
        COLLECTION,
        "--description",
        "HR handbook",
        "--limit",
        "5",
        *dsn,
    )
    assert (code, out) == (0, "added bot 'hr' on collection 'handbook'\n")

    code, out, _ = run(capsys, "bots", "list", *dsn)
    lines = out.splitlines()
    header = "NAME COLLECTION EXPAND MODE LIMIT BUDGET RERANKER SCOPE STATUS"
    assert lines[0].split() == header.split()
    assert lines[1].split() == ["hr", "handbook", "no", "parent", "5", "-", "-", "-", "valid"]

    code, out, _ = run(
        capsys,
        "bots",
        "set",
        "hr",
        "expand_to_parent=true",
        "context_budget=2000",
        "expansion_mode=window:2",
        *dsn,
    )
    assert code == 0
    assert out.splitlines() == [
        "hr: context_budget: None -> 2000",
        "hr: expand_to_parent: False -> True",
        "hr: expansion_mode: 'parent' -> 'window:2'",
    ]
    code, out, _ = run(capsys, "bots", "show", "hr", *dsn)
    shown = json.loads(out)
    assert shown["expand_to_parent"] is True and shown["status"] == "valid"
    assert shown["description"] == "HR handbook"

    code, out, _ = run(capsys, "bots", "set", "hr", "expand_to_parent=true", *dsn)
    assert out == "hr: no change\n"

    code, out, _ = run(capsys, "bots", "remove", "hr", *dsn)
    assert (code, out) == (0, "removed bot 'hr'\n")
    code, out, _ = run(capsys, "bots", "list", *dsn)
    assert out.startswith("no bots")


def test_a_bad_value_is_refused_with_the_api_message(
    bots_dsn: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dsn = ["--dsn", bots_dsn]
    run(capsys, "bots", "add", "hr", "--collection", COLLECTION, *dsn)
    code, _, err = run(
        capsys,
        "bots",
        "set",
        "hr",
        "context_search_limit=five",
        "reranker_config.batch_size=8",
        *dsn,
    )
    assert code == 2
    assert err == (
        "parrot-parents: error: bot 'hr': context_search_limit must be a positive int (at "
        "most 100), got \"five\"; reranker_config.type: missing 'type'; known types: "
        "['cross_encoder']\n"
    )

    async def through_the_api() -> str:
        async with BotRepository(bots_dsn) as repo:
            try:
                await repo.update(
                    "hr", {"context_search_limit": "five", "reranker_config.batch_size": 8}
                )
            except BotConfigError as exc:
                return str(exc)
        return ""

    assert err.removeprefix("parrot-parents: error: ").rstrip("\n") == in_thread(
        asyncio.run, through_the_api()
    )
    # Nothing was written: the limit is still unset (the package default), as `bots add`
    # without --limit left it.
    code, out, _ = run(capsys, "bots", "show", "hr", *dsn)
    assert json.loads(out)["context_search_limit"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["bots", "add", "x", "--collection", COLLECTION, "--limit", "0"],
            "bot 'x': context_search_limit must be a positive int (at most 100), got 0",
        ),
        (
            ["bots", "add", "x", "--collection", COLLECTION, "--expansion-mode", "window:0"],
            "bot 'x': expansion_mode \"window:0\": the window size N must be >= 1",
        ),
        (
            [
                "bots",
                "add",
                "x",
                "--collection",
                COLLECTION,
                "--reranker-config",
                '{"type": "importlib:import_module"}',
            ],
            "bot 'x': reranker_config.type: unknown reranker type 'importlib:import_module'",
        ),
        (
            [
                "bots",
                "add",
                "x",
                "--collection",
                COLLECTION,
                "--expand-to-parent",
                "--parent-searcher-config",
                "none",
            ],
            "bot 'x': expand_to_parent: true needs a parent_searcher_config",
        ),
        (["bots", "set", "nobody", "enabled=false"], "no bot named 'nobody'"),
        (["bots", "remove", "nobody"], "no bot named 'nobody'"),
        (["bots", "set", "x", "enabled"], "expected key=value, got 'enabled'"),
    ],
)
def test_errors(
    bots_dsn: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    code, _, err = run(capsys, *argv, "--dsn", bots_dsn)
    assert code == 2
    assert err.startswith(f"parrot-parents: error: {message}")


def test_duplicate_names_are_refused(bots_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "bots", "add", "hr", "--collection", COLLECTION, "--dsn", bots_dsn)
    code, _, err = run(capsys, "bots", "add", "hr", "--collection", COLLECTION, "--dsn", bots_dsn)
    assert code == 2 and "bot 'hr': name: a bot with this name already exists" in err


def test_a_missing_collection_is_refused_unless_forced(
    bots_dsn: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dsn = ["--dsn", bots_dsn]
    code, out, err = run(capsys, "bots", "add", "later", "--collection", "not_yet", *dsn)
    assert (code, out) == (2, "")
    assert err.startswith("parrot-parents: error: collection 'not_yet' does not exist")
    _, out, _ = run(capsys, "bots", "list", *dsn)
    assert out.startswith("no bots")

    code, out, err = run(capsys, "bots", "add", "later", "--collection", "not_yet", "--force", *dsn)
    assert code == 0 and out == "added bot 'later' on collection 'not_yet'\n"
    assert err.startswith("warning: collection 'not_yet' does not exist yet")
    _, out, _ = run(capsys, "bots", "list", *dsn)
    assert out.splitlines()[1].endswith("valid (collection missing: will not load)")

    run(capsys, "bots", "add", "hr", "--collection", COLLECTION, *dsn)
    code, out, err = run(capsys, "bots", "set", "hr", "collection=missing", *dsn)
    assert (code, out) == (2, "")
    assert err.startswith("parrot-parents: error: collection 'missing' does not exist")
    _, out, _ = run(capsys, "bots", "show", "hr", *dsn)
    assert json.loads(out)["collection"] == COLLECTION
    code, out, err = run(capsys, "bots", "set", "hr", "collection=missing", "--force", *dsn)
    assert code == 0 and out == "hr: collection: 'handbook' -> 'missing'\n"
    assert err.startswith("warning: collection 'missing' does not exist yet")


def test_invalid_json_option_is_an_argument_error(
    bots_dsn: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(
            [
                "bots",
                "add",
                "x",
                "--collection",
                COLLECTION,
                "--reranker-config",
                "{nope",
                "--dsn",
                bots_dsn,
            ]
        )
    assert info.value.code == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_list_flags_rows_written_with_plain_sql(
    bots_dsn: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def insert() -> None:
        async with BotRepository(bots_dsn) as repo:
            from sqlalchemy import text

            engine = await repo.engine()
            async with engine.begin() as conn:
                await conn.execute(
                    text(
                        "INSERT INTO bots (name, collection, reranker_config) VALUES"
                        " ('raw', 'handbook', '{\"type\": \"cross_encoder\", \"size\": 1}')"
                    )
                )

    in_thread(asyncio.run, insert())
    _code, out, _ = run(capsys, "bots", "list", "--json", "--dsn", bots_dsn)
    (row,) = json.loads(out)
    assert row["status"].startswith("invalid: reranker_config.size: unknown key")


def test_without_migrations_the_error_says_what_to_run(
    empty_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "bots", "list", "--dsn", empty_dsn)
    assert code == 2
    assert err == (
        "parrot-parents: error: the bots table does not exist (run `parrot-parents migrate`)\n"
    )


def test_a_scope_is_set_shown_changed_and_refused_when_bad(
    bots_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = ["--dsn", bots_dsn]
    code, _, err = run(
        capsys, "bots", "add", "hr", "--collection", COLLECTION, "--scope", '{"tenant": "a"}', *dsn
    )
    assert code == 0, err
    code, out, _ = run(capsys, "bots", "show", "hr", *dsn)
    assert json.loads(out)["scope"] == {"tenant": "a"}
    code, out, _ = run(capsys, "bots", "set", "hr", "--scope", '{"tenant": {"$in": ["a"]}}', *dsn)
    assert code == 0 and "scope:" in out
    # The scope is refused before anything is written, with the filter's own words.
    code, _, err = run(capsys, "bots", "set", "hr", "--scope", '{"tenant": {"$regex": "a"}}', *dsn)
    assert code == 2 and err.startswith("parrot-parents: error: bot 'hr': scope:")
    assert "$regex" in err
    code, out, _ = run(capsys, "bots", "show", "hr", *dsn)
    assert json.loads(out)["scope"] == {"tenant": {"$in": ["a"]}}
    # One value per key: a flag and an assignment of the same key are refused.
    for twice in (["--scope", '{"a": 1}', 'scope={"b": 2}'], ["limit=2", "limit=3"]):
        code, _, err = run(capsys, "bots", "set", "hr", *twice, *dsn)
        assert code == 2 and "given twice" in err
    # Assignments may follow the flag, as they follow the name.
    code, out, err = run(
        capsys, "bots", "set", "hr", "--scope", '{"tenant": "b"}', "description=scoped", *dsn
    )
    assert code == 0, err
    shown = json.loads(run(capsys, "bots", "show", "hr", *dsn)[1])
    assert shown["scope"] == {"tenant": "b"} and shown["description"] == "scoped"
    code, out, _ = run(capsys, "bots", "set", "hr", "--scope", "none", *dsn)
    assert code == 0
    code, out, _ = run(capsys, "bots", "show", "hr", *dsn)
    assert json.loads(out)["scope"] is None
    code, _, err = run(capsys, "bots", "set", "hr", *dsn)
    assert code == 2 and "nothing to change" in err
