"""``chatkeep chat`` on a pseudo-terminal (the stdlib ``pty``), as a person types: arrows
edit the line, the up arrow recalls it, Ctrl-C clears a line that has text and leaves at
an empty prompt (exit 130, no traceback)."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

import pytest

from chatkeep.core import Message, encode_records, open_store, read_view

CHATKEEP = Path(sys.executable).with_name("chatkeep")
LEFT, UP, CTRL_C, CTRL_D = b"\x1b[D", b"\x1b[A", b"\x03", b"\x04"


class Terminal:
    """A process on a pseudo-terminal; :meth:`expect` waits for text on its screen."""

    def __init__(
        self, *argv: str, cwd: Path, columns: int = 80, env: dict[str, str] | None = None
    ) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("CHATKEEP_")}
        # The prompt's history file goes under the test's directory, never the user's.
        env = {**base, "XDG_STATE_HOME": str(cwd / "state"), **(env or {})}
        env["TERM"] = "xterm"
        env["COLUMNS"] = str(columns)
        pid, fd = pty.fork()
        if pid == 0:  # the child: the chat on the terminal
            os.chdir(cwd)
            os.execve(str(CHATKEEP), [str(CHATKEEP), *argv], env)
        self.pid, self.fd = pid, fd
        self.screen = b""

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 4096)
        except OSError:  # the child closed the terminal
            return False
        self.screen += data
        return bool(data)

    def expect(self, text: str, timeout: float = 60.0) -> None:
        """Wait until ``text`` has appeared on the screen since the last expect."""
        deadline = time.monotonic() + timeout
        want = text.encode()
        while want not in self.screen:
            if time.monotonic() > deadline or not self._read(0.1):
                raise AssertionError(f"{text!r} not shown; screen: {self.screen.decode()!r}")
        self.screen = self.screen[self.screen.index(want) + len(want) :]

    def type(self, keys: bytes) -> None:
        """Send keys, one write each, so the terminal sees them as typed."""
        os.write(self.fd, keys)
        time.sleep(0.15)

    def exit_code(self, timeout: float = 30.0) -> int:
        """Wait for the process; return its exit code (reading what it still prints)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                while self._read(0.05):
                    pass
                return os.waitstatus_to_exitcode(status)
            self._read(0.05)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError(f"still running; screen: {self.screen.decode()!r}")


def test_line_editing_history_and_ctrl_c(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    term = Terminal("chat", "--url", url, "--session", "s", cwd=tmp_path)
    term.expect("you> ")
    term.type(b"hello")
    term.type(LEFT + LEFT)
    term.type(b"X\r")  # inserted before "lo": the arrows moved the cursor, printed nothing
    term.expect("[seen 1] first: 'helXlo'")
    term.expect("you> ")
    term.type(b"never sent")
    term.type(CTRL_C)  # a line with text: cleared, a new prompt, the chat goes on
    term.expect("you> ")
    term.type(UP + b"\r")  # the history holds the sent line, not the cleared one
    term.expect("[seen 3] first: 'helXlo' | latest: 'helXlo'")
    term.expect("you> ")
    term.type(CTRL_C)  # at an empty prompt: leave
    code = term.exit_code()
    screen = term.screen.decode(errors="replace")
    assert code == 130, screen
    assert "Traceback" not in screen and "KeyboardInterrupt" not in screen
    assert "^[[" not in screen  # no raw escape sequences echoed
    with open_store(url) as store:
        texts = [m.text for m in read_view(store, "s") if m.role == "user"]
    assert texts == ["helXlo", "helXlo"]  # "never sent" never was


def test_end_of_input_leaves_with_0(tmp_path: Path) -> None:
    term = Terminal("chat", "--url", "memory://", cwd=tmp_path)
    term.expect("you> ")
    term.type(b"/switch nowhere\r")
    term.expect("session 'nowhere' does not exist")
    term.expect("you> ")
    term.type(CTRL_D)
    assert term.exit_code() == 0


def test_sessions_list_on_a_terminal_never_cuts_an_id(tmp_path: Path) -> None:
    """A rich table when the terminal is wide enough, aligned text when it is not: the ids
    are whole either way."""
    url = f"sqlite:///{tmp_path / 'list.db'}"
    long_id = "a-session-id-of-forty-five-characters-exactly"
    title = "a title that makes the row wider than eighty"
    with open_store(url) as store:
        store.append(long_id, encode_records([Message.user(title, message_id="m1")]))
    for columns, ruled in ((80, False), (200, True)):
        term = Terminal("sessions", "list", "--url", url, cwd=tmp_path, columns=columns)
        assert term.exit_code() == 0
        screen = term.screen.decode()
        assert long_id in screen and title in screen
        assert ("─" in screen) is ruled  # rich's rule under the header


def test_the_line_history_is_kept_across_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    term = Terminal("chat", "--url", url, "--session", "s", cwd=tmp_path)
    term.expect("you> ")
    term.type(b"remember me\r")
    term.expect("you> ")
    term.type(CTRL_D)
    assert term.exit_code() == 0
    saved = tmp_path / "state" / "chatkeep" / "history"
    assert "remember me" in saved.read_text(encoding="utf-8", errors="replace")
    term = Terminal("chat", "--url", url, "--session", "s", cwd=tmp_path)  # a new run
    term.expect("you> ")
    term.type(UP + b"\r")  # the line typed in the previous run
    term.expect("latest: 'remember me'")
    term.expect("you> ")
    term.type(CTRL_D)
    assert term.exit_code() == 0
    with open_store(url) as store:
        texts = [m.text for m in read_view(store, "s") if m.role == "user"]
    assert texts == ["remember me", "remember me"]


def test_the_history_file_is_chosen_by_the_environment_and_never_fails(tmp_path: Path) -> None:
    named = tmp_path / "elsewhere" / "lines"
    term = Terminal(
        "chat", "--url", "memory://", cwd=tmp_path, env={"CHATKEEP_HISTORY_FILE": str(named)}
    )
    term.expect("you> ")
    term.type(b"kept here\r")
    term.expect("you> ")
    term.type(CTRL_D)
    assert term.exit_code() == 0
    assert "kept here" in named.read_text(encoding="utf-8", errors="replace")
    assert not (tmp_path / "state").exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for env in (
        {"CHATKEEP_HISTORY_FILE": str(blocker / "history")},
        {"XDG_STATE_HOME": str(blocker)},
    ):
        term = Terminal("chat", "--url", "memory://", cwd=tmp_path, env=env)
        term.expect("you> ")
        term.type(b"still chatting\r")
        term.expect("[seen 1]")
        term.expect("you> ")
        term.type(CTRL_D)
        code = term.exit_code()
        screen = term.screen.decode(errors="replace")
        assert code == 0 and "Traceback" not in screen, screen


def test_where_the_history_file_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from chatkeep.cli.chat import history_file

    monkeypatch.delenv("CHATKEEP_HISTORY_FILE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert history_file() == tmp_path / "chatkeep" / "history"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")  # the spec: absolute only
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert history_file() == tmp_path / "home" / ".local" / "state" / "chatkeep" / "history"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert history_file() == tmp_path / "home" / ".local" / "state" / "chatkeep" / "history"
    monkeypatch.setenv("CHATKEEP_HISTORY_FILE", str(tmp_path / "mine"))
    assert history_file() == tmp_path / "mine"
    monkeypatch.setenv("CHATKEEP_HISTORY_FILE", "")  # empty: no history file
    assert history_file() is None


def test_a_bracketed_paste_of_several_lines_is_one_turn(tmp_path: Path) -> None:
    """What a terminal in bracketed-paste mode sends for a pasted block (its lines ended by
    carriage returns, between the paste markers): one message, sent by the Enter after."""
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    term = Terminal("chat", "--url", url, "--session", "s", cwd=tmp_path)
    term.expect("you> ")
    term.type(b"\x1b[200~first line\rsecond line\rthird line\x1b[201~")
    term.type(b"\r")
    term.expect("[seen 1]")
    term.expect("you> ")
    term.type(CTRL_D)
    code = term.exit_code()
    screen = term.screen.decode(errors="replace")
    assert code == 0 and "Traceback" not in screen, screen
    assert "[seen 2]" not in screen
    with open_store(url) as store:
        texts = [m.text for m in read_view(store, "s") if m.role == "user"]
    assert texts == ["first line\nsecond line\nthird line"]
