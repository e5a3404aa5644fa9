"""The layers are a contract: no module imports from a layer above it, and no cycles.

The layers themselves are checked by import-linter (``lint-imports`` in CI, contracts in
pyproject.toml); this test adds what a layers contract cannot see: cycles inside a layer,
counting the imports made for type checking only (a module that names another in its
annotations depends on it as much as one that calls it).

The graphs are built without grimp's cache: it keeps one record of file times for both
settings of ``exclude_type_checking_imports``, so a cached graph of one setting can be stale.
"""

from __future__ import annotations

import grimp


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for nxt in sorted(graph.find_modules_directly_imported_by(module)):
            if not nxt.startswith("parrot_parents"):
                continue
            if state.get(nxt) == 1:
                found.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[module] = 2

    for module in sorted(graph.modules):
        if module.startswith("parrot_parents") and module not in state:
            visit(module)
    return found


def test_no_import_cycles_not_even_through_type_checking_imports() -> None:
    graph = grimp.build_graph("parrot_parents", exclude_type_checking_imports=False, cache_dir=None)
    assert _cycles(graph) == []


def test_the_query_core_imports_no_bot_llm_or_http() -> None:
    graph = grimp.build_graph("parrot_parents", exclude_type_checking_imports=True, cache_dir=None)
    for edge in ("parrot_parents.bots", "parrot_parents.llm", "parrot_parents.server"):
        assert not graph.chain_exists(
            importer="parrot_parents.retrieval", imported=edge, as_packages=True
        ), edge
