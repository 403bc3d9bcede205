"""Messages of several lines in ``chatkeep chat`` (issue 30 item 4): a bracketed paste is
one message, ``/multi`` ... ``/end`` is one message, ``/edit`` composes one in $EDITOR."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from chatkeep.cli.main import main
from chatkeep.core import open_store, read_view


def chat(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, text: str
) -> tuple[int, str, str, list[str]]:
    """Pipe ``text`` into ``chatkeep chat`` on a fresh store; the user messages stored."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    code = main(["chat", "--session", "s", "--url", "sqlite:///c.db", "--no-stream"])
    captured = capsys.readouterr()
    with open_store("sqlite:///c.db") as store:
        sent = [m.text for m in read_view(store, "s") if m.role == "user"]
    return code, captured.out, captured.err, sent


@pytest.fixture(autouse=True)
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHATKEEP_URL", raising=False)
    return tmp_path


def test_a_bracketed_paste_of_several_lines_is_one_message(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pasted = "\x1b[200~first line\nsecond line\nthird line\x1b[201~\nafter\n"
    code, out, _, sent = chat(capsys, monkeypatch, pasted)
    assert code == 0
    assert sent == ["first line\nsecond line\nthird line", "after"]
    assert out.count("[seen") == 2


def test_multi_collects_lines_until_end(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err, sent = chat(capsys, monkeypatch, "/multi\none\n\ntwo\n/end\n/multi\n/end\nnext\n")
    assert code == 0 and "end it with a line /end" in err and "nothing sent" in err
    assert sent == ["one\n\ntwo", "next"]


def test_edit_sends_what_was_written_in_the_editor(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, here: Path
) -> None:
    editor = here / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "written\\nin the editor\\n" > "$1"\n')
    editor.chmod(0o755)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"sh {editor}")
    code, _, _, sent = chat(capsys, monkeypatch, "/edit\n")
    assert code == 0 and sent == ["written\nin the editor"]


def test_edit_with_an_editor_that_fails_or_writes_nothing_sends_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    for editor, said in (("false", "exited with 1"), ("true", "empty message")):
        monkeypatch.setenv("EDITOR", editor)
        code, _, err, sent = chat(capsys, monkeypatch, "/edit\n")
        assert said in err and sent == [] and code == 0, editor
    monkeypatch.setenv("EDITOR", "/no/such/editor")
    code, _, err, sent = chat(capsys, monkeypatch, "/edit\n")
    assert code == 1 and "cannot run the editor" in err and sent == []
