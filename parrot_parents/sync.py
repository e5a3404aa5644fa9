"""Run the package's coroutines from code that has no event loop, or inside one that cannot
``await``.

Every ``*_sync`` twin runs its coroutine on one private event loop in a daemon thread (the
package's loop) and blocks the calling thread until it ends, so it may be called anywhere;
a store keeps connection pools per event loop, so twins, ``await`` and ``asyncio.run`` mix
on one object (README, "Use it from Python"). Calling a twin from a coroutine running
on the package's loop itself would wait for itself: :func:`run_sync` raises
``RuntimeError`` telling to ``await``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["is_package_loop", "package_loop", "run_sync", "sync_twin"]

T = TypeVar("T")
S = TypeVar("S")
P = ParamSpec("P")

_LOCK = threading.Lock()
_LOOP: asyncio.AbstractEventLoop | None = None


def package_loop() -> asyncio.AbstractEventLoop:
    """The package's background event loop (started on first use)."""
    global _LOOP
    with _LOCK:
        if _LOOP is None or _LOOP.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="parrot-parents-sync", daemon=True
            ).start()
            _LOOP = loop
        return _LOOP


def is_package_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is the package's background loop (without starting it)."""
    return loop is _LOOP


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the package's background loop and return its result (or raise).

    Safe with or without a running loop in the calling thread (see the module docstring).

    Raises:
        RuntimeError: called from a coroutine running on that same loop (it would
            deadlock); use ``await`` there instead.
    """
    loop = package_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("run_sync() called from the package's own loop: use await")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def sync_twin(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], T]:
    """The ``*_sync`` twin of an async method: it calls the method of the same name on
    its object (an override included) through :func:`run_sync`."""
    name = method.__name__

    def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        bound: Callable[P, Coroutine[Any, Any, T]] = getattr(self, name)
        return run_sync(bound(*args, **kwargs))

    twin.__name__ = twin.__qualname__ = f"{name}_sync"
    twin.__doc__ = f":meth:`{name}` from code without an event loop (:mod:`parrot_parents.sync`)."
    return twin
