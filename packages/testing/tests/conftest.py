"""Registers the example backends of ``chatkeep_testing_examples`` for these tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Importable by name, so the suite's spawned worker processes (which inherit sys.path) can
# register the same module again.
sys.path.insert(0, str(Path(__file__).parent))

import chatkeep_testing_examples  # type: ignore[import-not-found,unused-ignore]

from chatkeep.core.plugins import get_plugin_manager, reset_plugins

EXAMPLES_PLUGIN = "chatkeep-testing-examples"


@pytest.fixture(scope="session", autouse=True)
def example_backends() -> Iterator[None]:
    """Only the built-in memory backend and the examples: these tests check the suite, not
    the other members' plugins."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHATKEEP_PLUGINS", "")
        reset_plugins()
        get_plugin_manager().register(chatkeep_testing_examples, name=EXAMPLES_PLUGIN)
        try:
            yield
        finally:
            reset_plugins()
