"""The chatkeep pytest plugin, registered through the ``pytest11`` entry point.

It adds the ``--chatkeep-url`` option and three fixtures:

``chatkeep_url``
    The URL of the store under test: the ``--chatkeep-url`` option, or else an error that
    says how to provide one. Override it in a test class, module or ``conftest.py``.
``chatkeep_store``
    ``open_store(chatkeep_url)``, closed after the test.
``chatkeep_reopen``
    A function that opens another handle on the same URL (closed after the test), for
    durability and sharing checks.

Installing the plugin adds no tests to a project: the suite module is collected only when
named, as in ``pytest --pyargs chatkeep.testing.suite --chatkeep-url URL``. The plugin
imports nothing but pytest until one of its fixtures is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from chatkeep.core import Store

__all__ = ["chatkeep_reopen", "chatkeep_store", "chatkeep_url"]

_SUITE_MODULE = "chatkeep.testing.suite"
_SUITE_PATH = Path(__file__).with_name("suite.py").resolve()

_NO_URL = (
    "no store to test: run pytest with --chatkeep-url URL "
    "(for example `pytest --pyargs chatkeep.testing.suite --chatkeep-url sqlite:///c.db`), "
    "or override the `chatkeep_url` fixture in your test class or conftest.py"
)


def pytest_configure(config: pytest.Config) -> None:
    """Have this session rewrite the suite's asserts (a previous session, or a caller of
    ``run_conformance``, may have registered them with another import hook)."""
    from ._rewrite import register_assert_rewrite

    register_assert_rewrite()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--chatkeep-url``."""
    group = parser.getgroup("chatkeep", "chatkeep store conformance")
    group.addoption(
        "--chatkeep-url",
        dest="chatkeep_url",
        metavar="URL",
        default=None,
        help="URL of the chatkeep store the conformance suite tests (e.g. sqlite:///c.db). "
        "The suite writes sessions with random ids: do not point it at production data.",
    )


@pytest.fixture
def chatkeep_url(request: pytest.FixtureRequest) -> str:
    """The URL of the store under test (``--chatkeep-url``); override to provide one."""
    url = request.config.getoption("chatkeep_url", default=None)
    if not url:
        raise NotImplementedError(_NO_URL)
    return str(url)


@pytest.fixture
def chatkeep_store(chatkeep_url: str) -> Iterator[Store]:
    """A store opened from ``chatkeep_url``, closed after the test."""
    from chatkeep.core import open_store

    store = open_store(chatkeep_url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def chatkeep_reopen(chatkeep_url: str) -> Iterator[Callable[[], Store]]:
    """A function returning a new handle on ``chatkeep_url``; all are closed afterwards."""
    from chatkeep.core import open_store

    opened: list[Store] = []

    def reopen() -> Store:
        store = open_store(chatkeep_url)
        opened.append(store)
        return store

    try:
        yield reopen
    finally:
        for store in opened:
            store.close()


def _is_suite(path: Path) -> bool:
    try:
        return path.resolve() == _SUITE_PATH
    except OSError:
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    """Collect the suite module under its real name, ``chatkeep.testing.suite``.

    pytest's default import mode would import it by path as ``testing.suite`` (it cannot see
    the ``chatkeep`` namespace package), loading a second copy of chatkeep.testing.
    """
    if not _is_suite(module_path):
        return None
    module = pytest.Module.from_parent(parent, path=module_path)
    module.obj = importlib.import_module(_SUITE_MODULE)
    return module


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> list[pytest.Item] | None:
    """Collect ``TestConformance`` only in the suite module: a test module that merely
    imports it (``from chatkeep.testing.suite import TestConformance``) does not run the
    whole suite again without a store. Subclass ``StoreConformance`` instead."""
    if (
        isinstance(obj, type)
        and obj.__module__ == _SUITE_MODULE
        and isinstance(collector, pytest.Module)
        and not _is_suite(collector.path)
    ):
        return []
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fail once, clearly, when the suite is collected without a store to test."""
    if config.getoption("chatkeep_url", default=None):
        return
    if any(_is_suite(item.path) for item in items):
        raise pytest.UsageError("chatkeep conformance suite: " + _NO_URL)
