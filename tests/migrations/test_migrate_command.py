"""``parrot-parents migrate``."""

from __future__ import annotations

import pytest

from parrot_parents import migrations
from parrot_parents.cli.main import main


def test_migrate_up_current_history_and_down(
    empty_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = ["--dsn", empty_dsn]
    (head,) = migrations.heads()
    assert main(["migrate", "--current", *dsn]) == 0
    assert capsys.readouterr().out == "none (not migrated)\n"

    assert main(["migrate", "--collection", "docs", *dsn]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(f": upgraded from none to {head}")
    assert out[1] == "created collection 'docs' (vector(384))"

    assert main(["migrate", *dsn]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f": already at {head}")

    assert main(["migrate", "--history"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("0001  Collections")

    assert main(["migrate", "--downgrade", "base", "--collection", "docs", *dsn]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"from {head} to base")
    assert main(["migrate", "--current", *dsn]) == 0
    assert capsys.readouterr().out == "none (not migrated)\n"


def test_migrate_refuses_bad_names(empty_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--collection", "bad name", "--dsn", empty_dsn]) == 2
    assert "invalid collection name 'bad name'" in capsys.readouterr().err
