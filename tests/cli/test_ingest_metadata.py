"""``ingest --metadata KEY=VALUE`` and ``--partition-key``: parsed and checked before any
model loads or anything connects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parrot_parents.cli.ingest import document_metadata
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.backends import open_store


def test_values_read_as_json_when_they_parse_else_as_strings() -> None:
    assert document_metadata(["tenant=acme", "year=2024", "public=true", "code=007x"]) == {
        "tenant": "acme",
        "year": 2024,
        "public": True,
        "code": "007x",
    }
    assert document_metadata(['tenant="2024"', "note=a=b"]) == {"tenant": "2024", "note": "a=b"}
    # NaN and Infinity are not JSON, so they are names like any other.
    assert document_metadata(["a=NaN", "b=Infinity", "c=-Infinity", "d=1e999"]) == {
        "a": "NaN",
        "b": "Infinity",
        "c": "-Infinity",
        "d": "1e999",
    }
    # So is an integer no filter could compare.
    assert document_metadata([f"id={2**64}", f"n={2**63 - 1}", f"m={-(2**63)}"]) == {
        "id": str(2**64),
        "n": 2**63 - 1,
        "m": -(2**63),
    }


@pytest.mark.parametrize(
    ("pair", "message"),
    [("tenant", "KEY=VALUE"), ("=acme", "KEY=VALUE"), ("document_id=x", "hierarchy writes")],
)
def test_a_bad_pair_is_refused(pair: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        document_metadata([pair])


def test_a_key_given_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="'tenant' is given twice"):
        document_metadata(["tenant=acme", "tenant=globex"])


def test_a_bad_partition_key_is_refused_for_either_store_before_anything_connects() -> None:
    for spec, dsn in (("milvus:./never.db", None), (None, "postgresql://u@h/db")):
        with pytest.raises(ConfigurationError, match="partition_key"):
            open_store(spec, dsn=dsn, partition_key="$bad")


def test_ingest_gives_a_partition_key_and_stamps_the_value(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from parrot_parents.cli.main import main
    from parrot_parents.stores.postgres.collections.partitions import partition_index_name
    from tests.conftest import unique_table

    (tmp_path / "pay.txt").write_text("Salaries are paid on the last working day of each month.")
    table = unique_table("ing")
    common = ["--dsn", pg_dsn, "--collection", table]
    try:
        assert (
            main(
                [
                    "ingest",
                    str(tmp_path),
                    *common,
                    "--partition-key",
                    "tenant",
                    "--metadata",
                    "tenant=acme",
                ]
            )
            == 0
        )
        capsys.readouterr()
        assert main(["collections", "--dsn", pg_dsn, "--json"]) == 0
        found = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
        assert found[table]["partition_key"] == "tenant"
        assert main(["documents", table, "--dsn", pg_dsn, "--json"]) == 0
        capsys.readouterr()
        code = main(
            ["ask", "When are salaries paid?", *common, "--filter", '{"tenant": "acme"}', "--json"]
        )
        assert code == 0
        answer = json.loads(capsys.readouterr().out)
        assert answer["meta"]["filter_plan"]["partition_index"] == partition_index_name(
            table, "tenant", "acme"
        )
    finally:
        main(["drop", table, "--yes", "--dsn", pg_dsn])


def test_a_file_of_the_same_name_from_another_tenant_does_not_replace_the_first(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from parrot_parents.cli.main import main
    from tests.conftest import unique_table

    for tenant, day in (("acme", "last working day"), ("globex", "fifteenth")):
        (tmp_path / tenant).mkdir()
        (tmp_path / tenant / "pay.txt").write_text(f"Salaries are paid on the {day}.")
    (tmp_path / "globex" / "leave.txt").write_text("Leave is booked in the portal.")
    table = unique_table("ingmv")
    common = ["--dsn", pg_dsn, "--collection", table]
    key = ["--partition-key", "tenant"]
    try:
        acme = ["ingest", str(tmp_path / "acme"), *common, *key, "--metadata", "tenant=acme"]
        assert main(acme) == 0
        capsys.readouterr()
        globex = ["ingest", str(tmp_path / "globex"), *common, *key, "--metadata", "tenant=globex"]
        assert main(globex) == 1
        err = capsys.readouterr().err
        assert "'pay.txt' is stored under tenant 'acme'" in err and "--id-prefix" in err
        # Acme's document is kept; globex's other file is written.
        assert main(["documents", table, "--dsn", pg_dsn, "--json"]) == 0
        stored = {d["document_id"] for d in json.loads(capsys.readouterr().out)}
        assert stored == {"pay.txt", "leave.txt"}
        ask = ["ask", "When are salaries paid?", *common, "--json"]
        assert main([*ask, "--filter", '{"tenant": "acme"}']) == 0
        assert "last working day" in json.loads(capsys.readouterr().out)["context"]
        # Each tenant's ids of its own store both.
        prefixed = [*globex, "--id-prefix", "globex/"]
        assert main(prefixed) == 0
        capsys.readouterr()
        assert main([*ask, "--filter", '{"tenant": "globex"}']) == 0
        assert "fifteenth" in json.loads(capsys.readouterr().out)["context"]
    finally:
        main(["drop", table, "--yes", "--dsn", pg_dsn])


def test_a_collection_given_its_partition_key_hears_so_and_an_unindexed_value_is_warned(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from parrot_parents.cli.main import main
    from tests.conftest import unique_table

    for name in ("pay", "leave", "travel", "gifts", "meals", "phones"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.txt").write_text(f"The {name} policy of the company.")
    table = unique_table("ingnote")
    common = ["--dsn", pg_dsn, "--collection", table]
    key = ["--partition-key", "tenant"]

    def ingest(name: str, *more: str) -> str:
        assert main(["ingest", str(tmp_path / name), *common, *more]) == 0
        return capsys.readouterr().err

    try:
        assert "partitioned" not in ingest("pay")
        err = ingest("leave", *key, "--metadata", "tenant=acme")
        assert (
            f"note: collection {table!r} is now partitioned by 'tenant', for good: the key is "
            "recorded with the collection and can be neither removed nor changed"
        ) in err
        assert "warning" not in err
        assert "partitioned" not in ingest("leave", *key, "--metadata", "tenant=acme")
        for name, given in (("travel", "1.5"), ("gifts", "null")):
            err = ingest(name, *key, "--metadata", f"tenant={given}")
            assert f"warning: tenant {given} gets no index of its own: only a string" in err
        # The collection's own key is checked as well when the command does not name it.
        err = ingest("meals", "--metadata", "tenant=2.5")
        assert "warning: tenant 2.5 gets no index of its own" in err
        err = ingest("phones", *key)
        assert "without --metadata tenant=VALUE: these documents carry no value" in err
    finally:
        main(["drop", table, "--yes", "--dsn", pg_dsn])


def test_ingest_gives_filter_keys_and_collections_lists_them(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ingest --filter-key`` (repeatable) gives the collection those keys, which the
    listing shows in text and JSON; a range on one is then planned from an estimate."""
    from parrot_parents.cli.main import main
    from tests.conftest import unique_table

    (tmp_path / "pay.txt").write_text("Salaries are paid on the last working day of each month.")
    table = unique_table("ing")
    common = ["--dsn", pg_dsn, "--collection", table]
    try:
        args = ["ingest", str(tmp_path), *common, "--metadata", "year=2024"]
        assert main([*args, "--filter-key", "year", "--filter-key", "dept,a"]) == 0
        capsys.readouterr()
        assert main(["collections", "--dsn", pg_dsn, "--json"]) == 0
        found = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
        assert found[table]["filter_keys"] == ["dept,a", "year"]
        assert main(["collections", "--dsn", pg_dsn]) == 0
        listing = capsys.readouterr().out
        header, line = listing.splitlines()[0], next(x for x in listing.splitlines() if table in x)
        assert "FILTER_KEYS" in header
        assert line.rstrip().endswith('"dept,a",year')
        question = ["ask", "When are salaries paid?", *common, "--json"]
        assert main([*question, "--filter", '{"year": {"$gte": 2020}}']) == 0
        meta = json.loads(capsys.readouterr().out)["meta"]
        assert meta["filter_plan"]["sampled"] is False
        assert meta["children"], "the range keeps the document's children"
    finally:
        main(["drop", table, "--yes", "--dsn", pg_dsn])


def test_filter_keys_are_refused_with_milvus_before_anything_connects() -> None:
    with pytest.raises(ConfigurationError, match="filter keys are for PostgreSQL"):
        open_store("milvus:./never.db", filter_keys=["year"])


def test_filter_keys_lists_and_adds_keys_of_an_existing_collection(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``filter-keys NAME [KEY...]`` adds the keys a collection lacks and prints them all;
    a missing collection is an error (never created), a bad key is refused before
    anything connects."""
    from parrot_parents.cli.main import main
    from tests.conftest import unique_table

    (tmp_path / "pay.txt").write_text("Salaries are paid on the last working day of each month.")
    table = unique_table("fk")
    try:
        assert main(["ingest", str(tmp_path), "--dsn", pg_dsn, "--collection", table]) == 0
        capsys.readouterr()
        assert main(["filter-keys", table, "--dsn", pg_dsn]) == 0
        assert "no filter keys" in capsys.readouterr().out
        assert main(["filter-keys", table, "year", "dept", "--dsn", pg_dsn]) == 0
        assert capsys.readouterr().out.split() == ["dept", "year"]
        assert main(["filter-keys", table, "year", "--dsn", pg_dsn, "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        # One document of a few children: no value keeps enough for a graph.
        assert listed["filter_keys"] == ["dept", "year"] and listed["value_graphs"] == {}
        missing = unique_table("none")
        assert main(["filter-keys", missing, "year", "--dsn", pg_dsn]) != 0
        assert missing in capsys.readouterr().err
        assert main(["collections", "--dsn", pg_dsn, "--json"]) == 0
        names = {c["name"] for c in json.loads(capsys.readouterr().out)}
        assert missing not in names
        assert (
            main(["filter-keys", table, "$year", "--dsn", "postgresql://u@nowhere.invalid/x"]) != 0
        )
        assert "filter key" in capsys.readouterr().err
    finally:
        main(["drop", table, "--yes", "--dsn", pg_dsn])
