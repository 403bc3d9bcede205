"""The chatkeep pytest plugin, registered through the ``pytest11`` entry point.

It adds the ``--chatkeep-url`` option (and the size options of
:mod:`chatkeep.testing.settings`) and these fixtures:

``chatkeep_url``
    The URL of the store under test: the ``--chatkeep-url`` option, or else an error that
    says how to provide one. Override it in a test class, module or ``conftest.py``.
``chatkeep_settings``
    The suite's sizes (:class:`~chatkeep.testing.settings.SuiteSettings`); override to
    shrink them for a slow store.
``chatkeep_store``
    ``open_store(chatkeep_url)``, closed after the test.
``chatkeep_open`` / ``chatkeep_reopen``
    Functions opening more handles on the same URL (``chatkeep_open(namespace="a")``),
    closed after the test.
``chatkeep_tracker``
    What the test wrote: the sessions are deleted after the test when the store declares
    ``delete`` (``--chatkeep-keep-sessions`` keeps them).
``chatkeep_workers``
    Worker processes that reopen the URL, for the cross-process tests.

Installing the plugin adds no tests to a project: the suite module is collected only when
named, as in ``pytest --pyargs chatkeep.testing.suite --chatkeep-url URL``. The plugin
imports nothing but pytest until one of its fixtures is used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from chatkeep.core import Store

    from ._scrub import Scrubber
    from ._tracking import Tracker
    from ._workers import WorkerFleet
    from .settings import SuiteSettings

__all__ = [
    "chatkeep_fleet",
    "chatkeep_open",
    "chatkeep_reopen",
    "chatkeep_settings",
    "chatkeep_store",
    "chatkeep_tracker",
    "chatkeep_url",
    "chatkeep_workers",
]

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
    from ._paths import clean_sys_path
    from ._rewrite import register_assert_rewrite

    clean_sys_path()
    register_assert_rewrite()
    _CONFIGS.append(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Forget the configuration of a finished (possibly nested) session."""
    if config in _CONFIGS:
        _CONFIGS.remove(config)


#: The configurations of the running sessions, innermost last (warnings hooks get none).
_CONFIGS: list[pytest.Config] = []


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect the suite's own package (``chatkeep/testing``) as a plain directory.

    pytest would otherwise import its ``__init__.py`` by path, which in the default
    ``prepend`` import mode puts the ``chatkeep`` namespace folder itself on ``sys.path``,
    where ``chatkeep/redis`` then hides the ``redis`` driver (and ``chatkeep/openai`` the
    ``openai`` SDK) for the tests and for the worker processes they spawn. The suite module
    itself is imported by its real name (see :func:`pytest_pycollect_makemodule`).
    """
    try:
        ours = path.resolve() == _SUITE_PATH.parent
    except OSError:
        return None
    return pytest.Dir.from_parent(parent, path=path) if ours else None


# --- no secret of the store URL in any output ------------------------------------------

_SCRUBBER = pytest.StashKey["Scrubber"]()


def _scrubber(config: pytest.Config, url: object = None) -> Scrubber | None:
    """This run's scrubber, created (importing chatkeep) only once a URL is known."""
    scrubber = config.stash.get(_SCRUBBER, None)
    option = config.getoption("chatkeep_url", default=None)
    if scrubber is None and (option or isinstance(url, str)):
        from ._scrub import Scrubber

        scrubber = config.stash[_SCRUBBER] = Scrubber()
    if scrubber is not None:
        scrubber.add(option)
        scrubber.add(url)
    return scrubber


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Take the URL's secrets out of a test's report (tracebacks with the fixtures'
    values, ``-l`` locals, assertion messages, captured output) before anything shows it:
    the terminal, ``-rA``, the JSON report, xdist's controller."""
    report = yield
    funcargs = getattr(item, "funcargs", {})
    scrubber = _scrubber(item.config, funcargs.get("chatkeep_url"))
    if scrubber is not None:
        from ._scrub import scrub_report

        scrub_report(report, scrubber)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """The same for collection errors."""
    report = yield
    scrubber = _scrubber(collector.config)
    if scrubber is not None:
        from ._scrub import scrub_report

        scrub_report(report, scrubber)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_warning_recorded(warning_message: Any, when: str, nodeid: str, location: object) -> None:
    """The same for warnings, before the terminal summary records them."""
    config = _CONFIGS[-1] if _CONFIGS else None
    scrubber = _scrubber(config) if config is not None else None
    if scrubber is None or not scrubber.active:
        return
    text = str(warning_message.message)
    if scrubber(text) != text:
        category = type(warning_message.message)
        try:
            warning_message.message = category(scrubber(text))
        except Exception:
            warning_message.message = UserWarning(scrubber(text))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Whatever collected other tests may have put on ``sys.path``, the namespace folder
    must not stay there while the suite runs."""
    from ._paths import clean_sys_path

    clean_sys_path()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--chatkeep-url``, ``--chatkeep-keep-sessions`` and the size options."""
    from .settings import OPTIONS

    group = parser.getgroup("chatkeep", "chatkeep store conformance")
    group.addoption(
        "--chatkeep-url",
        dest="chatkeep_url",
        metavar="URL",
        default=None,
        help="URL of the chatkeep store the conformance suite tests (e.g. sqlite:///c.db). "
        "The suite writes sessions with random ids: do not point it at production data.",
    )
    group.addoption(
        "--chatkeep-keep-sessions",
        dest="chatkeep_keep_sessions",
        action="store_true",
        default=False,
        help="keep the sessions the suite wrote (by default each test deletes them when the "
        "store declares delete)",
    )
    for option, (field, help_text) in OPTIONS.items():
        group.addoption(
            f"--chatkeep-{option}",
            dest=f"chatkeep_{field}",
            type=int,
            metavar="N",
            default=None,
            help=help_text,
        )


@pytest.fixture
def chatkeep_url(request: pytest.FixtureRequest) -> str:
    """The URL of the store under test (``--chatkeep-url``); override to provide one."""
    url = request.config.getoption("chatkeep_url", default=None)
    if not url:
        raise NotImplementedError(_NO_URL)
    return str(url)


@pytest.fixture
def chatkeep_settings(request: pytest.FixtureRequest) -> SuiteSettings:
    """The suite's sizes (``--chatkeep-volume-mib`` and friends); override to change them."""
    from .settings import OPTIONS, from_options

    values = {
        field: request.config.getoption(f"chatkeep_{field}", default=None)
        for field, _ in OPTIONS.values()
    }
    values["keep_sessions"] = bool(
        request.config.getoption("chatkeep_keep_sessions", default=False)
    )
    return from_options(values)


@pytest.fixture
def chatkeep_tracker(chatkeep_url: str, chatkeep_settings: SuiteSettings) -> Iterator[Tracker]:
    """The handles of this test and the sessions written through them. After the test the
    sessions are deleted (unless ``--chatkeep-keep-sessions``) and the handles closed."""
    from ._tracking import Tracker

    tracker = Tracker(chatkeep_url)
    try:
        yield tracker
    finally:
        tracker.finish(delete=not chatkeep_settings.keep_sessions)


@pytest.fixture
def chatkeep_open(chatkeep_tracker: Tracker) -> Callable[..., Store]:
    """A function opening a new handle on ``chatkeep_url`` with options
    (``chatkeep_open(namespace="a")``); cleaned up and closed after the test."""
    return chatkeep_tracker.open


@pytest.fixture
def chatkeep_store(chatkeep_open: Callable[..., Store]) -> Store:
    """A store opened from ``chatkeep_url``, closed (and cleaned up) after the test."""
    return chatkeep_open()


@pytest.fixture
def chatkeep_reopen(chatkeep_open: Callable[..., Store]) -> Callable[[], Store]:
    """A function returning a new handle on ``chatkeep_url``; all are closed afterwards."""

    def reopen() -> Store:
        return chatkeep_open()

    return reopen


@pytest.fixture(scope="session")
def chatkeep_fleet() -> Iterator[WorkerFleet]:
    """Worker processes (``spawn``) for the cross-process tests, started on first use and
    shared by every test of the run."""
    from ._workers import WorkerFleet

    fleet = WorkerFleet()
    try:
        yield fleet
    finally:
        fleet.shutdown()


@pytest.fixture
def chatkeep_workers(chatkeep_fleet: WorkerFleet) -> Iterator[WorkerFleet]:
    """The worker fleet, with every store the workers opened closed after the test."""
    try:
        yield chatkeep_fleet
    finally:
        chatkeep_fleet.close_stores()


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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Let ``-k`` select by mixin (``-k SliceTests``) and by report row (``-k delete``);
    fail once, clearly, when the suite is collected without a store to test."""
    _add_mixin_keywords(items)
    if config.getoption("chatkeep_url", default=None):
        return
    if any(_is_suite(item.path) for item in items):
        raise pytest.UsageError("chatkeep conformance suite: " + _NO_URL)


def _add_mixin_keywords(items: list[pytest.Item]) -> None:
    if "chatkeep.testing.conformance" not in sys.modules:
        return  # nothing of the suite was collected (the plugin stays light)
    from .conformance import StoreConformance
    from .requirements import defining_mixin, requirement_for

    for item in items:
        cls = getattr(item, "cls", None)
        function = getattr(item, "originalname", None)
        if cls is None or function is None or not issubclass(cls, StoreConformance):
            continue
        try:
            item.extra_keyword_matches.add(defining_mixin(cls, function).__name__)
            item.extra_keyword_matches.add(requirement_for(cls, function).group)
        except LookupError:
            continue
