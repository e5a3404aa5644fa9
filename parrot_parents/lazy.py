"""Lazy package exports (PEP 562), so that importing a package stays cheap.

``parrot-parents --help`` must not import torch, transformers or SQLAlchemy; a package's
``__init__`` therefore imports what it exports only under ``if TYPE_CHECKING:``, where type
checkers read them, and :func:`lazy_exports` reads the same imports from the ``__init__``'s
source to load each name on first use. The names are written once, beside ``__all__``; the
scheme is that of scientific Python's SPEC 1 (``lazy_loader.attach_stub``), with the imports
in the ``__init__`` instead of a stub file.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


@functools.cache
def _exports(package: str) -> dict[str, str]:
    """Exported name -> module, from the ``from module import name`` statements under the
    top-level ``if TYPE_CHECKING:`` of ``package``'s ``__init__``."""
    import ast  # not at import time: ``import parrot_parents`` stays cheap

    source = sys.modules[package].__loader__.get_source(package)  # type: ignore[union-attr]
    if source is None:  # an install of bytecode only (a frozen app) has no imports to read
        raise ImportError(f"{package}: lazy exports need the package's .py source")
    exports: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    exports.update({alias.name: stmt.module for alias in stmt.names})
    return exports


def lazy_exports(
    package: str, namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package that loads its exports on first use.

    Args:
        package: the package's ``__name__``.
        namespace: the package's ``globals()``; a loaded name is cached there.

    Returns:
        The ``(__getattr__, __dir__)`` pair to assign in the package's ``__init__``.
    """

    def __getattr__(name: str) -> Any:
        module = _exports(package).get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *_exports(package)})

    return __getattr__, __dir__
