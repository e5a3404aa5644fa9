"""``parrot-parents doctor``: the server, its extensions, the CPU and the embedded server's
records, as found."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parrot_parents.cli.main import main
from parrot_parents.embedded.diagnosis import cpu_features
from tests.conftest import REPO_ROOT


def test_doctor_on_a_server_given_by_dsn(pg_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--dsn", pg_dsn, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["server"]["where"] == "external"
    assert report["server"]["version"]
    assert report["extensions"]["vector"]["library"].startswith("0.")
    assert report["problems"] == []
    assert main(["doctor", "--dsn", pg_dsn]) == 0
    text = capsys.readouterr().out
    assert "vector: library" in text and text.rstrip().endswith("healthy")
    # What a new collection would rank BM25 with on this server.
    assert report["server"]["lexical_backend"] in ("pg_textsearch", "sql")
    assert f"lexical backend of new collections: {report['server']['lexical_backend']}" in text


def test_doctor_names_the_partitioned_collections(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from parrot_parents.stores.postgres import PgVectorStore
    from tests.conftest import unique_table

    table = unique_table("doc")
    store = PgVectorStore(dsn=pg_dsn, table=table, dimension=384, partition_key="tenant")

    async def make(drop: bool) -> None:
        await (store.drop() if drop else store.connect())
        await store.close()

    asyncio.run(make(False))
    try:
        assert main(["doctor", "--dsn", pg_dsn, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["server"]["partitioned"][f"public.{table}"] == "tenant"
        assert main(["doctor", "--dsn", pg_dsn]) == 0
        assert f"public.{table} by 'tenant'" in capsys.readouterr().out
    finally:
        asyncio.run(make(True))


def test_doctor_on_the_embedded_server_reports_extensions_and_dead_pids(server_dir: Path) -> None:
    data = server_dir / "pgdata"
    env = {k: v for k, v in os.environ.items() if k != "PARROT_PARENTS_DSN"}
    env["PARROT_PARENTS_DATA_DIR"] = str(data)

    def doctor() -> dict:  # type: ignore[type-arg]
        done = subprocess.run(
            [sys.executable, "-m", "parrot_parents", "doctor", "--json"],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO_ROOT,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    first = doctor()
    assert first["server"]["where"] == "embedded"
    assert first["embedded"]["data_dir"] == str(data.resolve())
    assert first["embedded"]["data_dir_reason"] == "PARROT_PARENTS_DATA_DIR names it"
    from parrot_parents.cli.doctor import format_report

    assert "  chosen because: PARROT_PARENTS_DATA_DIR names it" in format_report(first)
    assert first["embedded"]["pg_version"] == first["server"]["version"].split(".")[0]
    # The embedded server carries the BM25 index, preloaded, beside pgvector.
    assert first["extensions"]["pg_textsearch"]["library"]
    assert first["extensions"]["pg_textsearch"]["preloaded"] is True
    assert first["extensions"]["vector"]["library"]

    # A process killed with -9 leaves its pid behind; doctor names it as dead.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (data / ".handle_pids.json").write_text(json.dumps([gone.pid]))
    second = doctor()
    assert second["embedded"]["handles"] == [{"pid": gone.pid, "alive": False}]
    assert any(str(gone.pid) in note for note in second["notes"])
    assert second["problems"] == []
    # Its own exit stopped the server, and the dead pid is gone.
    assert json.loads((data / ".handle_pids.json").read_text()) == []


def test_cpu_features_read_the_flags(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("model name\t: Some CPU\nflags\t\t: fpu sse4_2 avx avx2 fma\n")
    found = cpu_features(info)
    assert found["model"] == "Some CPU"
    assert found["flags"]["avx2"] is True
    assert found["flags"]["avx512f"] is False
    assert cpu_features(tmp_path / "missing")["flags"] is None


def test_the_data_directory_and_why_it_is_that_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from parrot_parents.embedded.server import DATA_DIR_ENV, data_dir_reason, default_data_dir

    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "pgdata"))
    assert default_data_dir() == tmp_path / "pgdata"
    assert data_dir_reason() == f"{DATA_DIR_ENV} names it"
    monkeypatch.delenv(DATA_DIR_ENV)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    reason = data_dir_reason()
    if os.geteuid() == 0:
        # Root's directory is the machine's, whatever HOME is.
        assert default_data_dir() == Path("/var/lib/parrot-parents/pgdata")
        assert reason.startswith("this process runs as root: the machine-wide directory")
        assert "whatever HOME is" in reason and DATA_DIR_ENV in reason
    else:
        assert default_data_dir().is_relative_to(tmp_path / "home")
        assert reason.startswith("the per-user data directory of this user")
