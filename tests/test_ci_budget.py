"""The CI budget holds its shape (DESIGN section 12): every nox session tagged ``ci`` is in
one environment group and has a timing entry (so ``./run tests`` can order it and print its
share), and a test run that executes no test fails instead of passing."""

from __future__ import annotations

import importlib.util
import json
import re
import runpy
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def noxfile() -> dict[str, Any]:
    """The noxfile's globals (``GROUPS``, ``TIMINGS``, its helpers)."""
    return runpy.run_path(str(REPO / "noxfile.py"))


@pytest.fixture(scope="module")
def ci_sessions() -> list[dict[str, Any]]:
    """``nox -t ci --list --json``: what ``./run tests`` runs, with each session's tags."""
    listing = subprocess.run(
        [sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-t", "ci", "-l", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    sessions: list[dict[str, Any]] = json.loads(listing)
    assert len(sessions) > 30, sessions
    return sessions


@pytest.fixture(scope="module")
def streams() -> ModuleType:
    """``.ci/streams.py`` (what ``./run tests`` runs) as a module."""
    spec = importlib.util.spec_from_file_location("ci_streams", REPO / ".ci" / "streams.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_streams"] = module
    spec.loader.exec_module(module)
    return module


def test_every_ci_session_is_in_one_group(
    ci_sessions: list[dict[str, Any]], noxfile: dict[str, Any]
) -> None:
    groups = noxfile["GROUPS"]
    wrong = {
        s["session"]: s["tags"] for s in ci_sessions if sum(tag in groups for tag in s["tags"]) != 1
    }
    assert not wrong, f"sessions tagged ci need exactly one group tag of {groups}: {wrong}"


def test_every_ci_session_has_a_timing_entry(
    ci_sessions: list[dict[str, Any]], noxfile: dict[str, Any]
) -> None:
    timings = noxfile["TIMINGS"]
    missing = [s["session"] for s in ci_sessions if s["session"] not in timings]
    assert not missing, f"add these sessions to TIMINGS in noxfile.py: {missing}"
    names = {s["session"] for s in ci_sessions}
    # oldest is tagged ci only where a Python 3.10 exists; its entry stays either way.
    stale = sorted(set(timings) - names - {"oldest"})
    assert not stale, f"TIMINGS has entries for sessions CI does not run: {stale}"
    assert all(isinstance(v, int) and v > 0 for v in timings.values())


def test_streams_take_the_longest_session_first(streams: ModuleType) -> None:
    sessions = [
        {"session": "short", "tags": ["ci", "workspace"]},
        {"session": "new", "tags": ["ci", "workspace"]},
        {"session": "long", "tags": ["ci", "oldest"]},
    ]
    planned = streams.plan(sessions, {"short": 5, "long": 500}, ("workspace", "oldest"))
    assert [o.name for o in planned] == ["new", "long", "short"]  # unknown time: first
    assert [o.group for o in planned] == ["workspace", "oldest", "workspace"]


def test_the_budget_shows_each_sessions_share(streams: ModuleType) -> None:
    done = [
        streams.Outcome("a", "workspace", 60, seconds=300.0, result="success"),
        streams.Outcome("b", "demo", None, seconds=100.0, result="failed"),
    ]
    table = streams.budget(done, wall=1600.0, streams=2)
    assert "75.0%" in table and "25.0%" in table
    assert "OVER BUDGET" in table
    assert "OVER BUDGET" not in streams.budget(done, wall=600.0, streams=2)


class _Session:
    """What ``_require_tests_ran`` uses of a nox session."""

    def __init__(self) -> None:
        self.logged: list[str] = []

    def error(self, message: str) -> None:
        raise RuntimeError(message)

    def log(self, message: str) -> None:
        self.logged.append(message)


def _junit(path: Path, tests: int, skipped: int) -> Path:
    path.write_text(
        f'<testsuites><testsuite name="pytest" tests="{tests}" skipped="{skipped}" '
        'errors="0" failures="0"></testsuite></testsuites>'
    )
    return path


def test_a_run_where_every_test_skipped_fails(noxfile: dict[str, Any], tmp_path: Path) -> None:
    check = noxfile["_require_tests_ran"]
    with pytest.raises(RuntimeError, match="no test ran"):
        check(_Session(), _junit(tmp_path / "a.xml", tests=4, skipped=4))
    with pytest.raises(RuntimeError, match="no pytest report"):
        check(_Session(), tmp_path / "missing.xml")
    session = _Session()
    check(session, _junit(tmp_path / "b.xml", tests=4, skipped=3))
    assert session.logged == ["1 tests ran"]


def test_a_session_that_collects_nothing_fails() -> None:
    """pytest's exit 5 (no test collected) fails the nox session."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py")),
            *("-s", "tests(member='encrypted')", "--", "-k", "no_test_has_this_name"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode != 0, result.stdout + result.stderr
    assert "exit code 5" in result.stdout + result.stderr


def test_every_hypothesis_count_goes_through_example_count() -> None:
    """One place decides how many examples a property test runs (``chatkeep.testing.
    example_count``: at most 100 under CI=true), so a literal count cannot creep back."""
    literal = re.compile(r"max_examples\s*=\s*(?!example_count\()")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for folder in ("core", "plugins", "packages", "tests")
        for path in sorted((REPO / folder).rglob("*.py"))
        if ".venv" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if literal.search(line)
    ]
    assert not found, f"max_examples without example_count(...): {found}"
