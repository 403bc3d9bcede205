"""Issue 30 item 6: every mistake a newcomer made in their first hour is one clear line on
stderr (exit 2 for a store that did not open), with no traceback and nothing created."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chatkeep.cli.main import main
from chatkeep.core import Agent, HistoryProvider, OfflineChatClient, open_store
from chatkeep.core.views import read_view

CHATKEEP = Path(sys.executable).with_name("chatkeep")
DEAD_REDIS = "redis://127.0.0.1:1/0?retries=2&retry_backoff=0&socket_connect_timeout=1"
DEAD_POSTGRES = "postgresql://127.0.0.1:1/chats?connect_timeout=1&retries=0"


def fill(url: str = "sqlite:///chatkeep.db") -> None:
    with open_store(url) as store:
        Agent(OfflineChatClient(), history_provider=HistoryProvider(store)).run_sync("hi")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(code: int, err: str, expected: int = 2) -> str:
    lines = err.strip().splitlines()
    assert code == expected and len(lines) == 1, (code, err)
    assert lines[0].startswith("chatkeep: error: ") and "Traceback" not in err
    return lines[0]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHATKEEP_URL", raising=False)
    return tmp_path


def test_import_of_a_missing_file_creates_no_store(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = one_line(*run(capsys, "import", "-i", "missing.jsonl")[::2])
    assert "cannot read 'missing.jsonl': No such file or directory" in line
    assert list(here.iterdir()) == []


def test_export_into_a_missing_directory(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fill()
    before = sorted(here.iterdir())
    line = one_line(*run(capsys, "export", "-o", "/nonexistent-dir/x.jsonl")[::2])
    assert "cannot write '/nonexistent-dir/x.jsonl'" in line
    assert sorted(here.iterdir()) == before


@pytest.mark.parametrize("command", [["sessions", "list"], ["chat"], ["import"]])
def test_a_directory_as_the_sqlite_path(
    here: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "data").mkdir()
    code, _, err = run(capsys, *command, "--url", "sqlite:///data")
    line = one_line(code, err)
    assert "is a directory" in line and "disk I/O" not in line
    assert list((here / "data").iterdir()) == []


def test_chat_refuses_input_that_is_not_utf8_and_stores_the_rest(
    here: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bytes that are not UTF-8 reach Python's stdin as lone surrogates.
    monkeypatch.setattr(sys, "stdin", io.StringIO("hi \udcff there\nhello\n"))
    code, out, err = run(capsys, "chat", "--session", "s", "--url", "sqlite:///c.db")
    assert code == 1
    assert "not valid UTF-8" in err and "Traceback" not in err
    assert out.count("[seen") == 1  # no reply to the refused line
    with open_store("sqlite:///c.db") as store:
        assert read_view(store, "s")[0].text == "hello"


def test_migrate_of_a_missing_session_blames_the_source_and_creates_nothing(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill()
    code, _, err = run(
        capsys, "migrate", "sqlite:///chatkeep.db", "sqlite:///dst.db", "--session", "nope"
    )
    line = one_line(code, err)
    assert "'nope' does not exist" in line and "SOURCE" in line and "dst.db" not in line
    assert not (here / "dst.db").exists()


def test_chat_with_an_unreachable_store_prints_no_banner(
    here: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("hello\n"))
    code, out, err = run(capsys, "chat", "--url", DEAD_REDIS)
    line = one_line(code, err)
    assert "unavailable" in line and "chatkeep chat: session" not in err and out == ""


def test_an_unreachable_redis_is_one_line_without_retry_warnings_or_append_advice(
    here: Path,
) -> None:
    # A subprocess: in-process, pytest's own log handlers would hide the warnings anyway.
    env = {key: value for key, value in os.environ.items() if key != "CHATKEEP_URL"}
    result = subprocess.run(
        [str(CHATKEEP), "sessions", "list", "--url", DEAD_REDIS],
        cwd=here, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    line = one_line(result.returncode, result.stderr)  # no warning lines before it
    assert "failed 3 time(s)" in line and "append" not in line


def test_postgres_errors_show_the_url_as_typed_on_one_line(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = one_line(*run(capsys, "sessions", "list", "--url", DEAD_POSTGRES)[::2])
    assert "mode=ro" not in line and "postgresql://127.0.0.1:1/chats" in line


def test_an_empty_url_option_is_refused(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["sessions", "list"], ["chat"], ["export"]):
        line = one_line(*run(capsys, *command, "--url", "")[::2])
        assert "--url is empty" in line, command
    assert list(here.iterdir()) == []


def test_run_sync_with_a_session_id_says_how_to_resume() -> None:
    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider("memory://"))
    with pytest.raises(TypeError, match=r"AgentSession\('an id string'\)"):
        agent.run_sync("hello", "an id string")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a str, a Message or a list"):
        agent.run_sync(5)  # type: ignore[arg-type]
