"""The presets' old homes keep working: chatkeep.core.vendors, the vendor names of
chatkeep.core, and chatkeep.openai's make_client, each with a pointer to the new one."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import chatkeep.vendors as vendors_module
from chatkeep.core import ChatkeepError
from chatkeep.vendors import (
    MissingCredentials,
    MissingPackage,
    MissingVendorSetting,
    UnknownVendor,
    UnsupportedProtocol,
)

MOVED = [
    "MissingCredentials",
    "MissingVendorSetting",
    "UnknownVendor",
    "UnsupportedProtocol",
    "Vendor",
    "get_vendor",
    "vendors",
]


@pytest.mark.parametrize("name", MOVED)
def test_chatkeep_core_still_finds_the_moved_names_and_says_where_they_went(name: str) -> None:
    import chatkeep.core

    with pytest.warns(DeprecationWarning, match=f"chatkeep.vendors.{name}"):
        found = getattr(chatkeep.core, name)
    assert found is getattr(vendors_module, name)


def test_the_old_module_reexports_the_presets() -> None:
    sys.modules.pop("chatkeep.core.vendors", None)
    with pytest.warns(DeprecationWarning, match="moved to chatkeep.vendors"):
        old = importlib.import_module("chatkeep.core.vendors")
    for name in [*MOVED, "PROTOCOLS", "VENDORS", "Secret"]:
        assert getattr(old, name) is getattr(vendors_module, name), name
    # Importing the module rebinds chatkeep.core.vendors from the function to the module;
    # calling it still lists the presets, as the function did.
    import chatkeep.core

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        listed = chatkeep.core.vendors("responses")
    assert [v.name for v in listed] == ["azure", "openai", "qwen"]


def test_a_fresh_process_importing_the_old_names_works() -> None:
    code = (
        "from chatkeep.core import get_vendor, vendors\n"
        "from chatkeep.core.vendors import VENDORS\n"
        "from chatkeep.openai import make_client, MissingPackage\n"
        "from chatkeep.openai.factory import make_client as factory_make_client\n"
        "import chatkeep.vendors as new\n"
        "assert get_vendor is new.get_vendor and VENDORS is new.VENDORS\n"
        "assert make_client is factory_make_client is new.make_client\n"
        "assert MissingPackage is new.MissingPackage\n"
        "print([v.name for v in vendors('messages')])\n"
    )
    result = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['anthropic', 'deepseek', 'glm', 'mimo', 'minimax']"


def test_importing_the_presets_imports_no_sdk() -> None:
    code = (
        "import sys, chatkeep.vendors\n"
        "loaded = [m for m in ('openai', 'anthropic', 'chatkeep.openai', 'chatkeep.anthropic')"
        " if m in sys.modules]\n"
        "print(loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "error",
    [MissingCredentials, MissingPackage, MissingVendorSetting, UnknownVendor, UnsupportedProtocol],
)
def test_every_vendor_error_is_a_chatkeep_error(error: type[Exception]) -> None:
    assert issubclass(error, ChatkeepError)
    assert error.__doc__
