"""A backend written outside this repository installs, is discovered by name, opens by URL
and passes the conformance suite through the documented one-command ways.

The backend (tests/third_party_fixture/) is built as its own distribution into a throw-away
virtual environment together with chatkeep-core and chatkeep-testing from this checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "third_party_fixture"

pytestmark = pytest.mark.slow


def _clean_env() -> dict[str, str]:
    # Nothing of the developer's environment may leak into the throw-away venv.
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT"}
        and not key.startswith("CHATKEEP_")
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _uv(uv: str, *args: str, cwd: Path) -> None:
    # Prefer the local package cache (works offline); go to the index only if it must.
    for extra in (["--offline"], []):
        result = subprocess.run(
            [uv, *args, *extra],
            check=False,
            cwd=cwd,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=180,
        )
        if result.returncode == 0:
            return
    raise AssertionError(f"uv {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    work = tmp_path_factory.mktemp("third_party")
    dist = work / "tpstore"
    shutil.copytree(FIXTURE, dist, ignore=shutil.ignore_patterns("__pycache__"))
    venv = work / "venv"
    # The interpreter running these tests, so no Python download is ever needed.
    _uv(uv, "venv", "--quiet", "--python", sys.executable, str(venv), cwd=work)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _uv(
        uv,
        "pip",
        "install",
        "--quiet",
        "--python",
        str(python),
        str(REPO / "core"),
        str(REPO / "packages" / "testing"),
        str(dist),
        cwd=work,
    )
    return python


def _run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), *args],
        check=False,
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_discovered_by_name(venv_python: Path, tmp_path: Path) -> None:
    code = (
        "import json; from chatkeep.core import backends; "
        "print(json.dumps(backends()['tp'].as_dict()))"
    )
    result = _run(venv_python, "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["distribution"] == "tpstore"
    assert info["schemes"] == ["tp"]
    assert set(info["capabilities"]) == {"shared", "durable", "delete", "list_sessions", "close"}


def test_opened_by_url(venv_python: Path, tmp_path: Path) -> None:
    code = (
        "import sys; from chatkeep.core import open_store, Record\n"
        "with open_store('tp:///' + sys.argv[1]) as store:\n"
        "    store.append('s', [Record('m1', b'hi')])\n"
        "    print(type(store.backend).__module__, store.read('s'))\n"
    )
    result = _run(venv_python, "-c", code, str(tmp_path / "x.db"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "tpstore [Record(id='m1', data=b'hi')]"


def test_passes_with_pytest_pyargs(venv_python: Path, tmp_path: Path) -> None:
    url = f"tp:///{tmp_path / 'pyargs.db'}"
    result = _run(
        venv_python,
        "-m",
        "pytest",
        "--pyargs",
        "chatkeep.testing.suite",
        "--chatkeep-url",
        url,
        "-q",
        "-p",
        "no:cacheprovider",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
    assert "failed" not in result.stdout


def test_module_runner_reports_full(venv_python: Path, tmp_path: Path) -> None:
    url = f"tp:///{tmp_path / 'runner.db'}"
    result = _run(venv_python, "-m", "chatkeep.testing", url, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["level"] == "full"
    assert report["ok"] is True
    statuses = {name: row["status"] for name, row in report["capabilities"].items()}
    assert statuses == {
        "core": "pass",
        "delete": "pass",
        "list_sessions": "pass",
        "close": "pass",
        "shared": "pass",
        "durable": "pass",
        "ttl": "not declared",
        "conditional": "not declared",
        "namespace": "not declared",
        "recent": "not declared",
        "fulltext": "not declared",
        "views": "pass",
        "lifecycle": "pass",
        "damage": "not provided",
        "erasure": "not provided",
        "durability": "not provided",
        "expiry": "not declared",
        "ties": "not declared",
    }
