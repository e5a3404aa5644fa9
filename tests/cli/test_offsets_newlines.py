"""Offsets are defined once for every format: the README's formula holds for CRLF, CR-only,
BOM and mixed line breaks, and ``show DOCUMENT_ID --text`` prints the text that the
offsets of an HTML (or any) document index."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from parrot_parents.cli.main import main
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import REPO_ROOT, unique_table

FORMULA = 'open(path, encoding="utf-8-sig", newline="").read()[start:end]'

_BODY = [
    "# Travel Policy",
    "Staff book travel through the cooperative's portal. " * 6,
    "## Per Diem",
    "The per diem covers meals and incidentals on each travel day. " * 5,
    "| Item | Amount |\n|---|---|\n| Lunch | 15 |\n| Dinner | 30 |",
    "## Mileage",
    "Mileage is paid per kilometre driven in a private car. " * 4,
]


def _markdown(newline: str) -> str:
    return "\n\n".join(_BODY).replace("\n", newline)


FILES: dict[str, bytes] = {
    "crlf.md": _markdown("\r\n").encode(),
    "cr.md": _markdown("\r").encode(),
    "bom.md": b"\xef\xbb\xbf" + _markdown("\n").encode(),
    "bom-crlf.txt": b"\xef\xbb\xbf" + _markdown("\r\n").encode(),
    "mixed.md": (
        "# Mixed\r\n\r\nFirst paragraph with Windows breaks. " * 3
        + "\n\n## Unix\n\nSecond paragraph with Unix breaks. " * 8
        + "\r\r## Old Mac\r\rThird paragraph with CR breaks. " * 8
    ).encode(),
    "page.html": (
        "<html><head><title>Team</title></head><body>\r\n<h1>Team</h1>\r\n"
        "<p>Who does what.\r\nAsk them.</p>\r\n<table><tr><th>Name</th><th>Role</th></tr>"
        "<tr><td>Ann</td><td>Lead</td></tr></table>\r\n<h2>Contact</h2><p>"
        + "Write to the team by e-mail. " * 20
        + "</p></body></html>"
    ).encode(),
}


async def _rows(dsn: str, table: str, embeddings: SentenceTransformerEmbeddings) -> list[Any]:
    store = PgVectorStore(dsn=dsn, table=table, embedding=embeddings)
    await store.connect()
    try:
        engine, t = await store.ready()
        async with engine.connect() as conn:
            result = await conn.execute(select(t.c.document, t.c.cmetadata))
            return [(r.document, dict(r.cmetadata)) for r in result]
    finally:
        await store.close()


def test_readme_offset_formula_holds_for_every_line_break(
    tmp_path: Path,
    pg_dsn: str,
    embeddings: SentenceTransformerEmbeddings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, data in FILES.items():
        (tmp_path / name).write_bytes(data)
    table = unique_table("nl")
    common = ["--collection", table, "--dsn", pg_dsn]
    assert main(["ingest", str(tmp_path), *common]) == 0
    assert f"ingested {len(FILES)} document(s)" in capsys.readouterr().out

    rows: dict[str, list[tuple[str, int, int]]] = {}
    for document, meta in asyncio.run(_rows(pg_dsn, table, embeddings)):
        if meta.get("document_type") == "indexed" or meta.get("offsets_exact") is False:
            continue  # rows of a strategy's index or an overview: not spans of the text
        span = (document, meta["start_index"], meta["end_index"])
        rows.setdefault(meta["document_id"], []).append(span)
    assert set(rows) == set(FILES)
    assert len(rows["crlf.md"]) > 2 and len(rows["cr.md"]) > 2

    for doc_id in FILES:
        if not doc_id.endswith(".html"):
            # The README's formula (FORMULA), word for word.
            with open(tmp_path / doc_id, encoding="utf-8-sig", newline="") as f:
                source = f.read()
            for document, start, end in rows[doc_id]:
                assert source[start:end] == document, (doc_id, start, end)
        # `show --text` prints exactly the text the offsets index, for every format.
        assert main(["show", doc_id, *common, "--text"]) == 0
        shown = capsys.readouterr().out
        assert main(["show", doc_id, *common, "--text", "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"document_id": doc_id, "text": shown}
        for document, start, end in rows[doc_id]:
            assert shown[start:end] == document, (doc_id, start, end)
        if doc_id.endswith(".html"):
            assert "<" not in shown and "Ann | Lead" in shown  # the extracted text
        else:
            assert shown == source
    assert main(["show", "nope.md", *common, "--text"]) == 1
    assert "no document 'nope.md'" in capsys.readouterr().out


def test_readme_states_the_formula_the_test_checks() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert FORMULA in readme
    assert 'open(path, encoding="utf-8-sig").read()' not in readme  # wrong for CRLF files
    assert "show DOCUMENT_ID --text" in readme
