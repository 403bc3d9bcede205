"""The ``chatkeep`` command, called in-process: backends, --version, --help, completion,
URLs that are not store URLs, and the conformance command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatkeep.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_backends_table_has_a_row_per_backend(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "backends")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "DISTRIBUTION", "VERSION", "SCHEMES", "CAPABILITIES"]
    assert {"memory", "sqlite"} <= {line.split()[0] for line in lines[1:]}


def test_backends_json_is_machine_readable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "backends", "--json")
    assert code == 0
    memory = next(entry for entry in json.loads(out) if entry["name"] == "memory")
    assert memory["schemes"] == ["memory"]
    assert memory["capabilities"] == [
        "close",
        "conditional",
        "delete",
        "list_sessions",
        "namespace",
        "recent",
    ]
    assert memory["wrapper"] is False


def test_version_names_the_cli_and_the_core(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.startswith(
        f"chatkeep {version('chatkeep-cli')} (chatkeep-core {version('chatkeep-core')}"
    )


def test_help_has_examples_and_names_the_default_store(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "Examples:" in out and "chatkeep sessions show SESSION_ID" in out
    for command in ("demo", "chat", "export", "import", "migrate", "conformance", "completion"):
        assert f"  {command} " in out, command
    code, out, _ = run(capsys, "sessions", "list", "--help")
    text = " ".join(out.split())
    assert "default: $CHATKEEP_URL, else sqlite:///chatkeep.db in the current directory" in text


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert code in (0, 2) and "Usage: chatkeep" in out + err


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "completion", shell)
    assert code == 0 and "_CHATKEEP_COMPLETE" in out


def test_completion_offers_commands_and_session_ids(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from chatkeep.core import Record, open_store

    url = "memory://completion-test"
    store = open_store(url)
    store.append("trip-oslo", [Record("r", b"x")])
    monkeypatch.setenv("_CHATKEEP_COMPLETE", "bash_complete")
    for words, cword, expected in (
        ("chatkeep se", "1", "sessions"),
        (f"chatkeep sessions show --url {url} trip", "5", "trip-oslo"),
    ):
        monkeypatch.setenv("COMP_WORDS", words)
        monkeypatch.setenv("COMP_CWORD", cword)
        with pytest.raises(SystemExit) as done:  # click's completion ends the process
            main([])
        assert done.value.code == 0
        assert f"plain,{expected}" in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("chats.db", "did you mean 'sqlite:///chats.db'?"),
        ("/var/lib/chats.db", "did you mean 'sqlite:////var/lib/chats.db'?"),
        ("sqllite:///chats.db", "did you mean 'sqlite:///chats.db'?"),
        ("postgress://localhost/db", "did you mean 'postgres://localhost/db'?"),
        ("redis+clustr://h:7000", "did you mean 'redis+cluster://h:7000'?"),
        ("sqlite:/chats.db", "did you mean 'sqlite:///chats.db'?"),
        ("sqlite://chats.db", "did you mean 'sqlite:///chats.db'?"),
        ("redis:/localhost", "did you mean 'redis://localhost'?"),
    ],
)
def test_urls_that_are_not_store_urls_get_a_suggestion(
    url: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    for argv in (["sessions", "list", "--url"], ["chat", "--url"], ["demo", "--url"], ["export"]):
        code, out, err = run(capsys, *argv, url)
        assert code == 2 and out == "", argv
        assert err.startswith("chatkeep: error: ") and expected in err, err
        assert "a store URL looks like sqlite:///chats.db" in err
        assert "pip install" not in err
        assert len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_an_uninstalled_in_repo_backend_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import chatkeep.cli.stores as stores

    real = stores.backends
    monkeypatch.setattr(
        stores, "backends", lambda: {k: v for k, v in real().items() if k != "redis"}
    )
    code, _, err = run(capsys, "sessions", "list", "--url", "redis://localhost:6379/0")
    assert code == 2 and "pip install 'chatkeep[redis]'" in err


def test_secrets_never_appear_in_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "sessions", "list", "--url", "postgress://ada:hunter2@db/x")
    assert code == 2 and "hunter2" not in err and "ada:***@db" in err


def test_conformance_on_memory_passes_with_json_anywhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (["memory://", "--json"], ["--json", "memory://"]):
        code, out, _ = run(capsys, "conformance", *argv, "--", "-k", "Slice")
        report = json.loads(out[out.index("{") :])
        assert code == 1  # a narrowed run is partial, never full
        assert report["backend"] == "memory" and report["narrowed"] is True
        assert report["counts"]["failed"] == 0 and report["counts"]["passed"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "Missing argument 'URL'"),
        (["memory://", "--bogus"], "No such option '--bogus'"),
        (["memory://", "extra"], "unexpected extra argument"),
        (["sqlite"], "did you mean 'sqlite:///sqlite'?"),
    ],
)
def test_conformance_usage_errors_exit_2_without_running(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "conformance", *argv)
    assert code == 2 and out == ""
    assert message.lower() in err.lower()
