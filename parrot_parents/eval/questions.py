"""Question sets: a CSV of questions with character-span references, and their corpora.

Columns ``question``, ``references`` (a JSON list of ``{"content", "start_index",
"end_index"}``, **character** offsets into the corpus file read as UTF-8, end exclusive;
``content``, when given, must equal that slice) and ``corpus_id`` (the corpus file's name
without its suffix): docs/evaluation.md. A question's ``qid`` is its 0-based row index.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from parrot_parents.errors import ConfigurationError, DocumentReadError
from parrot_parents.loaders.readers import read_text_file

__all__ = [
    "CORPUS_SUFFIXES",
    "REQUIRED_COLUMNS",
    "Question",
    "Reference",
    "check_references",
    "load_corpora",
    "load_questions",
]

REQUIRED_COLUMNS = ("question", "references", "corpus_id")
#: Corpus files read from the corpora directory.
CORPUS_SUFFIXES = (".md", ".txt")


@dataclass(frozen=True)
class Reference:
    """One span of a question's answer: characters ``[start, end)`` of its corpus.

    ``content`` is the expected text of the span, or None when the CSV did not give it.
    """

    start: int
    end: int
    content: str | None = None


@dataclass(frozen=True)
class Question:
    """A row of the question set; ``qid`` is its 0-based row index."""

    qid: int
    question: str
    corpus_id: str
    references: tuple[Reference, ...]


def load_questions(path: str | Path) -> list[Question]:
    """Read a question CSV (see the module docstring), in file order.

    Raises:
        DocumentReadError: the file is missing or not UTF-8.
        ConfigurationError: a required column is missing, a row's ``references`` is not a
            JSON list of spans with ``0 <= start_index <= end_index``, or a question or
            corpus id is empty. The message names the row (``qid``).
    """
    p = Path(path)
    try:
        with p.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise ConfigurationError(
                    f"{str(p)!r} lacks the column(s) {missing}, found {reader.fieldnames!r}",
                    hint="the header must be: question,references,corpus_id",
                )
            rows = list(reader)
    except FileNotFoundError as exc:
        raise DocumentReadError(str(p), "no such file") from exc
    except UnicodeDecodeError as exc:
        raise DocumentReadError(str(p), f"not valid UTF-8 at byte {exc.start}") from exc
    return [_parse_row(qid, row) for qid, row in enumerate(rows)]


def _parse_row(qid: int, row: Mapping[str, Any]) -> Question:
    question = (row.get("question") or "").strip()
    corpus_id = (row.get("corpus_id") or "").strip()
    if not question:
        raise ConfigurationError(f"question {qid}: the question text is empty")
    if not corpus_id:
        raise ConfigurationError(f"question {qid}: corpus_id is empty")
    try:
        raw = json.loads(row.get("references") or "")
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"question {qid}: references is not JSON: {exc.msg}",
            hint='expected [{"content": ..., "start_index": int, "end_index": int}, ...]',
        ) from exc
    if not isinstance(raw, list) or not raw:
        raise ConfigurationError(
            f"question {qid}: references must be a non-empty JSON list, got {raw!r}"
        )
    return Question(qid, question, corpus_id, tuple(_parse_reference(qid, r) for r in raw))


def _parse_reference(qid: int, ref: Any) -> Reference:
    start = ref.get("start_index") if isinstance(ref, dict) else None
    end = ref.get("end_index") if isinstance(ref, dict) else None
    if not (is_int(start) and is_int(end) and 0 <= start <= end):
        raise ConfigurationError(
            f"question {qid}: bad reference {ref!r}",
            hint="start_index and end_index are ints with 0 <= start_index <= end_index",
        )
    content = ref.get("content")
    return Reference(start, end, None if content is None else str(content))


def is_int(value: object) -> TypeGuard[int]:
    """An int that is not a bool (JSON's ``true`` is no offset)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_references(questions: Sequence[Question], corpora: Mapping[str, str]) -> None:
    """Check every reference against the corpus texts it points into.

    Args:
        questions: the question set.
        corpora: ``{corpus_id: text}``.

    Raises:
        ConfigurationError: a question names an unknown corpus, a reference ends past its
            corpus, or its ``content`` differs from the text at its offsets (offsets
            counted in bytes, or a file re-saved with other line endings, cause this).
    """
    for q in questions:
        text = corpora.get(q.corpus_id)
        if text is None:
            raise ConfigurationError(
                f"question {q.qid}: corpus {q.corpus_id!r} not found, "
                f"known corpora: {sorted(corpora)}",
                hint=f"add {q.corpus_id}.md to the corpora directory",
            )
        for ref in q.references:
            if ref.end > len(text):
                raise ConfigurationError(
                    f"question {q.qid}: reference [{ref.start}, {ref.end}) ends past "
                    f"{q.corpus_id!r} ({len(text)} characters)"
                )
            if ref.content is not None and text[ref.start : ref.end] != ref.content:
                raise ConfigurationError(
                    f"question {q.qid}: reference [{ref.start}, {ref.end}) of {q.corpus_id!r} "
                    f"reads {text[ref.start : ref.end][:60]!r}, expected {ref.content[:60]!r}",
                    hint="offsets are Python str (character) indices into the UTF-8 file",
                )


def load_corpora(directory: str | Path) -> dict[str, str]:
    """``{corpus_id: text}`` of every ``*.md``/``*.txt`` file directly in ``directory``.

    Files are read as strict UTF-8 (a BOM is dropped), so that character offsets match
    the ones of the question set.

    Raises:
        DocumentReadError: the directory is missing, or a file is not valid UTF-8.
        ConfigurationError: no corpus file, or two files with the same corpus id.
    """
    d = Path(directory)
    if not d.is_dir():
        raise DocumentReadError(str(d), "not a directory of corpus files")
    corpora: dict[str, str] = {}
    for path in sorted(d.iterdir()):
        if not path.is_file() or path.suffix.lower() not in CORPUS_SUFFIXES:
            continue
        if path.stem in corpora:
            raise ConfigurationError(f"two corpus files in {str(d)!r} have the id {path.stem!r}")
        corpora[path.stem] = read_text_file(path).text
    if not corpora:
        raise ConfigurationError(
            f"no corpus file in {str(d)!r}", hint="expected <corpus_id>.md or <corpus_id>.txt"
        )
    return corpora
