"""The conformance suite's three documented commands, run as a user runs them: every
member's wheel pip-installed into a fresh virtual environment outside the workspace (no
``--import-mode`` setting anywhere), for SQLite, Redis, PostgreSQL and a third-party
backend.

pytest's default import mode once put ``site-packages/chatkeep`` on ``sys.path``, where
``chatkeep/redis`` hid the ``redis`` driver from the tests and from the worker processes
they spawn; the repository's own configuration hid that from CI. This test sees what
users see. The in-repo backends may fail promises of the suite (their owners fix those);
what must hold here is that the three commands agree and that nothing fails for a reason
of the environment (an import error, a worker process that could not start).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from chatkeep.testing.servers import postgres_store_url, redis_store_url

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "third_party_fixture"
MEMBERS = sorted(
    path.parent
    for pattern in ("core/pyproject.toml", "plugins/*/pyproject.toml", "packages/*/pyproject.toml")
    for path in REPO.glob(pattern)
)
# Smaller than the defaults (the suite runs 12 times here); still several pages and > 10 MiB.
SIZES = [
    "--chatkeep-volume-mib=12",
    "--chatkeep-listing-sessions=600",
    "--chatkeep-tail-records=5000",
]
# The tests that import drivers in spawned workers and in the test process: what the
# import-mode bug broke (plus a few core tests).
NARROW_TESTS = [
    "OrderTests.test_read_returns_appended_records_in_order",
    "SharedStoreTests.test_processes_append_to_one_session",
    "ProcessOrderTests.test_appends_from_processes_in_turn_keep_their_order",
    "CrossProcessRetryTests.test_retry_from_another_process_after_other_appends",
    "CrashDurabilityTests.test_acknowledged_appends_survive_the_writer_dying",
]
NARROW = [
    "-k",
    "test_read_returns_appended_records_in_order or test_processes_append_to_one_session or "
    "test_appends_from_processes_in_turn or test_retry_from_another_process or "
    "test_acknowledged_appends_survive or SliceTests or RecordIdempotencyTests",
]
# Failures that mean the environment is broken, not the store.
ENVIRONMENTAL = re.compile(
    r"No module named|ModuleNotFoundError|ImportError|could not be loaded|PluginError|"
    r"worker \d+ died|exited with code"
)

pytestmark = pytest.mark.slow


def _clean_env() -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT"}
        and not key.startswith(("CHATKEEP_", "PYTEST_"))
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _uv(*args: str, cwd: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build wheels and the venv (./run installs it)")
    # Prefer the local package cache (works offline); go to the index only if it must.
    for extra in (["--offline"], []):
        result = subprocess.run(
            [uv, *args, *extra],
            check=False,
            cwd=cwd,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode == 0:
            return
    raise AssertionError(f"uv {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with every member's wheel and the third-party backend's, from a plain
    install (dependencies from the index)."""
    work = tmp_path_factory.mktemp("documented")
    wheels = work / "wheels"
    for member in MEMBERS:
        _uv("build", "--wheel", "--quiet", "--out-dir", str(wheels), str(member), cwd=REPO)
    third_party = work / "tpstore"
    shutil.copytree(FIXTURE, third_party, ignore=shutil.ignore_patterns("__pycache__"))
    _uv("build", "--wheel", "--quiet", "--out-dir", str(wheels), str(third_party), cwd=work)
    target = work / "venv"
    _uv("venv", "--quiet", "--python", sys.executable, str(target), cwd=work)
    python = target / "bin" / "python"
    _uv(
        "pip", "install", "--quiet", "--python", str(python),
        *sorted(str(w) for w in wheels.glob("*.whl")), cwd=work,
    )  # fmt: skip
    return target


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A namespace of its own on the real Redis (its keys erased afterwards)."""
    with ExitStack() as cleanup:
        yield redis_store_url(cleanup)


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A schema of its own on the real PostgreSQL (dropped afterwards)."""
    with ExitStack() as cleanup:
        yield postgres_store_url(cleanup)


def _run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        check=False,
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )


def _report(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    start = result.stdout.find("{")
    assert start >= 0, f"no JSON report:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(result.stdout[start:])
    return report


def _pytest_failures(output: str) -> set[str]:
    return set(re.findall(r"^(?:FAILED|ERROR) \S*::TestConformance::(\w+)", output, re.M))


def _environmental(report: dict[str, Any]) -> list[dict[str, str]]:
    return [f for f in report["failures"] if ENVIRONMENTAL.search(f["message"])]


def _failed(report: dict[str, Any]) -> set[str]:
    return {f["test"].split(".", 1)[1].split("[", 1)[0] for f in report["failures"]}


def _check(venv: Path, url: str, cwd: Path, *, must_be_full: bool) -> None:
    """``chatkeep conformance`` runs the whole suite; ``python -m chatkeep.testing`` and
    ``pytest --pyargs`` run the part that imports drivers in worker processes and the
    tests' own process (the part the import-mode bug broke), and must agree with it."""
    full = _report(_run(venv, "chatkeep", "conformance", "--json", url, "--", *SIZES, cwd=cwd))
    assert full["backend"] is not None, f"the store did not open: {full['error']}"
    assert full["narrowed"] is False and full["interrupted"] is False
    assert not _environmental(full), f"failed for the environment: {_environmental(full)[:3]}"
    if must_be_full:
        assert full["level"] == "full", json.dumps(full, indent=1)[:4000]
    by_module = _report(
        _run(venv, "python", "-m", "chatkeep.testing", "--json", url, "--", *NARROW, cwd=cwd)
    )
    assert by_module["backend"] is not None and by_module["narrowed"] is True
    ran = {t["test"].split(".", 1)[1].split("[", 1)[0] for t in by_module["tests"]}
    assert {t.split(".", 1)[1] for t in NARROW_TESTS} <= ran, sorted(ran)
    assert not _environmental(by_module), _environmental(by_module)[:3]
    assert _failed(by_module) == _failed(full) & ran, "the two runners disagree"
    by_pytest = _run(
        venv, "python", "-m", "pytest", "--pyargs", "chatkeep.testing.suite",
        "--chatkeep-url", url, *NARROW, "-q", "-rfE", "-p", "no:cacheprovider", cwd=cwd,
    )  # fmt: skip
    output = by_pytest.stdout + by_pytest.stderr
    assert " passed" in by_pytest.stdout, output[-4000:]
    assert not ENVIRONMENTAL.search(output), output[-5000:]
    assert _pytest_failures(by_pytest.stdout) == _failed(by_module), output[-4000:]


def test_the_namespace_is_not_on_sys_path_in_the_venv(venv: Path, tmp_path: Path) -> None:
    # The layout that made the bug: every member in one site-packages/chatkeep folder.
    (site,) = (venv / "lib").glob("python3*/site-packages")
    assert (site / "chatkeep" / "redis" / "__init__.py").exists()
    assert not (site / "chatkeep" / "__init__.py").exists()


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A folder for database files: on tmpfs where there is one (the suite's thousands of
    commits are synced to disk otherwise)."""
    if not Path("/dev/shm").is_dir():
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="chatkeep-documented-", dir="/dev/shm"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_sqlite(venv: Path, tmp_path: Path, scratch: Path) -> None:
    _check(venv, f"sqlite:///{scratch / 'c.db'}", tmp_path, must_be_full=False)


def test_redis(venv: Path, tmp_path: Path, redis_url: str) -> None:
    _check(venv, redis_url, tmp_path, must_be_full=False)


def test_postgres(venv: Path, tmp_path: Path, postgres_url: str) -> None:
    _check(venv, postgres_url, tmp_path, must_be_full=False)


def test_third_party_backend_is_full(venv: Path, tmp_path: Path, scratch: Path) -> None:
    _check(venv, f"tp:///{scratch / 'tp.db'}", tmp_path, must_be_full=True)
