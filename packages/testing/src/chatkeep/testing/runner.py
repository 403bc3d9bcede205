"""Run the conformance suite against a URL in this process and build a capability report."""

from __future__ import annotations

import ast
import contextlib
import io
import logging
import multiprocessing
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from chatkeep.core import open_store, redact_url

from ._paths import clean_sys_path
from ._scrub import Scrubber
from .hooks import TEST_HOOKS
from .report import ConformanceReport, TestOutcome
from .requirements import defining_mixin, requirement_for

__all__ = ["UnguardedMain", "run_conformance"]


class UnguardedMain(RuntimeError):
    """``run_conformance`` was called at the top level of a script without an
    ``if __name__ == "__main__":`` guard. The suite's worker processes are ``spawn``-ed,
    and each one imports the main script again: unguarded, every worker would run the
    whole suite once more."""


_GUARD_HELP = (
    "the conformance suite's worker processes are spawned and import the main script "
    'again: put the call under `if __name__ == "__main__":` (see the chatkeep-testing '
    "README, Worker processes)"
)


def _is_main_guard(node: ast.AST) -> bool:
    """Whether ``node`` is ``if __name__ == "__main__":`` (either way round)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(mains) == 1


def _unguarded_call_line(depth: int = 2) -> int | None:
    """The line of the main script's top-level code that called us, if that call is not
    inside an ``if __name__ == "__main__":`` block (nor a function or class); else
    ``None`` (called from a function, an imported module, the REPL, ``python -c``)."""
    frame = sys._getframe(depth)
    if frame.f_code.co_name != "<module>" or frame.f_globals.get("__name__") != "__main__":
        return None
    path = frame.f_globals.get("__file__")
    if not isinstance(path, str) or not os.path.isfile(path):
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    line = frame.f_lineno
    for node in tree.body:
        end = getattr(node, "end_lineno", None) or node.lineno
        if node.lineno <= line <= end:
            return None if _is_main_guard(node) else line
    return None


def _check_main_guard() -> None:
    """Raise :class:`UnguardedMain` for a call a spawned worker would repeat."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        # A spawned worker importing the unguarded script: stop it here, before it runs.
        raise UnguardedMain(f"run_conformance was called while a worker started: {_GUARD_HELP}")
    line = _unguarded_call_line(depth=3)
    if line is not None:
        raise UnguardedMain(
            f"run_conformance is called at the top level of the main script (line {line}) "
            f"without a guard: {_GUARD_HELP}"
        )


_HERE = Path(__file__).resolve().parent
_HYPOTHESIS_STORAGE = "HYPOTHESIS_STORAGE_DIRECTORY"


class _Collector:
    """A pytest plugin that records each test's outcome under its report group, and which
    tests of the suite were deselected or never reached."""

    def __init__(self) -> None:
        self.outcomes: dict[str, TestOutcome] = {}
        self.collection_errors: list[str] = []
        self.selected: list[str] = []
        self.deselected: list[str] = []
        self.functions: set[str] = set()

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        """Tests ``-k``, ``-m`` or ``--deselect`` left out."""
        for item in items:
            self.deselected.append(self._describe(item.nodeid)[0])
            self.functions.add(getattr(item, "originalname", item.name))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The tests that will run."""
        for item in session.items:
            self.selected.append(item.nodeid)
            self.functions.add(getattr(item, "originalname", item.name))

    def not_run(self) -> tuple[str, ...]:
        """Tests of the suite that did not run: deselected, never reached (``-x``, an
        interruption), or not even collected (a node id naming a few tests)."""
        from .suite import TestConformance

        missing = list(self.deselected)
        missing += [self._describe(n)[0] for n in self.selected if n not in self.outcomes]
        for name in sorted(n for n in dir(TestConformance) if n.startswith("test_")):
            if name not in self.functions:
                missing.append(f"{defining_mixin(TestConformance, name).__name__}.{name}")
        return tuple(missing)

    def _describe(self, nodeid: str) -> tuple[str, str]:
        test = nodeid.rsplit("::", 1)[-1]
        function = test.split("[", 1)[0]
        # Imported only now, after pytest collected (and assert-rewrote) the suite.
        from .suite import TestConformance

        try:
            mixin = defining_mixin(TestConformance, function)
            group = requirement_for(TestConformance, function).group
        except LookupError:
            return test, "core"
        return f"{mixin.__name__}.{test}", group

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Fold the setup, call and teardown phases of each test into one outcome."""
        name, group = self._describe(report.nodeid)
        previous = self.outcomes.get(report.nodeid)
        if previous is not None and previous.outcome == "failed":
            return
        if report.failed:
            phase = "" if report.when == "call" else f"(in {report.when}) "
            outcome = TestOutcome(name, group, "failed", phase + _one_line(report))
        elif report.skipped:
            outcome = TestOutcome(name, group, "skipped", _skip_reason(report))
        elif report.when == "call":
            outcome = TestOutcome(name, group, "passed")
        else:
            return
        self.outcomes[report.nodeid] = outcome

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Remember collection errors: they mean the suite did not run."""
        if report.failed:
            self.collection_errors.append(_one_line(report))


def _without_password(text: str, url: str) -> str:
    """``text`` without the URL's secrets, in case a driver echoed them."""
    scrub = Scrubber()
    scrub.add(url)
    return scrub(text)


def _one_line(report: pytest.TestReport | pytest.CollectReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if not message:
        # Text only (a scrubbed report from a pytest-xdist worker): pytest's "E" lines.
        text = report.longreprtext.strip()
        explained = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
        message = "\n".join(explained) or text
    return one_line(message)


#: How pytest's assertion explanation says where two values differ.
_WHERE_THEY_DIFFER = (
    "At index",
    "Left contains",
    "Right contains",
    "Differing items",
    "Extra items",
    "Omitting",
    "Full diff",
)


def one_line(message: str, limit: int = 480) -> str:
    """A failure's message in one line: its first line and, when pytest shortened the two
    sides of a comparison (``...``), the first line saying where they differ, so the two
    sides never look identical."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return "failed"
    first = lines[0]
    where = next((line for line in lines[1:] if line.startswith(_WHERE_THEY_DIFFER)), None)
    if where is not None and where not in first and "..." in first:
        first = f"{first} | {where}"
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return ""


@contextlib.contextmanager
def _hypothesis_storage_outside_cwd() -> Iterator[None]:
    """Keep Hypothesis's cache files out of the caller's working directory during the run
    (the suite keeps no example database, but Hypothesis caches other things there).

    Done through the environment variable Hypothesis reads when it first needs storage:
    importing Hypothesis here, before pytest starts, would stop pytest rewriting its asserts.
    """
    if os.environ.get(_HYPOTHESIS_STORAGE):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="chatkeep-conformance-") as directory:
        os.environ[_HYPOTHESIS_STORAGE] = directory
        try:
            yield
        finally:
            del os.environ[_HYPOTHESIS_STORAGE]
            configuration = sys.modules.get("hypothesis.configuration")
            if configuration is not None:
                # Forget the temporary directory (Hypothesis caches the choice).
                configuration.set_hypothesis_home_dir(None)


@contextlib.contextmanager
def _quiet_retries() -> Iterator[None]:
    """No retry warnings while probing: the error says it all, in one line."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


def _exit_name(exit_code: int) -> str:
    try:
        return f"{int(exit_code)} ({pytest.ExitCode(exit_code).name})"
    except ValueError:  # a plugin's own exit status
        return str(int(exit_code))


def _pytest_args(
    url: str, extra_args: Sequence[str], quiet: bool, keep_sessions: bool
) -> list[str]:
    args = [
        # The suite by path, not --pyargs: with no path argument that exists, pytest would
        # load a conftest.py from the current directory.
        str(_HERE / "suite.py"),
        f"--chatkeep-url={url}",
        # Our own configuration file, root and conftest boundary, so the calling project's
        # pytest settings (addopts, filterwarnings = error, conftest files) stay out.
        "-c",
        str(_HERE / "runner.ini"),
        f"--rootdir={_HERE}",
        f"--confcutdir={_HERE}",
        "-p",
        "no:cacheprovider",
    ]
    if quiet:
        args.append("-q")
    if keep_sessions:
        args.append("--chatkeep-keep-sessions")
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        args += ["-p", "chatkeep.testing.pytest_plugin"]
    return [*args, *extra_args]


def run_conformance(
    url: str,
    *,
    extra_args: Sequence[str] = (),
    quiet: bool = False,
    keep_sessions: bool = False,
) -> ConformanceReport:
    """Run the conformance suite against the store at ``url`` and report per capability.

    The suite runs in this process through ``pytest.main``; ``extra_args`` are added to its
    command line (``["-x"]``, ``["-k", "Slice"]``, ``["-n", "4"]`` with pytest-xdist).
    pytest's own output goes to stdout unless ``quiet``, in which case it is kept in
    ``report.output``. The sessions the suite writes are deleted after each test when the
    store declares ``delete``, unless ``keep_sessions``. Never raises for a failing store;
    a store that cannot even be opened gives a ``"failed"`` report whose ``error`` says why;
    a run stopped by Ctrl-C gives an ``"interrupted"`` one. Example::

        report = run_conformance("sqlite:///tmp/c.db")
        print(report.format())
        assert report.ok, report.level

    Called at the top level of a script outside an ``if __name__ == "__main__":`` block it
    raises :class:`UnguardedMain` before running anything (the suite's ``spawn``-ed worker
    processes import the main script again and would each run the suite once more).
    """
    _check_main_guard()
    clean_sys_path()
    shown_url = redact_url(url)
    try:
        with open_store(url) as probe:
            declared, backend = probe.capabilities, probe.name
            hooks = frozenset(h for h in TEST_HOOKS if hasattr(probe.backend, h))
            # Opening may not connect (Redis, PostgreSQL pools): one read of a session that
            # does not exist shows the store answers, before minutes of failing tests.
            with _quiet_retries():
                probe.read(f"ck-probe-{uuid.uuid4().hex}", -1)
    except Exception as exc:
        return ConformanceReport(
            url=shown_url,
            backend=None,
            declared=frozenset(),
            exit_code=int(pytest.ExitCode.USAGE_ERROR),
            error=_without_password(f"could not open the store: {type(exc).__name__}: {exc}", url),
        )

    collector = _Collector()
    args = _pytest_args(url, extra_args, quiet, keep_sessions)
    output: str | None = None
    with _hypothesis_storage_outside_cwd():
        if quiet:
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                exit_code = pytest.main(args, plugins=[collector])
            output = buffer.getvalue()
        else:
            exit_code = pytest.main(args, plugins=[collector])

    error = None
    interrupted = exit_code == pytest.ExitCode.INTERRUPTED
    if collector.collection_errors:
        error = "the suite could not be collected: " + collector.collection_errors[0]
    elif not interrupted and exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        error = f"pytest stopped with exit code {_exit_name(exit_code)}"
    return ConformanceReport(
        url=shown_url,
        backend=backend,
        declared=frozenset(declared),
        outcomes=tuple(collector.outcomes.values()),
        exit_code=int(exit_code),
        error=error,
        output=output,
        provided_hooks=hooks,
        not_run=collector.not_run() if error is None else (),
        interrupted=interrupted,
    )
