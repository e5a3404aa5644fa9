"""Reading source files as text, with clear errors instead of crashes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from parrot_parents.errors import DocumentReadError

__all__ = [
    "SUPPORTED_SUFFIXES",
    "Discovery",
    "ReadResult",
    "discover_files",
    "read_text_file",
    "utf8_name",
]

SUPPORTED_SUFFIXES = frozenset(
    {".txt", ".md", ".markdown", ".rst", ".text", ".html", ".htm", ".pdf"}
)

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
                str(p),
                f"not valid UTF-8 at byte {exc.start} (use on_bad_bytes='replace'; "
                "on the command line, --on-bad-bytes replace)",
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


def utf8_name(name: str) -> tuple[str, bool]:
    r"""A file name or path as valid UTF-8 text, and whether it had to be changed.

    On POSIX a name that is not valid UTF-8 arrives with surrogate escapes
    (``"caf\udce9.md"``), which neither PostgreSQL nor JSON can store; its bad bytes are
    written as ``\xNN`` instead (``caf\xe9.md``), so the same file always gets the same id.
    """
    try:
        name.encode("utf-8")
        return name, False
    except UnicodeEncodeError:
        raw = name.encode("utf-8", "surrogateescape")
        return raw.decode("utf-8", "backslashreplace"), True


def _relative_to(f: Path, base: Path) -> str | None:
    """``f``'s path relative to ``base`` (both resolved), or None when outside it."""
    try:
        return f.resolve().relative_to(base).as_posix()
    except ValueError:
        return None


@dataclass(frozen=True)
class Discovery:
    """Files found by :func:`discover_files` and what was left out, with reasons.

    ``skipped``: files of unsupported types inside a directory; ``conflicts``: files whose
    document id another file already took (not loaded: an error for the caller).
    """

    files: list[tuple[Path, str]]
    skipped: dict[str, str]
    conflicts: dict[str, str]


def discover_files(
    paths: Sequence[str | Path],
    *,
    root: str | Path | None = None,
    id_prefix: str | None = None,
) -> Discovery:
    """Expand files and directories into ``(file, document_id)`` pairs.

    A directory contributes its ``.txt``/``.md``/``.rst``/``.html``/``.pdf`` files
    (:data:`SUPPORTED_SUFFIXES`) recursively, skipping hidden
    files and folders; the document id is the path relative to that directory
    (``"guide/intro.md"``), so ids do not depend on the working directory. With several
    roots, each id is prefixed by its root's name (``"d1/notes.md"``). A file named
    directly gets its file name as id, whatever its suffix.

    The default ids depend on how the paths are spelled (one root or several). For ids
    that never change, name them explicitly:

    * ``root``: every id is the file's path relative to this directory, however the
      paths are given (``ingest A`` and ``ingest A B`` with ``root="."`` both store
      ``A/pump-manual.md``); a file outside ``root`` is a conflict.
    * ``id_prefix``: every id is ``id_prefix`` followed by the path relative to the root
      it was found under (no root name is added), e.g. ``"hr/"`` + ``"pump-manual.md"``.

    Both can be combined (the prefix goes first). Two files that would get the same id are
    never merged silently: the later one is listed in ``conflicts`` with the reason.

    Raises:
        DocumentReadError: a path that does not exist.
    """
    files: list[tuple[Path, str]] = []
    skipped: dict[str, str] = {}
    conflicts: dict[str, str] = {}
    seen: dict[str, Path] = {}
    several = len(paths) > 1 and root is None and id_prefix is None
    base = Path(root).resolve() if root is not None else None
    if base is not None and not base.is_dir():
        raise DocumentReadError(str(root), "the root is not a directory")
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            found = []
            for f in sorted(root.rglob("*")):
                rel = f.relative_to(root)
                if not f.is_file() or any(part.startswith(".") for part in rel.parts):
                    continue
                if f.suffix.lower() not in SUPPORTED_SUFFIXES:
                    skipped[str(f)] = f"unsupported file type {f.suffix or '(none)'!r}"
                    continue
                prefix = f"{root.resolve().name}/" if several else ""
                found.append((f, prefix + rel.as_posix()))
        elif root.is_file():
            found = [(root, root.name)]
        else:
            raise DocumentReadError(str(root), "no such file or directory")
        if base is not None:
            inside = []
            for f, _ in found:
                relative = _relative_to(f, base)
                if relative is None:
                    conflicts[str(f)] = f"outside the root {str(base)!r}"
                else:
                    inside.append((f, relative))
            found = inside
        if id_prefix:
            found = [(f, id_prefix + doc_id) for f, doc_id in found]
        for f, doc_id in found:
            if doc_id in seen and seen[doc_id].resolve() != f.resolve():
                conflicts[str(f)] = (
                    f"same document id {doc_id!r} as {str(seen[doc_id])!r}; ingest it "
                    "separately or rename it"
                )
                continue
            if doc_id not in seen:
                seen[doc_id] = f
                files.append((f, doc_id))
    return Discovery(files, skipped, conflicts)
