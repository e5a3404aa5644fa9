"""One value per event loop, for what asyncio binds to the loop that made it: connection
pools, locks.

A store is used from the caller's loop, from the package's loop thread behind every
``*_sync`` twin (:mod:`parrot_parents.sync`) and from each ``asyncio.run``; a pool used from
another loop than its own fails and breaks its connection. :class:`PerLoop` holds one value
per loop (a closed loop's value is dropped unclosed); :func:`release_all` releases each on
its own loop, awaiting only the running loop and the package's loop thread, since another
loop may be blocked in a ``*_sync`` call waiting on this one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Generic, TypeVar

from parrot_parents.sync import is_package_loop

__all__ = ["PerLoop", "release_all", "running_loop"]

T = TypeVar("T")


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, else None."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class PerLoop(Generic[T]):
    """``make()``'s value for each event loop, made on first use there. Thread-safe."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._values: dict[asyncio.AbstractEventLoop, T] = {}
        self._lock = threading.Lock()

    def get(self, loop: asyncio.AbstractEventLoop) -> T:
        """The value of ``loop`` (made now when it has none)."""
        with self._lock:
            for closed in [known for known in self._values if known.is_closed()]:
                del self._values[closed]
            value = self._values.get(loop)
            if value is None:
                value = self._values[loop] = self._make()
            return value

    def put(self, loop: asyncio.AbstractEventLoop, value: T) -> None:
        """Make ``value`` the value of ``loop``."""
        with self._lock:
            self._values[loop] = value

    def take_all(self) -> list[tuple[asyncio.AbstractEventLoop, T]]:
        """Every ``(loop, value)``, forgotten here (for :func:`release_all`)."""
        with self._lock:
            items = list(self._values.items())
            self._values.clear()
            return items


async def release_all(
    items: Iterable[tuple[asyncio.AbstractEventLoop | None, T]],
    release: Callable[[T], Coroutine[Any, Any, None]],
) -> None:
    """``release(value)`` for each item, on the item's loop (see the module docstring).

    An item of no loop, or of a closed loop, is dropped unreleased.
    """
    here = running_loop()
    for loop, value in items:
        if loop is here:
            await release(value)
        elif loop is None or loop.is_closed():
            continue
        elif is_package_loop(loop):
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(release(value), loop))
        else:
            asyncio.run_coroutine_threadsafe(release(value), loop)
