"""Reading source files as text, with clear errors instead of crashes."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
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


#: Byte-order marks and the encodings they announce, longest first (UTF-32 LE's mark
#: begins with UTF-16 LE's).
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32"),
    (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32"),
    (b"\xef\xbb\xbf", "utf-8", "UTF-8"),
    (b"\xff\xfe", "utf-16-le", "UTF-16"),
    (b"\xfe\xff", "utf-16-be", "UTF-16"),
)

#: More invalid bytes than this in a file without NUL bytes: text in a legacy 8-bit
#: encoding (Latin-1, Windows-1252...), not a damaged UTF-8 file.
_FEW_BAD_BYTES = 4


def read_text_file(path: str | Path, *, on_bad_bytes: OnBadBytes = "error") -> ReadResult:
    """Read a text file: UTF-8, or UTF-16/UTF-32 when it starts with that encoding's
    byte-order mark. The mark is dropped: the text (what offsets index) is the file
    decoded without it.

    Args:
        path: the file.
        on_bad_bytes: ``"error"`` (default) raises on bytes invalid in the file's
            encoding, or NUL characters; ``"replace"`` substitutes U+FFFD for invalid
            bytes, drops NUL characters and reports both in ``warnings``.

    Raises:
        DocumentReadError: missing file, a directory, invalid bytes or NUL characters
            (with ``on_bad_bytes="error"``). The message names the file and the byte
            offset, and says what the file looks like when it is not UTF-8 text at all
            (UTF-16 without a byte-order mark, binary data, a legacy encoding); only a file
            with a few bad bytes is advised ``on_bad_bytes="replace"``.
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
    codec, name, bom = "utf-8", "UTF-8", 0
    for mark, marked_codec, marked_name in _BOMS:
        if raw.startswith(mark):
            codec, name, bom = marked_codec, marked_name, len(mark)
            break
    body = raw[bom:]
    try:
        text = body.decode(codec)
    except UnicodeDecodeError as exc:
        at = exc.start + bom
        if on_bad_bytes == "error":
            raise DocumentReadError(str(p), _bad_bytes(body, codec, name, at)) from exc
        text = body.decode(codec, errors="replace")
        warnings.append(f"invalid {name} replaced by U+FFFD (first at byte {at})")
    if "\x00" in text:
        if on_bad_bytes == "error":
            first = text.index(chr(0))
            reason = f"contains NUL bytes (first at character {first})"
            if codec == "utf-8" and _looks_like_utf16(body):
                reason = _UTF16_WITHOUT_BOM
            raise DocumentReadError(str(p), reason)
        warnings.append(f"{text.count(chr(0))} NUL bytes removed")
        text = text.replace("\x00", "")
    return ReadResult(p, text, tuple(warnings))


_UTF16_WITHOUT_BOM = (
    "looks like UTF-16 text without a byte-order mark; save it as UTF-8 (or as UTF-16 "
    "with a byte-order mark)"
)


def _looks_like_utf16(body: bytes) -> bool:
    """Most of the first bytes at even (or at odd) positions are NUL: ASCII-range text in
    UTF-16."""
    head = body[:4096]
    if len(head) < 4:
        return False
    even, odd = head[0::2], head[1::2]
    return max(even.count(0) / len(even), odd.count(0) / len(odd)) > 0.4


def _bad_bytes(body: bytes, codec: str, name: str, at: int) -> str:
    """The reason for a file that does not decode, with advice that fits what it is."""
    where = f"not valid {name} at byte {at}"
    if codec != "utf-8":
        return f"{where} (its byte-order mark says {name}; the file is damaged)"
    if _looks_like_utf16(body):
        return _UTF16_WITHOUT_BOM
    if b"\x00" in body[:4096]:
        return f"{where}: binary data, not text"
    bad = sum(
        1 for ch in body.decode("utf-8", errors="surrogateescape") if "\udc80" <= ch <= "\udcff"
    )
    if bad > _FEW_BAD_BYTES:
        return (
            f"{where} ({bad} invalid bytes): text in another encoding (Latin-1, "
            "Windows-1252...)? convert it to UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8"
        )
    return (
        f"{where} (use on_bad_bytes='replace'; on the command line, --on-bad-bytes "
        "replace, to store each invalid byte as U+FFFD)"
    )


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


@dataclass(frozen=True)
class Discovery:
    """Files found by :func:`discover_files` and what was left out, with reasons.

    ``skipped``: what is not read, by path, with the reason (another file type, not a
    regular file, hidden, a second name of a file already read); ``conflicts``: files
    whose document id another file already took (not loaded: an error for the caller);
    ``sources``: each document id's ``source``, the file's path relative to what was
    ingested (:func:`discover_files`), never the machine's own path to it.
    """

    files: list[tuple[Path, str]]
    skipped: dict[str, str]
    conflicts: dict[str, str]
    sources: dict[str, str] = field(default_factory=dict)


def discover_files(
    paths: Sequence[str | Path],
    *,
    root: str | Path | None = None,
    id_prefix: str | None = None,
) -> Discovery:
    """Expand files and directories into ``(file, document_id)`` pairs.

    A directory contributes its ``.txt``/``.md``/``.rst``/``.html``/``.pdf`` files
    (:data:`SUPPORTED_SUFFIXES`) recursively; the document id is the path relative to that
    directory (``"guide/intro.md"``), so ids do not depend on the working directory. With
    several roots, each id is prefixed by its root's name (``"d1/notes.md"``). A file named
    directly gets its file name as id.

    Whatever is not read is listed in ``skipped`` with its reason, the same for a file
    named directly as for one found in a folder: another file type, anything that is not
    a regular file (a named pipe is never opened), a broken link, and a link to a file
    this call already returns (it is read once, under the name of the file itself). In a
    folder, hidden files and folders (their names start with ``.``: editors' and tools'
    files such as ``.DS_Store`` or ``.git``) are skipped too; a hidden file named directly
    is read.

    The default ids depend on how the paths are spelled (one root or several). For ids
    that never change, name them explicitly:

    * ``root``: every id is the file's path relative to this directory, however the
      paths are given (``ingest A`` and ``ingest A B`` with ``root="."`` both store
      ``A/pump-manual.md``); a file outside ``root`` is a conflict.
    * ``id_prefix``: every id is ``id_prefix`` followed by the path relative to the root
      it was found under (no root name is added), e.g. ``"hr/"`` + ``"pump-manual.md"``.

    Both can be combined (the prefix goes first). Two files that would get the same id are
    never merged silently: the later one is listed in ``conflicts`` with the reason.

    Each file's ``source`` (:attr:`Discovery.sources`) names it relative to what was
    ingested, never by the machine's path to it (which a service would hand to every
    caller): a folder's files under the folder's name (``docs/guide/intro.md`` for the
    folder ``/srv/docs``), a file named directly by its name, and with ``root`` the path
    relative to the root. Two folders' files of one name thus keep sources of their own.

    Raises:
        DocumentReadError: a path that does not exist.
    """
    files: list[tuple[Path, str]] = []
    sources: dict[str, str] = {}
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
            label = f"{root.resolve().name}/" if root.resolve().name else ""
            prefix = label if several else ""
            named = [
                (f, prefix + f.relative_to(root).as_posix(), label + f.relative_to(root).as_posix())
                for f in _walk(root, skipped)
            ]
        elif root.exists() or root.is_symlink():
            named = [(root, root.name, root.name)]
        else:
            raise DocumentReadError(str(root), "no such file or directory")
        for f, doc_id, source in named:
            why = _not_read(f)
            if why is not None:
                skipped[str(f)] = why
                continue
            if base is not None:
                try:
                    doc_id = source = f.resolve().relative_to(base).as_posix()
                except ValueError:
                    conflicts[str(f)] = f"outside the root {str(base)!r}"
                    continue
            doc_id = (id_prefix or "") + doc_id
            if doc_id in seen and seen[doc_id].resolve() != f.resolve():
                conflicts[str(f)] = (
                    f"same document id {doc_id!r} as {str(seen[doc_id])!r}; ingest it "
                    "separately or rename it"
                )
                continue
            if doc_id not in seen:
                seen[doc_id] = f
                files.append((f, doc_id))
                sources[doc_id] = source
    return Discovery(_once_per_file(files, skipped), skipped, conflicts, sources)


def _walk(folder: Path, skipped: dict[str, str]) -> list[Path]:
    """Every entry under ``folder`` but folders, sorted, without descending into hidden
    folders or links to folders (each hidden folder and hidden file goes to
    ``skipped``)."""
    found: list[Path] = []
    for here, folders, names in os.walk(folder):
        at = Path(here)
        for name in folders:
            if name.startswith("."):
                skipped[str(at / name)] = "hidden folder (its name starts with '.')"
        folders[:] = [d for d in folders if not d.startswith(".")]
        for name in names:
            if name.startswith("."):
                skipped[str(at / name)] = (
                    "hidden file (its name starts with '.'; name it to read it)"
                )
            else:
                found.append(at / name)
    return sorted(found)


def _not_read(path: Path) -> str | None:
    """Why ``path`` is not read (None: it is), from its metadata only: nothing is opened,
    so a named pipe never blocks the ingest."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "a broken link" if path.is_symlink() else "no such file"
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if not stat.S_ISREG(mode):
        return f"not a regular file ({_SPECIAL.get(stat.S_IFMT(mode), 'a special file')})"
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        return f"unsupported file type {path.suffix or '(none)'!r}"
    return None


_SPECIAL = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
}


def _once_per_file(
    files: list[tuple[Path, str]], skipped: dict[str, str]
) -> list[tuple[Path, str]]:
    """``files`` with each file once: of the names that reach the same file (a link and
    its target), the file's own name is kept (else the first), the others are skipped."""
    by_target: dict[Path, list[int]] = {}
    for i, (f, _) in enumerate(files):
        by_target.setdefault(f.resolve(), []).append(i)
    dropped: set[int] = set()
    for indexes in by_target.values():
        if len(indexes) == 1:
            continue
        kept = next((i for i in indexes if not files[i][0].is_symlink()), indexes[0])
        for i in indexes:
            if i != kept:
                dropped.add(i)
                skipped[str(files[i][0])] = (
                    f"the same file as {str(files[kept][0])!r}, which this ingest reads "
                    f"(as document {files[kept][1]!r})"
                )
    return [entry for i, entry in enumerate(files) if i not in dropped]
