"""Every name a lazy package exports loads from the import its ``__init__`` names."""

from __future__ import annotations

import importlib

import pytest

LAZY_PACKAGES = [
    "parrot_parents",
    "parrot_parents.eval",
    "parrot_parents.loaders",
    "parrot_parents.retrieval",
    "parrot_parents.server",
    "parrot_parents.stores",
    "parrot_parents.stores.milvus",
    "parrot_parents.stores.parents",
    "parrot_parents.stores.postgres",
]


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_exported_name_loads_and_is_listed(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    assert set(module.__all__) <= set(dir(module))


def test_an_unknown_name_is_an_attribute_error() -> None:
    module = importlib.import_module("parrot_parents")
    with pytest.raises(AttributeError, match="module 'parrot_parents' has no attribute 'Nope'"):
        module.Nope  # noqa: B018
