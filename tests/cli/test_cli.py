from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from parrot_parents.cli.main import build_parser, main, parse
from tests.conftest import REPO_ROOT, Ingested, unique_table

EXAMPLES = REPO_ROOT / "examples" / "corpus"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m parrot_parents ARGS`` in a fresh process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "parrot_parents", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ingest_then_ask_json_with_and_without_expansion(
    pg_dsn: str, example_corpus: Ingested, capsys: pytest.CaptureFixture[str]
) -> None:
    table = example_corpus.collection
    assert "ingested 5 document(s)" in example_corpus.output
    question = "How will I be paid, and when?"
    base = ["ask", question, "--collection", table, "--dsn", pg_dsn, "--limit", "4", "--json"]
    assert main([*base, "--no-expand"]) == 0
    children = json.loads(capsys.readouterr().out)
    assert main([*base, "--expand"]) == 0
    expanded = json.loads(capsys.readouterr().out)
    assert {p["kind"] for p in children["passages"]} == {"child"}
    assert children["meta"]["expanded"] is False
    assert expanded["meta"]["expanded"] is True
    assert "parent_chunk" in {p["kind"] for p in expanded["passages"]}
    for p in expanded["passages"]:
        assert set(p) >= {
            "text",
            "source",
            "document_id",
            "start_index",
            "end_index",
            "score",
            "kind",
        }
        source = (EXAMPLES / p["document_id"]).read_text(encoding="utf-8")
        assert source[p["start_index"] : p["end_index"]] == p["text"]
    assert len(expanded["context"]) > len(children["context"])
    # Plain output names each passage's source and offsets.
    assert main(base[:-1]) == 0
    text = capsys.readouterr().out
    assert "[1] " in text and "chars " in text


def test_errors_are_one_line_without_traceback(pg_dsn: str) -> None:
    proc = _cli("ask", "q", "--collection", "bad-name", "--dsn", pg_dsn)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "parrot-parents: error: invalid collection name 'bad-name' (use 1-63 characters: ASCII "
        "letters (a-z, A-Z), digits and '_', not starting with a digit)"
    ]
    assert "Traceback" not in proc.stderr


def test_ingest_reports_bad_files_and_keeps_good_ones(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ok.md").write_text("Fine text.", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfd")  # (\xff\xfe would be UTF-16's BOM)
    code = main(["ingest", str(tmp_path), "--collection", unique_table("cli"), "--dsn", pg_dsn])
    captured = capsys.readouterr()
    assert code == 1
    assert "ingested 1 document(s)" in captured.out
    assert "bad.txt: not valid UTF-8" in captured.err


def test_ask_on_a_missing_collection_is_an_error_and_creates_nothing(pg_dsn: str) -> None:
    table = unique_table("missing")
    proc = _cli("ask", "q", "--collection", table, "--dsn", pg_dsn)
    assert proc.returncode == 2
    assert f"collection '{table}' does not exist" in proc.stderr
    proc = _cli("ask", "q", "--collection", table, "--dsn", pg_dsn)
    assert "does not exist" in proc.stderr  # the first call did not create it


@pytest.mark.parametrize(
    ("argv", "dest", "wanted"),
    [
        (["ingest", "a.md", "--collection", "c", "b.md"], "paths", ["a.md", "b.md"]),
        (["delete", "c", "d1", "--dsn", "postgresql://x", "d2"], "document_ids", ["d1", "d2"]),
        (
            ["bots", "set", "hr", "--force", "enabled=false", "--scope", "{}", "k=1"],
            "assignments",
            ["enabled=false", "k=1"],
        ),
    ],
)
def test_a_command_s_positionals_may_follow_its_options(
    argv: list[str], dest: str, wanted: list[str]
) -> None:
    assert getattr(parse(build_parser(), argv), dest) == wanted


@pytest.mark.parametrize(
    "argv",
    [
        ["ingest", "a.md", "--collection", "c", "--bogus"],
        ["ask", "a question", "stray"],
        ["bots", "show", "hr", "stray"],
    ],
)
def test_other_words_after_the_options_are_still_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        parse(build_parser(), argv)
    assert raised.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_an_unknown_flag_among_a_command_s_list_is_named_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse(build_parser(), ["bots", "set", "hr", "--scope", "{}", "limit=4", "--nope"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --nope" in err and "limit=4" not in err
