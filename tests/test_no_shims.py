"""Issue 30 item 11: the re-export shims and deprecated aliases left by the house-plan move
are gone (pre-1.0: a module whose only purpose is to point elsewhere is a room with no
purpose). Each old name fails to import, so nothing in the repository can lean on it."""

from __future__ import annotations

import importlib

import pytest

import chatkeep.core
import chatkeep.openai

GONE_MODULES = [
    "chatkeep.core.vendors",
    "chatkeep.openai.factory",
    "chatkeep.testing.fake_model",
    "chatkeep.azure_blob.names",
    "chatkeep.postgres.options",
    "chatkeep.postgres.schema",
    "chatkeep.sqlite.options",
    "chatkeep.sqlite.schema",
]


@pytest.mark.parametrize("name", GONE_MODULES)
def test_the_old_module_is_gone(name: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


@pytest.mark.parametrize(
    ("module", "name"),
    [
        (chatkeep.core, "get_vendor"),
        (chatkeep.core, "vendors"),
        (chatkeep.core, "Vendor"),
        (chatkeep.core, "UnknownVendor"),
        (chatkeep.openai, "make_client"),
        (chatkeep.openai, "MissingPackage"),
    ],
)
def test_the_old_alias_is_gone(module: object, name: str) -> None:
    assert not hasattr(module, name)
