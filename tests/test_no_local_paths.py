"""The repository names no developer's scratch paths: reports and docs name the code they
measured by its commit, and write placeholders (``<older checkout>``, ``<data dir>``) for
paths that are the reader's own."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from benchmarks.common import LOCAL_FILE, OTHER_CHECKOUT, command
from tests.conftest import REPO_ROOT

#: What the docs, benchmarks, README and package may not name: a path under a machine's
#: scratch or home folders, or a git worktree. A placeholder in angle brackets
#: (``/tmp/<name>``) is a reader's own path and allowed.
LOCAL_PATH = re.compile(r"(?<![\w.])/(?:tmp|work|home|Users)/(?!<)|\bworktrees?\b", re.I)

CHECKED = ("docs", "benchmarks", "README.md", "parrot_parents")


def _tracked() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--", *CHECKED],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [name for name in out.decode().split("\0") if name]


def test_no_tracked_file_names_a_local_path() -> None:
    found = []
    for name in _tracked():
        try:
            text = (REPO_ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # a binary file (a figure), a link to a folder, a file deleted here
        for number, line in enumerate(text.splitlines(), 1):
            if LOCAL_PATH.search(line):
                found.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not found, "local paths (name the commit, or write <older checkout>):\n" + "\n".join(
        found
    )


@pytest.mark.parametrize(
    "line",
    [
        "_Code measured: `/work/main @ 0d008ea`._",
        "export PARROT_PARENTS_DATA_DIR=/tmp/pg-scale-bench",
        "old (`/home/me/old`)",
        "run it in the worktree",
    ],
)
def test_the_pattern_finds_scratch_paths(line: str) -> None:
    assert LOCAL_PATH.search(line)


@pytest.mark.parametrize(
    "line",
    [
        "_Code measured: commit 0d008ea._",
        "export PARROT_PARENTS_DATA_DIR=<data dir>",
        "Path(tempfile.gettempdir()) / 'x'",
        "read /proc/cpuinfo",
        "work/tree of the repository",
    ],
)
def test_the_pattern_allows_placeholders_and_other_paths(line: str) -> None:
    assert not LOCAL_PATH.search(line)


def test_a_report_command_shows_no_checkout_path() -> None:
    shown = command("benchmarks.latency.scale", ["--src", "/some/old/checkout", "--rebuild"])
    assert shown == f"python -m benchmarks run scale --src {OTHER_CHECKOUT} --rebuild"
    assert "/some/old" not in command("benchmarks.latency.round_trips", ["--src=/some/old"])


def test_a_report_command_shows_no_other_local_path(tmp_path: Path) -> None:
    report = str(tmp_path / "x.md")
    shown = command("benchmarks.latency.checkouts", ["--report", report, "--queries", "9"])
    assert shown == f"python -m benchmarks run checkouts --report {LOCAL_FILE} --queries 9"
    assert command("benchmarks.latency.checkouts", [f"--report={report}"]).endswith(
        f"--report={LOCAL_FILE}"
    )
    assert not LOCAL_PATH.search(shown)
