"""The fake model server left chatkeep-testing: a backend author's install of the suite
does not load it, and its old import path and ``-m`` name still work."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import chatkeep.fake_model as fake_model

TESTING = Path(__file__).resolve().parents[2] / "testing"


def test_the_old_import_path_reexports_the_server() -> None:
    sys.modules.pop("chatkeep.testing.fake_model", None)
    with pytest.warns(DeprecationWarning, match="moved to chatkeep.fake_model"):
        old = importlib.import_module("chatkeep.testing.fake_model")
    assert old.FakeModelServer is fake_model.FakeModelServer
    assert old.RecordedRequest is fake_model.RecordedRequest
    assert old.parse_tool_requests is fake_model.parse_tool_requests


def test_the_old_module_name_still_serves() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "chatkeep.testing.fake_model", "--no-auth"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("FAKE_MODEL_URL=http://127.0.0.1:"), line
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_conformance_suite_loads_without_the_server() -> None:
    code = (
        "import sys\n"
        "import chatkeep.testing, chatkeep.testing.suite, chatkeep.testing.pytest_plugin\n"
        "print(sorted(m for m in sys.modules\n"
        "             if 'fake_model' in m or m in ('openai', 'anthropic')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_chatkeep_testing_does_not_depend_on_the_server() -> None:
    project = tomllib.loads((TESTING / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not [d for d in project["dependencies"] if "fake-model" in d or "openai" in d]
    assert project["optional-dependencies"]["fake-model"] == ["chatkeep-fake-model"]
    # Only the re-exporting shim is left where the server was.
    shim = TESTING / "src" / "chatkeep" / "testing" / "fake_model"
    assert sorted(p.name for p in shim.glob("*.py")) == ["__init__.py", "__main__.py"]
