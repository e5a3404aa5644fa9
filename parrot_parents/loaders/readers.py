"""Reading source files as text, with clear errors instead of crashes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from parrot_parents.errors import DocumentReadError

__all__ = ["SUPPORTED_SUFFIXES", "ReadResult", "discover_files", "read_text_file"]

SUPPORTED_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".rst", ".text"})

OnBadBytes = Literal["error", "replace"]


@dataclass(frozen=True)
class ReadResult:
    """Text of a file and what was cleaned on the way (empty when nothing)."""

    path: Path
    text: str
    warnings: tuple[str, ...] = ()


def read_text_file(path: str | Path, *, on_bad_bytes: OnBadBytes = "error") -> ReadResult:
    """Read a UTF-8 text file (a UTF-8 BOM is dropped).

    Args:
        path: the file.
        on_bad_bytes: ``"error"`` (default) raises on invalid UTF-8 or NUL bytes;
            ``"replace"`` substitutes U+FFFD for invalid bytes, drops NUL bytes and reports
            both in ``warnings``.

    Raises:
        DocumentReadError: missing file, a directory, invalid UTF-8 or NUL bytes
            (with ``on_bad_bytes="error"``). The message names the file and the byte offset.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError as exc:
        raise DocumentReadError(str(p), "no such file") from exc
    except IsADirectoryError as exc:
        raise DocumentReadError(str(p), "is a directory") from exc
    except OSError as exc:
        raise DocumentReadError(str(p), exc.strerror or str(exc)) from exc
    warnings: list[str] = []
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if on_bad_bytes == "error":
            raise DocumentReadError(
                str(p), f"not valid UTF-8 at byte {exc.start} (use on_bad_bytes='replace')"
            ) from exc
        text = raw.decode("utf-8", errors="replace")
        warnings.append(f"invalid UTF-8 replaced by U+FFFD (first at byte {exc.start})")
    if "\x00" in text:
        if on_bad_bytes == "error":
            raise DocumentReadError(
                str(p), f"contains NUL bytes (first at character {text.index(chr(0))})"
            )
        warnings.append(f"{text.count(chr(0))} NUL bytes removed")
        text = text.replace("\x00", "")
    return ReadResult(p, text, tuple(warnings))


def discover_files(paths: list[str | Path]) -> list[tuple[Path, str]]:
    """Expand files and directories into ``(file, document_id)`` pairs, sorted.

    A directory contributes its supported files recursively; the document id is the path
    relative to that directory (``"guide/intro.md"``), so ids do not depend on the working
    directory. A file given directly gets its file name as id.

    Raises:
        DocumentReadError: a path that does not exist.
    """
    out: list[tuple[Path, str]] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and f.suffix.lower() in SUPPORTED_SUFFIXES:
                    out.append((f, f.relative_to(p).as_posix()))
        elif p.is_file():
            out.append((p, p.name))
        else:
            raise DocumentReadError(str(p), "no such file or directory")
    return out
