"""``ask --filter JSON`` takes the same filter language as the library and HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parrot_parents.cli.main import main
from tests.conftest import unique_table


def test_ask_filter(tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    for name, body in [("a.md", "Pay day is the 25th."), ("b.md", "Pay rises come in May.")]:
        (tmp_path / name).write_text(body, encoding="utf-8")
    table = unique_table("flt")
    assert main(["ingest", str(tmp_path), "--collection", table, "--dsn", pg_dsn]) == 0
    capsys.readouterr()
    base = ["ask", "pay", "--collection", table, "--dsn", pg_dsn, "--no-expand", "--json"]
    assert main([*base, "--filter", '{"document_id": {"$in": ["b.md"]}}']) == 0
    out = json.loads(capsys.readouterr().out)
    assert {p["document_id"] for p in out["passages"]} == {"b.md"}
    assert main([*base, "--filter", '{"document_id": {"$nin": ["b.md"]}}']) == 0
    out = json.loads(capsys.readouterr().out)
    assert {p["document_id"] for p in out["passages"]} == {"a.md"}
    for bad, needle in [
        ('{"year": {"$regex": "x"}}', "unknown filter operator '$regex'"),
        ('{"year": NaN}', "--filter is not valid JSON"),
        ('{"year": 1e400}', "--filter is not valid JSON"),
        ('{"document_id": {}}', "an object value must hold operators"),
        ('{"$and": {"a": 1}}', "filter $and needs a list of filters"),
    ]:
        assert main([*base, "--filter", bad]) == 2
        assert needle in capsys.readouterr().err


def test_a_lexical_ask_loads_no_model(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.md").write_text("Pay day is the 25th of each month.", encoding="utf-8")
    table = unique_table("lex")
    assert main(["ingest", str(tmp_path), "--collection", table, "--dsn", pg_dsn]) == 0
    capsys.readouterr()
    base = ["ask", "pay day", "--collection", table, "--dsn", pg_dsn, "--json"]
    assert main([*base, "--search-mode", "lexical"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passages"] and out["meta"]["timings_ms"]["model_load"] == 0.0
    assert main([*base, "--search-mode", "lexical", "--budget", "200", "--no-trim"]) == 0
    assert json.loads(capsys.readouterr().out)["meta"]["timings_ms"]["model_load"] == 0.0
    # Trimming ranks sentences by the question's embedding: loaded before the search.
    assert main([*base, "--search-mode", "lexical", "--budget", "200"]) == 0
    assert json.loads(capsys.readouterr().out)["meta"]["timings_ms"]["model_load"] > 0.0
    assert main([*base, "--search-mode", "dense"]) == 0  # a dense one does
    assert json.loads(capsys.readouterr().out)["meta"]["timings_ms"]["model_load"] > 0.0
