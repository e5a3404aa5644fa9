"""The migrations, the OpenAPI files and the inspector page ship in the wheel and run
from an installed copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from parrot_parents import migrations
from tests.conftest import REPO_ROOT

_SKIP = shutil.ignore_patterns(
    ".venv",
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    "runs",
    ".bench",
    "tests",
    "benchmarks",
    "examples",
    "docs",
)


def test_migrations_run_from_an_installed_wheel(tmp_path: Path, empty_dsn: str) -> None:
    src = tmp_path / "src"
    shutil.copytree(REPO_ROOT, src, symlinks=True, ignore=_SKIP)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("parrot_parents-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "parrot_parents/migrations/__init__.py",
        "parrot_parents/migrations/env.py",
        "parrot_parents/migrations/alembic.ini",
        "parrot_parents/migrations/script.py.mako",
        "parrot_parents/migrations/versions/0001_collections.py",
        "parrot_parents/migrations/versions/0002_bots.py",
        "parrot_parents/migrations/versions/0003_backfill_progress.py",
        "parrot_parents/migrations/versions/0004_search_mode.py",
        "parrot_parents/migrations/versions/0005_budgeted_limit.py",
        "parrot_parents/migrations/versions/0006_documents.py",
        "parrot_parents/migrations/versions/0007_rerank_candidates.py",
        "parrot_parents/migrations/versions/0008_trim.py",
        "parrot_parents/migrations/versions/0009_prf.py",
        "parrot_parents/server/openapi.yaml",
        "parrot_parents/server/openapi.json",
        "parrot_parents/server/ui/static/index.html",
        "parrot_parents/server/ui/static/inspector.js",
        "parrot_parents/server/ui/static/inspector.css",
    ):
        assert expected in names, expected

    site = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    code = (
        "import sys\n"
        "from parrot_parents import migrations\n"
        "from parrot_parents.server.openapi import shipped_yaml\n"
        "assert migrations.__file__.startswith(sys.argv[2]), migrations.__file__\n"
        "assert 'openapi: 3.1.0' in shipped_yaml()\n"
        "print(migrations.upgrade(sys.argv[1], collections=['from_wheel']))\n"
        "print(migrations.current(sys.argv[1]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-c", code, empty_dsn, str(site)],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    assert out.stdout.split() == ["['from_wheel']", migrations.heads()[0]]
