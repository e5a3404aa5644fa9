"""Ingest edges: files with a UTF-16/UTF-32 byte-order mark, files that are not UTF-8 text
at all, two names for one content or one file, what is skipped (said for every kind, named
directly or found in a folder, a named pipe never opened) and names with control
characters in the tables."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from parrot_parents.cli.main import main
from parrot_parents.errors import DocumentReadError
from parrot_parents.loaders.readers import read_text_file
from tests.conftest import unique_table

TEXT = "# Pay\n\nYou are paid on the 15th.\r\nCafé naïve — überall ✓.\n"


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32", "utf-32-be"])
def test_a_file_with_a_utf16_or_utf32_bom_is_read_as_its_text(tmp_path: Path, codec: str) -> None:
    bom = {"utf-16-be": b"\xfe\xff", "utf-32-be": b"\x00\x00\xfe\xff"}.get(codec, b"")
    path = tmp_path / "doc.md"
    path.write_bytes(bom + TEXT.encode(codec))  # "utf-16"/"utf-32" write their own BOM
    got = read_text_file(path)
    assert got.text == TEXT and got.warnings == ()


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (TEXT.encode("utf-16-le"), "UTF-16 text without a byte-order mark"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8", "binary data, not text"),
        (("é à ü ö ç " * 3).encode("latin-1"), "convert it to UTF-8"),
    ],
)
def test_a_file_that_is_not_utf8_text_is_never_advised_replace(
    tmp_path: Path, raw: bytes, says: str
) -> None:
    path = tmp_path / "doc.txt"
    path.write_bytes(raw)
    with pytest.raises(DocumentReadError) as caught:
        read_text_file(path)
    assert says in caught.value.reason
    assert "replace" not in caught.value.reason


def test_one_bad_byte_in_utf8_text_is_advised_replace(tmp_path: Path) -> None:
    (tmp_path / "doc.txt").write_bytes(b"hello \xff world")
    with pytest.raises(DocumentReadError, match=r"at byte 6 .*--on-bad-bytes replace"):
        read_text_file(tmp_path / "doc.txt")


def test_ingest_edges_on_the_command_line(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("Mileage is paid at 0.58 per kilometre.\n")
    (folder / "copy.md").write_text("Mileage is paid at 0.58 per kilometre.\n")
    (folder / "link.md").symlink_to(folder / "a.md")
    (folder / ".notes.md").write_text("hidden notes\n")
    os.mkfifo(folder / "pipe.md")
    (folder / "new\nline.md").write_text("A name with a newline.\n")
    (folder / "wide.md").write_bytes(TEXT.encode("utf-16"))
    table = unique_table("edges")
    common = ["--collection", table, "--dsn", pg_dsn]

    assert main(["ingest", str(folder), *common]) == 0
    err = capsys.readouterr().err
    assert f"warning: {folder / 'copy.md'}: the same content as {folder / 'a.md'}" in err
    assert f"{folder / 'link.md'}: skipped: the same file as {str(folder / 'a.md')!r}" in err
    assert f"{folder / '.notes.md'}: skipped: hidden file" in err
    assert f"{folder / 'pipe.md'}: skipped: not a regular file (a named pipe)" in err
    assert f"warning: {folder}/new\\nline.md:" not in err  # nothing said about it

    assert main(["documents", table, "--dsn", pg_dsn, "--json"]) == 0
    listed = {d["document_id"] for d in json.loads(capsys.readouterr().out)}
    assert listed == {"a.md", "copy.md", "new\nline.md", "wide.md"}
    assert main(["documents", table, "--dsn", pg_dsn]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and any(line.startswith("new\\nline.md ") for line in lines)
    assert main(["show", "new\nline.md", *common]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "new\\nline.md"

    assert main(["show", "wide.md", *common, "--text", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == TEXT

    # Named directly: the same checks as in a folder; a named pipe is not opened.
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8")
    named = [str(tmp_path / "data.csv"), str(tmp_path / "image.png"), str(folder / "pipe.md")]
    assert main(["ingest", *named, *common]) == 0
    out, err = capsys.readouterr()
    assert "ingested 0 document(s)" in out
    assert f"{tmp_path / 'data.csv'}: skipped: unsupported file type '.csv'" in err
    assert f"{tmp_path / 'image.png'}: skipped: unsupported file type '.png'" in err
    assert f"{folder / 'pipe.md'}: skipped: not a regular file (a named pipe)" in err
    assert "replace" not in err
