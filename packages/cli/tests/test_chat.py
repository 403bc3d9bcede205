"""``chatkeep chat``: a REPL scripted through piped stdin, offline and against the fake
model server."""

from __future__ import annotations

import io
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatkeep.cli.main import main
from chatkeep.core import Message, open_store, read_view
from chatkeep.fake_model import FakeModelServer


@pytest.fixture
def url() -> str:
    return f"memory://chat-{uuid.uuid4().hex}"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    pytest.importorskip("chatkeep.openai", reason="--vendor/--protocol need chatkeep-openai")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
    with FakeModelServer() as running:
        yield running


def chat(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    lines: list[str],
    *argv: str,
) -> tuple[int, list[str], str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(line + "\n" for line in lines)))
    code = main(["chat", *argv])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_offline_by_default_one_line_per_turn(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = chat(
        monkeypatch,
        capsys,
        ["Hi, I'm Ada.", "", "What is my name?"],
        "--url",
        url,
        "--session",
        "s",
    )
    assert code == 0
    assert out == [
        '[seen 1] first: "Hi, I\'m Ada." | latest: "Hi, I\'m Ada."',
        "[seen 3] first: \"Hi, I'm Ada.\" | latest: 'What is my name?'",
    ]
    assert "session s" in err and "offline client" in err
    assert [m.role for m in read_view(open_store(url), "s")] == ["user", "assistant"] * 2


def test_history_undo_fork_and_sessions_commands(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = chat(
        monkeypatch,
        capsys,
        ["one", "two", "/undo", "/history", "/fork", "three", "/history 2", "/sessions"],
        "--url",
        url,
        "--session",
        "main",
    )
    assert code == 0
    assert out[2:4] == [
        "undone: user      two",
        "undone: assistant [seen 3] first: 'one' | latest: 'two'",
    ]
    assert out[4:6] == ["user      one", "assistant [seen 1] first: 'one' | latest: 'one'"]
    assert out[6].startswith("forked main -> ")
    fork_id = out[6].split(" -> ")[1].split(" ")[0]
    assert out[7] == "[seen 3] first: 'one' | latest: 'three'"  # the fork saw 'one', not 'two'
    assert out[8:10] == ["user      three", "assistant [seen 3] first: 'one' | latest: 'three'"]
    assert sorted(out[10:]) == sorted([f"* {fork_id}", "  main"])
    store = open_store(url)
    assert [m.text for m in read_view(store, "main")] == [
        "one",
        "[seen 1] first: 'one' | latest: 'one'",
    ]  # the undo holds; the fork did not change it


def test_resuming_a_session_in_a_new_process_sees_its_history(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'chat.db'}"
    for text in ("first", "second"):
        result = subprocess.run(
            [sys.executable, "-m", "chatkeep.cli", "chat", "--url", db, "--session", "trip"],
            input=text + "\n",
            capture_output=True,
            check=False,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[seen 3] first: 'first' | latest: 'second'"


def test_unknown_commands_and_help(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = chat(
        monkeypatch, capsys, ["/help", "/nope", "/undo", "/quit", "never sent"], "--url", url
    )
    assert code == 0
    assert out[0] == "commands:" and any("/fork" in line for line in out)
    assert "nothing to undo" in out
    assert "unknown command '/nope'" in err
    assert not any("never sent" in line for line in out)


def test_responses_service_managed_through_the_fake_server(
    url: str,
    server: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--url", url, "--session", "s", "--protocol", "responses", "--model", "fake-model"]
    args += ["--base-url", server.base_url]
    code, out, _ = chat(monkeypatch, capsys, ["turn 1", "turn 2", "turn 3"], *args)
    assert code == 0 and out[2] == "[seen 5] first: 'turn 1' | latest: 'turn 3'"
    requests = server.requests_for("responses")
    assert [len(r.body["input"]) for r in requests] == [1, 1, 1]
    assert len({r.size for r in requests[1:]}) == 1  # constant-size requests
    # A new process resumes from the response id kept with the transcript ...
    code, out, _ = chat(monkeypatch, capsys, ["turn 4", "/undo", "turn 4b"], *args)
    assert out[0] == "[seen 7] first: 'turn 1' | latest: 'turn 4'"
    # ... and /undo continues from the earlier response: a fork on the service.
    assert out[-1] == "[seen 7] first: 'turn 1' | latest: 'turn 4b'"
    ids = [r.body.get("previous_response_id") for r in server.requests_for("responses")]
    assert ids[-1] == ids[-2] is not None


def test_switching_protocols_never_loses_history(
    url: str,
    server: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    common = ["--url", url, "--session", "s", "--model", "fake-model", "--base-url"]
    responses = [*common, server.base_url, "--protocol", "responses"]
    chat(monkeypatch, capsys, ["one", "two"], *responses)
    _, out, _ = chat(monkeypatch, capsys, ["three"], *common, server.base_url)
    assert out == ["[seen 5] first: 'one' | latest: 'three'"]  # chat completions, whole history
    _, out, _ = chat(monkeypatch, capsys, ["four"], *responses)
    assert out == ["[seen 7] first: 'one' | latest: 'four'"]
    last = server.requests_for("responses")[-1].body
    assert "previous_response_id" not in last and len(last["input"]) == 7  # sent whole, once


def test_conversations_are_linear(
    url: str,
    server: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = chat(
        monkeypatch,
        capsys,
        ["one", "/fork", "/undo", "two"],
        "--url",
        url,
        "--protocol",
        "conversations",
        "--model",
        "fake-model",
        "--base-url",
        server.base_url,
    )
    assert code == 0
    assert out == [
        "[seen 1] first: 'one' | latest: 'one'",
        "[seen 3] first: 'one' | latest: 'two'",
    ]
    assert "linear: it cannot be forked" in err and "linear: a turn cannot be undone" in err
    assert len(server.requests_for("conversations.create")) == 1


def test_a_vendor_preset_speaking_messages(
    url: str,
    server: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("chatkeep.anthropic")
    code, out, err = chat(
        monkeypatch,
        capsys,
        ["hello", "again"],
        "--url",
        url,
        "--vendor",
        "deepseek",
        "--protocol",
        "messages",
        "--model",
        "deepseek-chat",
        "--base-url",
        server.url + "/anthropic",
    )
    assert code == 0, err
    assert out[1] == "[seen 3] first: 'hello' | latest: 'again'"
    assert [r.path for r in server.requests] == ["/anthropic/v1/messages"] * 2
    assert "deepseek messages" in err


def test_service_errors_are_reported_and_the_chat_goes_on(
    url: str,
    server: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server.fail_next(status=400, message="bad luck")  # 4xx: the SDK does not retry
    code, out, err = chat(
        monkeypatch,
        capsys,
        ["lost", "kept"],
        "--url",
        url,
        "--session",
        "s",
        "--model",
        "fake-model",
        "--base-url",
        server.base_url,
        "--no-stream",
    )
    assert code == 1
    assert "error: BadRequestError" in err and "bad luck" in err
    assert out == ["[seen 1] first: 'kept' | latest: 'kept'"]  # the failed turn stored nothing


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--vendor", "kimi", "--protocol", "responses", "--model", "m"],
            "it offers chat_completions",
        ),
        (["--vendor", "nobody", "--model", "m"], "unknown vendor 'nobody'"),
        (["--protocol", "responses"], "--model is required"),
        (["--vendor", "glm", "--model", "m"], "ZHIPUAI_API_KEY or GLM_API_KEY"),
    ],
)
def test_bad_options_are_one_line_errors(
    argv: list[str],
    message: str,
    url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("chatkeep.openai")
    for variable in ("ZHIPUAI_API_KEY", "GLM_API_KEY", "MOONSHOT_API_KEY", "KIMI_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("MOONSHOT_API_KEY", "k")
    code, out, err = chat(monkeypatch, capsys, ["hi"], "--url", url, *argv)
    assert code == 2 and out == []
    assert message in err and err.startswith("chatkeep: error:")


def test_switch_refuses_an_unknown_session_and_new_starts_one(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    converse = ["one", "/new other", "two", "/switch typo", "three", "/switch main", "/history 1"]
    code, out, err = chat(monkeypatch, capsys, converse, "--url", url, "--session", "main")
    assert code == 0
    assert "now in other (new)" in out
    assert f"session 'typo' does not exist in {url}; still in other" in err
    store = open_store(url)
    assert store.read("typo") == []  # nothing was started under the typo
    assert [m.text for m in read_view(store, "other")][::2] == ["two", "three"]
    assert out[-2] == "now in main"
    assert out[-1] == "assistant [seen 1] first: 'one' | latest: 'one'"
    code, _, err = chat(monkeypatch, capsys, ["/new main", "/switch"], "--url", url)
    assert "session 'main' already exists; /switch main continues it" in err
    assert "usage: /switch ID" in err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/history abc", "usage: /history [N], N a positive whole number (got 'abc')"),
        ("/history 0", "usage: /history [N], N a positive whole number (got '0')"),
        ("/undo two", "usage: /undo [N], N a positive whole number (got 'two')"),
        ("/fork now", "usage: /fork takes no argument (got 'now')"),
        ("/quit please", "usage: /quit takes no argument (got 'please')"),
    ],
)
def test_bad_arguments_to_commands_say_so(
    line: str,
    message: str,
    url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = chat(monkeypatch, capsys, ["hello", line, "/history"], "--url", url)
    assert code == 0
    assert message in err.splitlines()
    # The command did nothing: the chat went on, and /history shows the one turn.
    assert out[-2:] == ["user      hello", "assistant [seen 1] first: 'hello' | latest: 'hello'"]


def test_undo_takes_a_number_of_turns(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = chat(
        monkeypatch, capsys, ["a", "b", "c", "/undo 2"], "--url", url, "--session", "s"
    )
    assert code == 0
    view = read_view(open_store(url), "s")
    assert len(view) == 2 and view[0].text == "a"
    assert sum(line.startswith("undone: ") for line in out) == 4


class _InterruptedClient:
    """A model client during whose reply the user presses Ctrl-C."""

    async def get_response(self, messages: object, **_: object) -> object:
        raise KeyboardInterrupt


def test_ctrl_c_during_a_reply_stores_nothing_of_the_turn(url: str) -> None:
    import asyncio

    from chatkeep.cli.chat import ChatRepl

    store = open_store(url)
    out, err = io.StringIO(), io.StringIO()
    repl = ChatRepl(
        store, _InterruptedClient(), session_id="s", protocol="offline", instructions=None,
        stream=False, out=out, err=err,
    )  # fmt: skip
    loop = asyncio.new_event_loop()
    try:
        code = repl.run(io.StringIO("a question\nnever read\n"), loop)
    finally:
        loop.close()
    assert code == 130
    assert "interrupted: nothing of that turn was stored" in err.getvalue()
    assert store.read("s") == []


def test_the_cli_offline_client_keeps_no_requests() -> None:
    # Nothing reads them, and each one holds the whole history sent (issue 30 item 3;
    # benchmarks/chat_memory.py measures a long session).
    from chatkeep.cli.chat import build_client

    client, protocol, _ = build_client()
    assert protocol == "offline" and client.keep_requests == 0
    for n in range(5):
        client.get_response([Message.user(f"turn {n}")])
    assert client.requests == []
