"""An ingest reports its progress while the model loads and as each document is embedded,
not once per batch of documents (loaders.progress)."""

from __future__ import annotations

from pathlib import Path

import pytest

from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.loaders import TextLoader
from parrot_parents.loaders.progress import (
    EMBEDDING,
    LOADING_MODEL,
    PROGRESS_CHARACTERS,
    IngestProgress,
)
from parrot_parents.stores.postgres import PgVectorStore

WORDS = [
    "salary",
    "leave",
    "payroll",
    "holiday",
    "review",
    "bonus",
    "travel",
    "expense",
    "office",
    "training",
]


def _text(n_words: int, seed: int) -> str:
    return " ".join(WORDS[(i * 7 + seed) % len(WORDS)] for i in range(n_words)) + "."


class Recorder:
    """Every event, with whether the loader's model was loaded when it came."""

    def __init__(self, embedding: SentenceTransformerEmbeddings) -> None:
        self.embedding = embedding
        self.events: list[tuple[str, object, bool]] = []

    def _note(self, kind: str, value: object) -> None:
        self.events.append((kind, value, self.embedding.load_ms is not None))

    def stage(self, name: str) -> None:
        self._note("stage", name)

    def advance(self, documents: float) -> None:
        self._note("advance", documents)

    def stored(self, documents: int) -> None:
        self._note("stored", documents)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Three short Markdown documents and a long one of six sections (~9,000 characters)."""
    for i in range(3):
        (tmp_path / f"short{i}.md").write_text(f"# Short {i}\n\n{_text(60, i)}\n")
    sections = [f"## Part {k}\n\n{_text(230, k)}" for k in range(6)]
    (tmp_path / "long.md").write_text("# Long\n\n" + "\n\n".join(sections) + "\n")
    return tmp_path


async def test_progress_starts_before_the_model_loads_and_moves_per_document(
    folder: Path, store: PgVectorStore
) -> None:
    embedding = SentenceTransformerEmbeddings()  # this loader's own, not loaded yet
    assert embedding.load_ms is None
    loader = TextLoader([folder], embedding=embedding)
    recorder = Recorder(embedding)
    assert isinstance(recorder, IngestProgress)
    # Documents over 4000 characters get parents of at most 1500: the long one has several,
    # so its children are embedded in several steps (one parent's children are one step).
    report = await loader.ingest(
        store,
        progress=recorder,
        parent_chunk_threshold_tokens=4000,
        parent_chunk_size_tokens=1500,
    )
    assert report.documents == 4 and not report.failed

    kinds = [(k, v) for k, v, _ in recorder.events]
    # The model's load is announced before it happens, and its end once it is done.
    assert recorder.events[0] == ("stage", LOADING_MODEL, False)
    at = kinds.index(("stage", EMBEDDING))
    assert recorder.events[at][2] is True
    advances = [v for k, v in kinds if k == "advance"]
    assert all(isinstance(v, float | int) and 0 < v <= 1 for v in advances)
    assert sum(advances) == pytest.approx(4)
    # All four documents go into one batch of eight, and one transaction: the advances
    # still come per document, and the long one's in steps of at most 2000 characters.
    assert [v for k, v in kinds if k == "stored"] == [4]
    long_chars = (folder / "long.md").stat().st_size
    assert len(advances) >= 3 + long_chars // PROGRESS_CHARACTERS
    assert kinds.index(("stored", 4)) > max(i for i, (k, _) in enumerate(kinds) if k == "advance")


async def test_a_plain_callable_is_told_the_documents_stored(
    folder: Path, store: PgVectorStore, embeddings: SentenceTransformerEmbeddings
) -> None:
    calls: list[int] = []
    await TextLoader([folder], embedding=embeddings).ingest(store, progress=calls.append)
    assert calls == [4]
