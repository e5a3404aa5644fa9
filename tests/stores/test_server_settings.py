"""The embedded server's size rule (:mod:`parrot_parents.embedded.settings`); a real
server started with it is in ``test_embedded_lifecycle``."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from parrot_parents.embedded.settings import (
    MAX_SHARED_BUFFERS_MB,
    MIN_SHARED_BUFFERS_MB,
    SETTINGS_FILE,
    shared_buffers_mb,
    write_settings,
)

GB = 2**30


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**44), st.integers(min_value=0, max_value=2**44))
def test_shared_buffers_is_bounded_and_never_falls_as_memory_grows(a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert MIN_SHARED_BUFFERS_MB <= shared_buffers_mb(low) <= shared_buffers_mb(high)
    assert shared_buffers_mb(high) <= MAX_SHARED_BUFFERS_MB


def test_an_eighth_of_memory_between_the_bounds() -> None:
    assert shared_buffers_mb(512 * 2**20) == 128  # a small machine keeps initdb's size
    assert shared_buffers_mb(16 * GB) == 2048
    assert shared_buffers_mb(256 * GB) == 4096


def test_settings_are_written_and_included_once(tmp_path: Path) -> None:
    conf = tmp_path / "postgresql.conf"
    conf.write_text("shared_buffers = 128MB\n")
    assert write_settings(tmp_path, 16 * GB)
    assert not write_settings(tmp_path, 16 * GB)  # nothing to change the second time
    assert "shared_buffers = '2048MB'" in (tmp_path / SETTINGS_FILE).read_text()
    assert conf.read_text().count(f"include_if_exists '{SETTINGS_FILE}'") == 1
    # The include comes after initdb's own line, so it overrides it.
    assert conf.read_text().index("include_if_exists") > conf.read_text().index("128MB")
    assert write_settings(tmp_path, 64 * GB)
    assert "shared_buffers = '4096MB'" in (tmp_path / SETTINGS_FILE).read_text()


def test_io_method_is_sync_where_the_server_has_the_setting(tmp_path: Path) -> None:
    (tmp_path / "postgresql.conf").write_text("")
    for version, has in (("17", False), ("18", True), ("not a version", False)):
        (tmp_path / "PG_VERSION").write_text(f"{version}\n")
        write_settings(tmp_path, 16 * GB)
        assert ("io_method = 'sync'" in (tmp_path / SETTINGS_FILE).read_text()) is has
