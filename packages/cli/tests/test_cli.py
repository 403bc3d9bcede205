"""The ``chatkeep`` command, called in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatkeep.cli.main import build_parser, main


def test_backends_table_has_a_row_per_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[0] == "NAME"
    names = {line.split()[0] for line in lines[1:]}
    assert {"memory", "sqlite"} <= names


def test_backends_json_is_machine_readable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backends", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    memory = next(entry for entry in entries if entry["name"] == "memory")
    assert memory["schemes"] == ["memory"]
    assert memory["capabilities"] == [
        "close",
        "conditional",
        "delete",
        "list_sessions",
        "namespace",
    ]
    assert set(memory) == {
        "name",
        "distribution",
        "version",
        "schemes",
        "capabilities",
        "description",
        "wrapper",
    }
    assert memory["wrapper"] is False


def test_demo_in_memory_shows_the_history_was_seen(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--url", "memory://"]) == 0
    out = capsys.readouterr().out
    assert "[seen 1] first: 'Hi! My name is Ada.'" in out
    assert "[seen 7] first: 'Hi! My name is Ada.'" in out


def test_demo_uses_chatkeep_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CHATKEEP_URL", "memory://from-env")
    assert main(["demo"]) == 0
    assert "store: memory (memory://from-env)" in capsys.readouterr().out


def test_unknown_backend_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--url", "bogus://nowhere"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chatkeep: error: no chatkeep backend named 'bogus'")
    assert len(err.strip().splitlines()) == 1


def test_a_command_is_required() -> None:
    with pytest.raises(SystemExit) as raised:
        build_parser().parse_args([])
    assert raised.value.code == 2


def test_conformance_on_memory_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "memory://"]) == 0
    assert "memory" in capsys.readouterr().out
