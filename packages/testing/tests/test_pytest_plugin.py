"""The pytest plugin and ``python -m chatkeep.testing``, run as a user would: in a fresh
interpreter, from a directory that is not this repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import chatkeep

PYTHON = sys.executable


def _env() -> dict[str, str]:
    # Make the chatkeep namespace importable exactly as in this process, and load no other
    # member's plugin: only the suite and the built-in memory backend are under test here.
    roots = [str(Path(path).parent) for path in chatkeep.__path__]
    existing = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*roots, *([existing] if existing else [])]),
        "CHATKEEP_PLUGINS": "",
    }


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, *args],
        check=False,
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_pyargs_runs_the_suite(tmp_path: Path) -> None:
    result = _run(
        "-m",
        "pytest",
        "--pyargs",
        "chatkeep.testing.suite",
        "--chatkeep-url",
        "memory://",
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout
    assert "failed" not in result.stdout
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips, "memory:// declares neither shared nor durable: those tests skip"
    # Every skip is memory://'s choice: a capability it does not declare, a hook it lacks.
    assert all("not declared by" in line or "not provided by" in line for line in skips), skips


def test_pyargs_without_url_is_a_usage_error(tmp_path: Path) -> None:
    result = _run(
        "-m", "pytest", "--pyargs", "chatkeep.testing.suite", "-p", "no:cacheprovider", cwd=tmp_path
    )
    assert result.returncode == 4, result.stdout + result.stderr
    assert "--chatkeep-url" in result.stderr


def test_installed_plugin_adds_no_tests_to_other_projects(tmp_path: Path) -> None:
    (tmp_path / "test_unrelated.py").write_text(
        # Importing the suite class must not run the suite here either.
        "from chatkeep.testing.suite import TestConformance\n\n"
        "def test_one():\n    assert TestConformance\n"
    )
    result = _run("-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    assert "chatkeep" not in result.stdout


def test_plugin_import_is_light(tmp_path: Path) -> None:
    code = (
        "import sys, chatkeep.testing.pytest_plugin as p\n"
        "heavy = [m for m in ('chatkeep.core', 'hypothesis', 'chatkeep.testing.mixins')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = _run("-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_module_runner_ignores_the_projects_pytest_settings(tmp_path: Path) -> None:
    # A project whose configuration would deselect everything and turn warnings into errors.
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -k nothing_matches_this -W error\n")
    (tmp_path / "conftest.py").write_text("raise RuntimeError('project conftest loaded')\n")
    result = _run("-m", "chatkeep.testing", "memory://", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["level"] == "full"
    assert report["capabilities"]["core"]["status"] == "pass"
    assert not (tmp_path / ".hypothesis").exists()
    assert not (tmp_path / ".pytest_cache").exists()


def test_module_runner_says_an_unknown_store_did_not_open(tmp_path: Path) -> None:
    result = _run("-m", "chatkeep.testing", "nosuchbackend://", "-q", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == "", "no report table for a store that never opened"
    assert "could not open the store" in result.stderr and result.stderr.count("\n") == 1
