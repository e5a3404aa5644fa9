"""Lazy package exports (PEP 562), so that importing a package stays cheap.

``parrot-parents --help`` must not import torch, transformers or SQLAlchemy; a package's
``__init__`` therefore names what it exports and loads each name on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package that loads its exports on first use.

    Args:
        package: the package's ``__name__`` (for the error message).
        exports: exported name -> module that defines it.
        namespace: the package's ``globals()``; a loaded name is cached there.

    Returns:
        The ``(__getattr__, __dir__)`` pair to assign in the package's ``__init__``.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
