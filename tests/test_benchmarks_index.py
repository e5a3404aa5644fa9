"""The benchmark suite's index: every benchmark is listed, registered, documented and
importable without running; a child process runs this tree's benchmarks on another
checkout's product code.

Nothing here runs a benchmark: the modules are imported, never their ``main``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from benchmarks.common import child
from benchmarks.registry import BENCHMARKS, GROUPS
from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "benchmarks"
#: The package's own modules beside the groups: the shared code and the entry point.
TOP_LEVEL = {"__init__", "__main__", "common", "registry"}
#: An edit of ``sys.path``: modules find each other as a package, never by path.
SYS_PATH_EDIT = re.compile(r"sys\.path\s*(\.\w+\(|\[|\+?=)")

# Imports every registered module in a fresh interpreter where parsing arguments, running
# an event loop or starting a process raises: a module that runs anything on import fails.
PROBE = """
import argparse, asyncio, contextlib, importlib, io, json, subprocess, sys

def refuse(*args, **kwargs):
    raise RuntimeError("ran at import")

argparse.ArgumentParser.parse_args = refuse
asyncio.run = refuse
subprocess.Popen.__init__ = refuse
printed = io.StringIO()
mains = {}
with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
    for module in sys.argv[1:]:
        mains[module] = callable(getattr(importlib.import_module(module), "main", None))
print(json.dumps({"mains": mains, "printed": printed.getvalue()}))
"""


def _listed() -> dict[str, tuple[str, str]]:
    """``python -m benchmarks list`` as ``{name: (group, purpose)}`` (header skipped)."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks", "list"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    header, *lines = out.splitlines()
    assert header.split() == ["name", "group", "purpose"]
    rows = {}
    for line in lines:
        name, group, purpose = line.split(maxsplit=2)
        rows[name] = (group, purpose.strip())
    return rows


def test_list_prints_every_registered_benchmark_with_its_purpose() -> None:
    listed = _listed()
    assert set(listed) == {b.name for b in BENCHMARKS}
    for bench in BENCHMARKS:
        group, purpose = listed[bench.name]
        assert group == bench.group
        assert purpose == bench.purpose and purpose
    assert len({b.name for b in BENCHMARKS}) == len(BENCHMARKS)


def test_every_benchmark_module_is_registered() -> None:
    """A module of a group is a benchmark unless its name, or a package above it, starts
    with ``_`` (a benchmark's own parts); beside the groups sit only the shared modules."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if len(parts) == 1:
            assert parts[0] in TOP_LEVEL, f"{path}: shared code goes in benchmarks/common.py"
            continue
        assert parts[0] in GROUPS, f"{path} is in no group"
        if parts[-1] != "__init__" and not any(p.startswith("_") for p in parts):
            found.add(".".join(("benchmarks", *parts)))
    assert found == {b.module for b in BENCHMARKS}


def test_every_registered_module_imports_without_running() -> None:
    modules = [b.module for b in BENCHMARKS]
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *modules],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["mains"] == dict.fromkeys(modules, True)
    assert result["printed"] == ""


def test_the_readme_and_the_package_have_no_strays() -> None:
    readme = (PACKAGE / "README.md").read_text(encoding="utf-8")
    for bench in BENCHMARKS:
        assert f"`{bench.name}`" in readme, f"{bench.name} is not in benchmarks/README.md"
    for path in PACKAGE.rglob("*.py"):
        assert not SYS_PATH_EDIT.search(path.read_text(encoding="utf-8")), path


def test_a_child_runs_these_benchmarks_on_another_checkouts_code(tmp_path: Path) -> None:
    # Another checkout with both packages at its root, as this one has.
    other = tmp_path / "other"
    for package in ("parrot_parents", "benchmarks"):
        (other / package).mkdir(parents=True)
        (other / package / "__init__.py").write_text("")
    command, env = child("benchmarks.latency.scale", ["--help"], other)
    assert command == [sys.executable, "-P", "-m", "benchmarks", "run", "scale", "--help"]
    probe = "import benchmarks, parrot_parents; print(benchmarks.__file__, parrot_parents.__file__)"
    out = subprocess.run(
        [sys.executable, "-P", "-c", probe],
        cwd=REPO_ROOT,  # the working directory holds this tree's parrot_parents too
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert Path(out[0]).resolve() == PACKAGE / "__init__.py"
    assert Path(out[1]).resolve() == (other / "parrot_parents" / "__init__.py").resolve()

    command, env = child("benchmarks.latency.scale", [], None)
    out = subprocess.run(
        [sys.executable, "-P", "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    assert Path(out[0]).resolve() == PACKAGE / "__init__.py"
    assert Path(out[1]).resolve() == REPO_ROOT / "parrot_parents" / "__init__.py"
