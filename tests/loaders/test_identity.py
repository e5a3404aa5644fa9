"""The same file is one document however its path is spelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from parrot_parents.cli.main import main
from parrot_parents.loaders.text import TextLoader
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import unique_table


def _corpus(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "mydocs", tmp_path / "other"
    a.mkdir()
    b.mkdir()
    (a / "pump-manual.md").write_text("Prime the pump before starting it.", encoding="utf-8")
    (b / "valves.md").write_text("Close the valves every evening.", encoding="utf-8")
    return a, b


async def _ids(store: PgVectorStore) -> set[str]:
    hits = await store.similarity_search("pump valves", limit=50)
    return {h.metadata["document_id"] for h in hits}


async def test_ids_relative_to_a_named_root_do_not_depend_on_the_paths_given(
    tmp_path: Path, store: PgVectorStore, embeddings: object
) -> None:
    a, b = _corpus(tmp_path)
    await TextLoader([a], root=tmp_path, embedding=embeddings).ingest(store)  # type: ignore[arg-type]
    report = await TextLoader([a, b], root=tmp_path, embedding=embeddings).ingest(store)  # type: ignore[arg-type]
    assert await _ids(store) == {"mydocs/pump-manual.md", "other/valves.md"}
    assert not any("same content" in w for ws in report.warnings.values() for w in ws)


async def test_id_prefix_names_every_document(
    tmp_path: Path, store: PgVectorStore, embeddings: object
) -> None:
    a, b = _corpus(tmp_path)
    await TextLoader([a, b], id_prefix="hr/", embedding=embeddings).ingest(store)  # type: ignore[arg-type]
    assert await _ids(store) == {"hr/pump-manual.md", "hr/valves.md"}


async def test_the_same_content_under_another_id_is_warned_about(
    tmp_path: Path, store: PgVectorStore, embeddings: object
) -> None:
    a, b = _corpus(tmp_path)
    await TextLoader([a], embedding=embeddings).ingest(store)  # type: ignore[arg-type]
    loader = TextLoader([a, b], embedding=embeddings)  # type: ignore[arg-type]
    report = await loader.ingest(store)
    warned = [w for ws in report.warnings.values() for w in ws if "same content" in w]
    assert len(warned) == 1 and "'pump-manual.md'" in warned[0]


def test_cli_root_makes_two_spellings_one_document(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _corpus(tmp_path)
    table = unique_table("ident")
    common = ["--collection", table, "--dsn", pg_dsn, "--root", str(tmp_path)]
    assert main(["ingest", str(a), *common]) == 0
    assert main(["ingest", str(a), str(b), *common]) == 0
    capsys.readouterr()
    assert main(["ask", "prime the pump", "--collection", table, "--dsn", pg_dsn, "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    spans = [(p["document_id"], p["start_index"], p["end_index"]) for p in out["passages"]]
    assert len(spans) == len(set(spans))  # never the same span twice
    assert {d for d, _, _ in spans} <= {"mydocs/pump-manual.md", "other/valves.md"}


def test_cli_warns_when_a_file_is_stored_twice(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _corpus(tmp_path)
    table = unique_table("ident")
    common = ["--collection", table, "--dsn", pg_dsn]
    assert main(["ingest", str(a), *common]) == 0
    capsys.readouterr()
    assert main(["ingest", str(a), str(b), *common]) == 0
    err = capsys.readouterr().err
    assert "same content is already stored as document(s) 'pump-manual.md'" in err
    assert "CLI: parrot-parents delete COLLECTION pump-manual.md)" in err
