"""Replies of the model, cached by (model, prompt hash), so a re-ingest pays nothing.

One SQLite file, by default ``<user cache dir>/parrot-parents/model-replies.sqlite3``; only
usable replies are stored, so a failed one is asked again (docs/strategies.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["PromptCache", "default_cache_path", "prompt_sha256"]


def default_cache_path() -> Path:
    """``<user cache dir>/parrot-parents/model-replies.sqlite3``."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("parrot-parents")) / "model-replies.sqlite3"


def prompt_sha256(messages: Sequence[Mapping[str, str]]) -> str:
    """Hex sha256 of the messages as sent (role and content, in order)."""
    canonical = json.dumps([dict(m) for m in messages], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class PromptCache:
    """A persistent map ``(model, prompt sha256) -> reply text``.

    Args:
        path: the SQLite file (created with its folder when missing); None for
            :func:`default_cache_path`.

    Reads and writes run in a worker thread (:func:`asyncio.to_thread`), one at a time.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS replies (model TEXT NOT NULL,"
                " prompt_sha256 TEXT NOT NULL, reply TEXT NOT NULL,"
                " PRIMARY KEY (model, prompt_sha256))"
            )
            conn.commit()
            self._conn = conn
        return self._conn

    def _get(self, model: str, digest: str) -> str | None:
        with self._lock:
            row = (
                self._connect()
                .execute(
                    "SELECT reply FROM replies WHERE model = ? AND prompt_sha256 = ?",
                    (model, digest),
                )
                .fetchone()
            )
        return None if row is None else str(row[0])

    def _put(self, model: str, digest: str, reply: str) -> None:
        with self._lock:
            conn = self._connect()
            conn.execute(
                "INSERT OR REPLACE INTO replies (model, prompt_sha256, reply) VALUES (?, ?, ?)",
                (model, digest, reply),
            )
            conn.commit()

    async def get(self, model: str, digest: str) -> str | None:
        """The cached reply, or None."""
        return await asyncio.to_thread(self._get, model, digest)

    async def put(self, model: str, digest: str, reply: str) -> None:
        """Store a usable reply."""
        await asyncio.to_thread(self._put, model, digest, reply)

    def close(self) -> None:
        """Close the file. Safe to call twice."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
