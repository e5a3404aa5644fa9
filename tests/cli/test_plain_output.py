"""What the commands print is true and reads as the user's terms: a collection is called
a collection, `documents` lists the default collection, an ingest that writes nothing
gives no expansion ratio, and a file that is not a PDF is one clean line."""

from __future__ import annotations

from pathlib import Path

import pytest

from parrot_parents.cli.main import build_parser, main
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import REPO_ROOT, unique_table

POLICY = REPO_ROOT / "examples" / "corpus" / "travel-policy.md"


def test_a_bad_collection_name_is_called_a_collection(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigurationError, match="invalid collection name 'a-b'"):
        PgVectorStore(table="a-b")
    for argv in (["ingest", str(POLICY)], ["ask", "what is the mileage rate?"]):
        assert main([*argv, "--collection", "a-b", "--dsn", pg_dsn]) == 2
        err = capsys.readouterr().err
        assert "invalid collection name 'a-b'" in err and "table" not in err
        assert "letters" in err and "digits" in err


def test_documents_without_an_argument_lists_the_default_collection(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build_parser().parse_args(["documents"]).collection == "documents"
    main(["documents", "--dsn", pg_dsn])  # listed, or "does not exist": either names it
    captured = capsys.readouterr()
    assert "'documents'" in captured.out + captured.err or "DOCUMENT_ID" in captured.out


def test_an_ingest_that_writes_nothing_prints_no_expansion_ratio(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ingest", str(POLICY), "--collection", unique_table("again"), "--dsn", pg_dsn]
    assert main(argv) == 0
    assert "expansion ratio 1.00" in capsys.readouterr().out
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "expansion ratio" not in out
    assert "nothing new to embed" in out
    assert "ingested 0 document(s)" in out and "1 unchanged, skipped" in out


def test_a_file_that_is_not_a_pdf_is_one_clean_line(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "fake.pdf").write_text("hello, I am not a PDF\n")
    argv = ["ingest", str(tmp_path / "fake.pdf"), "--collection", unique_table("pdf")]
    assert main([*argv, "--dsn", pg_dsn]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "PDF" in line or "pdf" in line]
    assert lines == [
        f"error: {tmp_path / 'fake.pdf'}: not a readable PDF (invalid pdf header: b'hello')"
    ]
    assert "EOF marker" not in err
