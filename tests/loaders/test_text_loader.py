from __future__ import annotations

from pathlib import Path

import pytest

from parrot_parents.errors import DocumentReadError
from parrot_parents.loaders import TextLoader, read_text_file
from parrot_parents.stores.postgres import PgVectorStore


def test_bad_utf8_is_a_clear_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("café".encode("latin-1"))
    with pytest.raises(DocumentReadError, match=r"latin1\.txt.*not valid UTF-8 at byte 3"):
        read_text_file(bad)


def test_nul_bytes_are_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "nul.md"
    bad.write_bytes(b"abc\x00def")
    with pytest.raises(DocumentReadError, match="NUL bytes"):
        read_text_file(bad)


def test_replace_mode_cleans_and_reports(tmp_path: Path) -> None:
    bad = tmp_path / "mixed.txt"
    bad.write_bytes(b"ok \xff then\x00 end")
    result = read_text_file(bad, on_bad_bytes="replace")
    assert result.text == "ok \ufffd then end"
    assert len(result.warnings) == 2


def test_a_bad_file_never_loses_the_others(tmp_path: Path, embeddings) -> None:
    (tmp_path / "good.md").write_text("Good text about payroll.", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe broken")
    (tmp_path / "empty.txt").write_text("  ", encoding="utf-8")
    (tmp_path / "skip.bin").write_bytes(b"\x00\x01")
    loader = TextLoader(tmp_path, embedding=embeddings)
    docs = loader.load()
    assert [d.metadata["document_id"] for d in docs] == ["good.md"]
    assert set(loader.report.failed) == {str(tmp_path / "bad.txt")}
    assert "empty file skipped" in loader.report.warnings[str(tmp_path / "empty.txt")]


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DocumentReadError, match="no such file or directory"):
        TextLoader(tmp_path / "nope").load()


def test_constructor_arguments_are_optional() -> None:
    assert TextLoader().load() == []


async def test_ingest_twice_leaves_no_duplicates_and_routes_levels(
    tmp_path: Path, store: PgVectorStore, embeddings
) -> None:
    (tmp_path / "short.md").write_text("Short policy. " * 50, encoding="utf-8")
    (tmp_path / "long.md").write_text("Long handbook sentence here. " * 700, encoding="utf-8")
    loader = TextLoader(tmp_path, embedding=embeddings)
    await loader.ingest(store)
    first = await store.count()
    await TextLoader(tmp_path, embedding=embeddings).ingest(store)
    assert await store.count() == first
    long_rows = await store.similarity_search(
        "handbook", limit=5, include_parents=True, filter={"document_id": "long.md"}
    )
    short_rows = await store.similarity_search(
        "policy", limit=5, include_parents=True, filter={"document_id": "short.md"}
    )
    assert all(r.metadata["is_chunk"] for r in long_rows + short_rows)  # parents: no vector
    assert all(r.metadata["parent_document_id"].startswith("long.md#p:") for r in long_rows)
    assert all(r.metadata["parent_document_id"] == "short.md#doc:0-700" for r in short_rows)


async def test_seed_override_signature(tmp_path: Path, store: PgVectorStore, embeddings) -> None:
    from langchain_core.documents import Document

    loader = TextLoader(embedding=embeddings)
    text = "Sentence number one is here. " * 400  # 11600 characters
    rows = await loader._chunk_with_late_chunking(
        [Document(page_content=text, metadata={"document_id": "d"})],
        vector_store=store,
        parent_chunk_threshold_tokens=8000,
        parent_chunk_size_tokens=2000,
        parent_chunk_overlap_tokens=100,
    )
    parents = [r for r in rows if not r.metadata["is_chunk"]]
    assert len(parents) >= 6
    assert all(p.metadata["document_type"] == "parent_chunk" for p in parents)
    # Stored: the hierarchy, and the default strategy's indexed rows beside it.
    assert await store.count() == len(rows) + loader.report.indexed


def test_same_name_in_two_folders_gets_distinct_ids(tmp_path: Path, embeddings) -> None:
    for name, body in (("d1", "alpha text"), ("d2", "beta text")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "notes.md").write_text(body, encoding="utf-8")
    loader = TextLoader([tmp_path / "d1", tmp_path / "d2"], embedding=embeddings)
    docs = loader.load()
    assert [d.metadata["document_id"] for d in docs] == ["d1/notes.md", "d2/notes.md"]
    assert not loader.report.failed


def test_an_id_collision_is_reported_never_merged(tmp_path: Path, embeddings) -> None:
    (tmp_path / "d1").mkdir()
    (tmp_path / "d1" / "notes.md").write_text("alpha", encoding="utf-8")
    (tmp_path / "notes.md").write_text("beta", encoding="utf-8")
    loader = TextLoader([tmp_path / "notes.md", tmp_path / "d1" / "notes.md"], embedding=embeddings)
    docs = loader.load()
    assert [d.page_content for d in docs] == ["beta"]
    (reason,) = loader.report.failed.values()
    assert "same document id 'notes.md'" in reason


def test_hidden_and_unsupported_files_are_skipped_and_reported(tmp_path: Path) -> None:
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "h.md").write_text("hidden", encoding="utf-8")
    (tmp_path / "sheet.xlsx").write_bytes(b"PK")  # HTML and PDF are read; .xlsx is not
    (tmp_path / "ok.md").write_text("fine", encoding="utf-8")
    loader = TextLoader(tmp_path)
    assert [d.metadata["document_id"] for d in loader.load()] == ["ok.md"]
    assert loader.report.warnings == {
        str(tmp_path / ".hidden"): ["skipped: hidden folder (its name starts with '.')"],
        str(tmp_path / "sheet.xlsx"): ["skipped: unsupported file type '.xlsx'"],
    }


async def test_replacing_a_document_from_another_file_is_warned(
    tmp_path: Path, store: PgVectorStore, embeddings
) -> None:
    for name, body in (("d1", "alpha text"), ("d2", "beta text")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "notes.md").write_text(body, encoding="utf-8")
    await TextLoader(tmp_path / "d1", embedding=embeddings).ingest(store)
    second = TextLoader(tmp_path / "d2", embedding=embeddings)
    await second.ingest(store)
    # Each file's source is its path under the folder ingested, never this machine's.
    (warning,) = second.report.warnings["d2/notes.md"]
    assert warning == "replaced document 'notes.md' previously ingested from d1/notes.md"
    again = TextLoader(tmp_path / "d2", embedding=embeddings)
    await again.ingest(store)  # the same file again: nothing to warn about
    assert again.report.warnings == {}
