"""The ``chatkeep`` command, run as a user would run it (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def chatkeep(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {key: value for key, value in os.environ.items() if key != "CHATKEEP_URL"}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "chatkeep.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_demo_on_the_embedded_sqlite_default(tmp_path: Path) -> None:
    result = chatkeep("demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "store: sqlite" in result.stdout
    assert "second process" in result.stdout
    # The resumed process saw the six earlier messages and the first user message.
    assert "[seen 7] first: 'Hi! My name is Ada.'" in result.stdout
    # The one default store of every command, so `sessions list` finds the demo's session.
    assert (tmp_path / "chatkeep.db").exists()
    listing = chatkeep("sessions", "list", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert len(listing.stdout.splitlines()) == 3  # header, the session and its fork


def test_demo_follows_chatkeep_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    result = chatkeep("demo", cwd=tmp_path, env={"CHATKEEP_URL": url})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "elsewhere.db").exists()
    assert not (tmp_path / "chatkeep.db").exists()


def test_demo_on_memory_resumes_in_process(tmp_path: Path) -> None:
    result = chatkeep("demo", "--url", "memory://", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "resuming here instead" in result.stdout
    assert "[seen 7]" in result.stdout


def test_backends_json_lists_memory_and_sqlite(tmp_path: Path) -> None:
    result = chatkeep("backends", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    listed = {entry["name"]: entry for entry in json.loads(result.stdout)}
    assert listed["memory"]["distribution"] == "chatkeep-core"
    assert listed["sqlite"]["distribution"] == "chatkeep-sqlite"
    assert {"delete", "list_sessions", "close", "shared", "durable"} <= set(
        listed["sqlite"]["capabilities"]
    )
    table = chatkeep("backends", cwd=tmp_path)
    assert table.stdout.splitlines()[0].split() == [
        "NAME",
        "DISTRIBUTION",
        "VERSION",
        "SCHEMES",
        "CAPABILITIES",
    ]


def test_unknown_backend_is_a_clear_error(tmp_path: Path) -> None:
    result = chatkeep("demo", "--url", "nosuch://x", cwd=tmp_path)
    assert result.returncode == 2
    assert "no backend has the scheme 'nosuch'" in result.stderr
    assert "installed schemes: " in result.stderr
    assert "memory" in result.stderr and "sqlite" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_conformance_command_passes_on_sqlite(tmp_path: Path) -> None:
    result = chatkeep("conformance", f"sqlite:///{tmp_path / 'c.db'}", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "full" in result.stdout.lower()


def test_conformance_command_fails_on_unknown_backend(tmp_path: Path) -> None:
    result = chatkeep("conformance", "nosuch://x", cwd=tmp_path)
    assert result.returncode != 0
