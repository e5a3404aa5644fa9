"""Run the package's coroutines from code that has no event loop (scripts, notebooks
without top-level await, WSGI apps).

Every call goes to one event loop running in a daemon thread. Connection pools belong to
the loop that opened them, so one object (a store, a bot) must be used either through the
``*_sync`` methods only, or from your own event loop only, not both.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["package_loop", "run_sync"]

T = TypeVar("T")

_LOCK = threading.Lock()
_LOOP: asyncio.AbstractEventLoop | None = None


def _loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    with _LOCK:
        if _LOOP is None or _LOOP.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="parrot-parents-sync", daemon=True
            ).start()
            _LOOP = loop
        return _LOOP


def package_loop() -> asyncio.AbstractEventLoop:
    """The package's background event loop (started on first use)."""
    return _loop()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the package's background loop and return its result (or raise).

    Raises:
        RuntimeError: called from a coroutine running on that same loop (it would
            deadlock); use ``await`` there instead.
    """
    loop = _loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("run_sync() called from the package's own loop: use await")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()
