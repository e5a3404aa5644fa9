"""``ingest --structure``, ``ask --filter`` on structure, ``show``, and ``reindex --stale``."""

from __future__ import annotations

import json

import pytest

from parrot_parents.cli.main import main
from tests.conftest import REPO_ROOT, unique_table

EXAMPLES = REPO_ROOT / "examples" / "corpus"


def test_structure_ingest_filter_show_and_reindex(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    table = unique_table("cli")
    common = ["--collection", table, "--dsn", pg_dsn]
    assert main(["ingest", str(EXAMPLES), *common, "--structure"]) == 0
    assert "ingested 5 document(s)" in capsys.readouterr().out
    # Unchanged files are skipped, and the command says so.
    assert main(["ingest", str(EXAMPLES), *common, "--structure"]) == 0
    captured = capsys.readouterr()
    assert "ingested 0 document(s)" in captured.out and "5 unchanged, skipped" in captured.out
    assert "unchanged: " in captured.err

    question = ["ask", "How will I be paid?", *common, "--json", "--no-expand"]
    assert main([*question, "--filter", json.dumps({"section_ordinal": 4})]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passages"]
    assert {p["document_id"] for p in out["passages"]} == {"employee-handbook.md"}
    like = {"section_path": {"$like": "%Pay and Payroll"}}
    assert main([*question, "--filter", json.dumps(like)]) == 0
    assert len(json.loads(capsys.readouterr().out)["passages"]) > 0

    assert main(["show", "employee-handbook.md", *common]) == 0
    tree = capsys.readouterr().out
    assert "employee-handbook.md\n" in tree
    assert "    4. Pay and Payroll: 1 parent, " in tree
    assert "      Vacation: " in tree

    # Another policy (child size): every document is stale and is re-cut from the stored text.
    assert main(["reindex", "--stale", *common, "--structure", "--child-size", "300"]) == 0
    assert "5 document(s) re-chunked" in capsys.readouterr().out
    assert main(["reindex", "--stale", *common, "--structure", "--child-size", "300"]) == 0
    assert "0 document(s) re-chunked" in capsys.readouterr().out
