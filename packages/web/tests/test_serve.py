"""``chatkeep serve``: the command line, the refusals before anything opens, and a real
server process answering over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from chatkeep.cli.main import main

pytestmark = pytest.mark.timeout(120)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_non_loopback_host_needs_a_token(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CHATKEEP_WEB_TOKEN", raising=False)
    url = f"sqlite:///{tmp_path / 'none.db'}"
    code, _, err = run(capsys, "serve", "--url", url, "--host", "0.0.0.0")
    assert code == 2 and "--token" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "none.db").exists()  # refused before the store opened


def test_a_weak_token_is_refused_and_never_shown(capsys, tmp_path: Path) -> None:
    code, _, err = run(capsys, "serve", "--url", "memory://", "--token", "short<secret>")
    assert code == 2 and "16 to 256" in err and "short<secret>" not in err


def test_missing_extra_says_what_to_install(capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "chatkeep.web.serve", None)  # as if not installed
    code, _, err = run(capsys, "serve", "--url", "memory://")
    assert code == 2 and "pip install 'chatkeep[web]'" in err


def test_missing_sqlite_file_is_not_created(capsys, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'absent.db'}"
    code, _, err = run(capsys, "serve", "--url", url, "--port", "1")
    assert code == 2 and "no store at" in err
    assert not (tmp_path / "absent.db").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_answers_over_http_and_shows_no_credentials(corpus) -> None:
    port = _free_port()
    url = corpus.url
    env = {**os.environ, "CHATKEEP_WEB_TOKEN": ""}
    env.pop("CHATKEEP_WEB_TOKEN")
    process = subprocess.Popen(
        [sys.executable, "-m", "chatkeep.cli", "serve", "--url", url, "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        body = ""
        for _ in range(200):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
                    body = answer.read().decode()
                    headers = answer.headers
                break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None:
                    break
                time.sleep(0.05)
        assert "Plan a **trip** to Oslo" in body, process.stderr.read() if process.poll() else ""
        assert "default-src 'none'" in headers["content-security-policy"]
        assert headers.get("server") is None
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert f"127.0.0.1:{port}" in err


def test_the_token_comes_from_the_environment_too(capsys, monkeypatch) -> None:
    monkeypatch.setenv("CHATKEEP_WEB_TOKEN", "weak")
    code, _, err = run(capsys, "serve", "--url", "memory://", "--host", "0.0.0.0")
    assert code == 2 and "16 to 256" in err and "weak" not in err
