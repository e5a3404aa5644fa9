"""Registries: type names to classes; entry points extend them; rows never name imports."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from parrot_parents.bots.registries import Registries, default_registries
from parrot_parents.bots.settings import validate_bot
from parrot_parents.errors import BotConfigError, ConfigurationError
from parrot_parents.plugins import PARENT_SEARCHERS_GROUP, RERANKERS_GROUP, Registry
from parrot_parents.rerankers.abstract import AbstractReranker
from parrot_parents.rerankers.cross_encoder import CrossEncoderReranker
from parrot_parents.stores.parents.abstract import AbstractParentSearcher
from parrot_parents.stores.parents.in_table import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore

PLUGIN = """
from pathlib import Path
from parrot_parents.rerankers.abstract import AbstractReranker

Path({sentinel!r}).write_text("imported")


class ReverseReranker(AbstractReranker):
    type_name = "reverse"

    def __init__(self, depth: int = 2, label: str = "r") -> None:
        self.depth = depth
        self.label = label

    @property
    def model_name(self) -> str:
        return "reverse"

    async def score(self, query, documents):
        return [float(-i) for i, _ in enumerate(documents)]

    def to_dict(self):
        return {{"type": "reverse", "depth": self.depth, "label": self.label}}
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed distribution declaring a reranker entry point (a dist-info on sys.path)."""
    sentinel = tmp_path / "imported.txt"
    module = f"pp_plugin_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(PLUGIN.format(sentinel=str(sentinel)))
    info = tmp_path / "pp_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pp-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            f"""
            [{RERANKERS_GROUP}]
            reverse = {module}:ReverseReranker
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield sentinel
    sys.modules.pop(module, None)


def _fresh() -> Registries:
    defaults = default_registries()
    return Registries(
        parent_searchers=Registry(
            "parent searcher",
            PARENT_SEARCHERS_GROUP,
            AbstractParentSearcher,
            {
                "in_table": (
                    InTableParentSearcher,
                    defaults.parent_searchers.config_model("in_table"),
                )
            },
        ),
        rerankers=Registry(
            "reranker",
            RERANKERS_GROUP,
            AbstractReranker,
            {
                "cross_encoder": (
                    CrossEncoderReranker,
                    defaults.rerankers.config_model("cross_encoder"),
                )
            },
        ),
    )


def test_built_in_types() -> None:
    reg = default_registries()
    assert reg.parent_searchers.get("in_table") is InTableParentSearcher
    assert reg.rerankers.get("cross_encoder") is CrossEncoderReranker
    assert "in_table" in reg.parent_searchers.names()


def test_unknown_type_lists_the_known_ones() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"unknown reranker type 'bm25'; known types: "
        r"\['cross_encoder'\]",
    ):
        default_registries().rerankers.get("bm25")


@pytest.mark.parametrize(
    "name",
    [
        "os:system",
        "parrot_parents.rerankers.cross_encoder:CrossEncoderReranker",
        "builtins.eval",
        "../x",
        "",
    ],
)
def test_a_row_cannot_name_an_import_path(name: str, plugin: Path) -> None:
    with pytest.raises(BotConfigError, match=r"reranker_config.type: unknown reranker type"):
        validate_bot(
            {"name": "b", "collection": "c", "reranker_config": {"type": name}}, registries=_fresh()
        )
    assert not plugin.exists()  # nothing was imported


def test_an_entry_point_adds_a_type(plugin: Path) -> None:
    reg = _fresh()
    assert "reverse" in reg.rerankers.names()
    assert not plugin.exists()  # listing names imports nothing
    instance = reg.rerankers.build({"type": "reverse", "depth": 3})
    assert plugin.exists()
    assert type(instance).__name__ == "ReverseReranker"
    assert instance.to_dict() == {"type": "reverse", "depth": 3, "label": "r"}


def test_entry_point_config_is_strict_from_the_signature(plugin: Path) -> None:
    reg = _fresh()
    with pytest.raises(ValidationError, match="depth"):
        reg.rerankers.validate({"type": "reverse", "depth": "3"})
    with pytest.raises(
        BotConfigError,
        match=r"reranker_config.colour: unknown key \(known "
        r"keys: depth, label\)",
    ):
        validate_bot(
            {"name": "b", "collection": "c", "reranker_config": {"type": "reverse", "colour": 1}},
            registries=reg,
        )


def test_register_in_code(tmp_path: Path) -> None:
    class Nearby(AbstractParentSearcher):
        def __init__(self, store: PgVectorStore, radius: int = 1) -> None:
            self.store = store
            self.radius = radius

        async def fetch(self, parent_ids):  # type: ignore[no-untyped-def]
            return {}

    reg = _fresh()
    reg.parent_searchers.register("nearby", Nearby)
    store = PgVectorStore(dsn="postgresql://x@localhost/db", table="t", dimension=3)
    built = reg.parent_searchers.build({"type": "nearby", "radius": 2}, store=store)
    assert isinstance(built, Nearby) and built.store is store and built.radius == 2
    # 'store' is injected by the loader and cannot come from the row.
    with pytest.raises(ValidationError, match="store"):
        reg.parent_searchers.validate({"type": "nearby", "store": "x"})
    with pytest.raises(ConfigurationError, match="'nearby' is already registered"):
        reg.parent_searchers.register("nearby", Nearby)
    with pytest.raises(ConfigurationError, match="must be a subclass of AbstractParentSearcher"):
        reg.parent_searchers.register("wrong", dict)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"invalid parent searcher type name 'Bad.Name'"):
        reg.parent_searchers.register("Bad.Name", Nearby)


def test_in_table_gets_the_bots_store() -> None:
    store = PgVectorStore(dsn="postgresql://x@localhost/db", table="t", dimension=3)
    searcher = default_registries().parent_searchers.build({"type": "in_table"}, store=store)
    assert isinstance(searcher, InTableParentSearcher) and searcher.store is store


def test_cross_encoder_is_built_from_its_config() -> None:
    reranker = default_registries().rerankers.build(
        {"type": "cross_encoder", "model": "/models/x", "batch_size": 4}
    )
    assert reranker.to_dict() == {
        "type": "cross_encoder",
        "model": "/models/x",
        "batch_size": 4,
        "max_length": 512,
        "device": "cpu",
    }
