"""``pip install 'chatkeep[web]'`` as a user gets it: the wheels of the meta-distribution and
its members, installed into a fresh virtual environment outside the workspace, and then
``chatkeep serve`` answers with its page, its stylesheet and its script (the templates and
static files are in the wheel)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
WHEELS = ("chatkeep", "chatkeep-core", "chatkeep-sqlite", "chatkeep-cli", "chatkeep-web")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _uv(uv: str, *args: str, cwd: Path) -> None:
    """uv from the local package cache first (works offline), then from the index."""
    for extra in (["--offline"], []):
        done = subprocess.run(
            [uv, *args, *extra], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
        )
        if done.returncode == 0:
            return
    raise AssertionError(f"uv {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


def _get(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.status, answer.headers.get_content_type(), answer.read().decode()


def test_pip_install_chatkeep_web_serves(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build wheels (it is installed by ./run)")
    wheels = tmp_path / "wheels"
    for package in WHEELS:
        _uv(uv, "build", "--wheel", "--package", package, "--out-dir", str(wheels), "-q", cwd=ROOT)
    venv = tmp_path / "venv"
    _uv(uv, "venv", "-q", "--python", sys.executable, str(venv), cwd=tmp_path)
    python = venv / "bin" / "python"
    (meta,) = wheels.glob("chatkeep-0*.whl")
    members = [str(w) for w in wheels.glob("chatkeep_*.whl")]
    _uv(uv, "pip", "install", "-q", "--python", str(python),
        f"chatkeep[web] @ {meta.as_uri()}", *members, cwd=tmp_path)  # fmt: skip

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATKEEP_", "VIRTUAL_ENV"))}
    work = tmp_path / "work"
    work.mkdir()
    chatkeep = str(venv / "bin" / "chatkeep")
    demo = subprocess.run(
        [chatkeep, "demo"], cwd=work, env=env, capture_output=True, text=True, check=False
    )
    assert demo.returncode == 0, demo.stderr
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [chatkeep, "serve", "--port", str(port)],
        cwd=work,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(400):  # until it listens (a readiness check, not a fixed wait)
            try:
                status, kind, body = _get(base + "/")
                break
            except (urllib.error.URLError, ConnectionError):
                assert server.poll() is None, server.communicate()[1]
                time.sleep(0.05)
        assert status == 200 and kind == "text/html" and "Sessions" in body
        assert _get(base + "/static/app.css")[1] == "text/css"
        assert "javascript" in _get(base + "/static/app.js")[1]
    finally:
        server.terminate()
        server.communicate(timeout=30)
    files = {p.name for p in work.iterdir()}
    assert files <= {"chatkeep.db", "chatkeep.db-wal", "chatkeep.db-shm"}
