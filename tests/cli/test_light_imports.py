"""``--help`` and argument errors never import the model or database stacks.

Checked on ``sys.modules`` in a fresh interpreter, not with a clock: the machine is noisy,
the import list is not. ``benchmarks/`` reports the wall times.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "transformers", "sentence_transformers", "sqlalchemy", "asyncpg", "aiohttp")
COMMANDS = [
    "",
    "ingest",
    "ask",
    "eval",
    "compare",
    "plot",
    "migrate",
    "bots",
    "serve",
    "backfill",
    "reindex",
    "show",
]

PROBE = """
import json, sys
from parrot_parents.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = [m for m in {heavy!r} if m in sys.modules]
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def _run(*argv: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return json.loads(out.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("command", COMMANDS)
def test_help_imports_nothing_heavy(command: str) -> None:
    result = _run(*([command] if command else []), "--help")
    assert result == {"code": 0, "heavy": []}


def test_an_argument_error_imports_nothing_heavy() -> None:
    result = _run("ask")  # the question is missing
    assert result == {"code": 2, "heavy": []}
    result = _run("eval", "--budgets", "many")
    assert result["code"] == 2 and result["heavy"] == []


def test_ask_server_imports_nothing_heavy() -> None:
    # A server that is not there: the whole --server path runs, up to the request.
    result = _run("ask", "pay day?", "--server", "http://127.0.0.1:9", "--bot", "hr")
    assert result == {"code": 2, "heavy": []}


def test_compare_imports_nothing_heavy(tmp_path: Path) -> None:
    # Scoring two run files needs the CSV and numpy: no model, no database driver.
    questions = tmp_path / "q.csv"
    refs = json.dumps([{"start_index": 0, "end_index": 10}]).replace('"', '""')
    questions.write_text(f'question,references,corpus_id\nwhy?,"{refs}",c\n', encoding="utf-8")
    run = tmp_path / "run.jsonl"
    run.write_text('{"qid": 0, "passages": [{"corpus_id": "c", "start": 0, "end": 5}]}\n')
    result = _run("compare", str(run), str(run), "--questions", str(questions), "--json")
    assert result == {"code": 0, "heavy": []}
