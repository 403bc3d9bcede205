"""Every member builds a wheel that shares the ``chatkeep`` namespace (PEP 420)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = sorted(
    path.parent
    for pattern in ("core/pyproject.toml", "plugins/*/pyproject.toml", "packages/*/pyproject.toml")
    for path in ROOT.glob(pattern)
)


def test_no_namespace_init_in_any_member() -> None:
    offenders = [str(p) for p in ROOT.glob("*/**/src/chatkeep/__init__.py")]
    offenders += [str(p) for p in ROOT.glob("core/src/chatkeep/__init__.py")]
    assert offenders == []


def test_every_member_has_readme_tests_and_py_typed() -> None:
    assert MEMBERS, "no members found"
    for member in MEMBERS:
        assert (member / "README.md").stat().st_size > 200, f"{member.name}: README too thin"
        assert list((member / "tests").glob("test_*.py")), f"{member.name}: no tests"
        modules = [p for p in (member / "src" / "chatkeep").iterdir() if p.is_dir()]
        assert len(modules) == 1, f"{member.name}: expected one module under src/chatkeep"
        assert (modules[0] / "py.typed").exists(), f"{member.name}: no py.typed"


@pytest.mark.slow
def test_wheels_share_the_namespace(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build wheels (it is installed by ./run)")
    for member in MEMBERS:
        text = (member / "pyproject.toml").read_text()
        match = re.search(r'^name = "([^"]+)"', text, re.MULTILINE)
        assert match, member
        name = match.group(1)
        subprocess.run(
            [uv, "build", "--wheel", "--package", name, "--out-dir", str(tmp_path), "-q"],
            cwd=ROOT,
            check=True,
        )
        wheel = next(tmp_path.glob(f"{name.replace('-', '_')}-*.whl"))
        names = zipfile.ZipFile(wheel).namelist()
        assert "chatkeep/__init__.py" not in names, f"{wheel.name} owns the namespace"
        module = name.removeprefix("chatkeep-").replace("-", "_")
        assert f"chatkeep/{module}/__init__.py" in names, f"{wheel.name}: {names[:10]}"
        assert f"chatkeep/{module}/py.typed" in names


def _uv_retrying(uv: str, *args: str, cwd: Path) -> None:
    """uv from the local package cache first (works offline), then from the index."""
    for extra in (["--offline"], []):
        done = subprocess.run(
            [uv, *args, *extra], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
        )
        if done.returncode == 0:
            return
    raise AssertionError(f"uv {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


@pytest.mark.slow
def test_pip_install_chatkeep_is_light_and_the_cli_works(tmp_path: Path) -> None:
    """`pip install chatkeep` as a user gets it: the meta-distribution brings the core, SQLite
    and the CLI, and no test tooling; the CLI then answers, and what needs an extra says so."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build wheels (it is installed by ./run)")
    wheels = tmp_path / "wheels"
    for package in ("chatkeep", "chatkeep-core", "chatkeep-sqlite", "chatkeep-cli"):
        _uv_retrying(
            uv, "build", "--wheel", "--package", package, "--out-dir", str(wheels), "-q", cwd=ROOT
        )
    venv = tmp_path / "venv"
    _uv_retrying(uv, "venv", "-q", "--python", sys.executable, str(venv), cwd=tmp_path)
    python = venv / "bin" / "python"
    # Only these four from here: a dependency on any other chatkeep-* distribution would
    # have to come from the index, and fail.
    files = sorted(str(w) for w in wheels.glob("*.whl"))
    _uv_retrying(uv, "pip", "install", "-q", "--python", str(python), *files, cwd=tmp_path)
    listed = subprocess.run(
        [uv, "pip", "list", "--python", str(python), "--format", "json"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    installed = {entry["name"].lower() for entry in json.loads(listed)}
    assert {"chatkeep", "chatkeep-core", "chatkeep-sqlite", "chatkeep-cli"} <= installed
    assert not installed & {"pytest", "hypothesis", "chatkeep-testing", "mypy", "moto"}, installed
    assert len(installed) < 30, sorted(installed)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATKEEP_", "VIRTUAL_ENV"))}
    work = tmp_path / "work"
    work.mkdir()

    def chatkeep(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin" / "chatkeep"), *args],
            cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    version = chatkeep("--version")
    assert version.returncode == 0 and version.stdout.startswith("chatkeep 0."), version
    missing = chatkeep("sessions", "list", "--url", "sqlite:///missing.db")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip().splitlines() == [
        "chatkeep: error: no store at sqlite:///missing.db (from --url): SQLite database "
        f"'{work / 'missing.db'}' does not exist (mode=ro never creates it); check the "
        "path, or open it without mode= to create it"
    ]
    suite = chatkeep("conformance", "memory://")
    assert suite.returncode == 2 and suite.stderr.strip().splitlines() == [
        "chatkeep: error: chatkeep conformance needs the conformance suite: "
        "pip install 'chatkeep[testing]'"
    ]
    client = chatkeep("chat", "--vendor", "deepseek", "--model", "deepseek-chat")
    assert client.returncode == 2 and client.stderr.strip().splitlines() == [
        "chatkeep: error: --vendor/--protocol/--model need a model client: "
        "pip install 'chatkeep[openai]'"
    ]
    demo = chatkeep("demo")  # the offline model is in the core: no extra
    assert demo.returncode == 0, demo.stderr
    assert chatkeep("sessions", "list", "--quiet").stdout.count("\n") == 2
    # The one default store, and nothing else (SQLite's WAL files beside it).
    assert {p.name for p in work.iterdir()} <= {"chatkeep.db", "chatkeep.db-wal", "chatkeep.db-shm"}
    assert (work / "chatkeep.db").exists()
