"""``chatkeep info`` (issue 30 item 10): where the data is, read-only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatkeep.cli import info as info_module
from chatkeep.cli.main import main
from chatkeep.core import Record, open_store


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHATKEEP_URL", raising=False)
    return tmp_path


def test_info_on_the_default_store_names_its_file_and_size(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store("sqlite:///chatkeep.db") as store:
        store.append("a", [Record("1", b"{}")])
        store.append("b", [Record("1", b"{}")])
    code, out, err = run(capsys, "info")
    assert code == 0 and err == ""
    lines = dict(line.split(":", 1) for line in out.splitlines())
    assert lines["url"].strip().startswith("sqlite:///chatkeep.db (from the default")
    assert lines["backend"].strip().startswith("sqlite (chatkeep-sqlite ")
    assert "delete" in lines["capabilities"]  # the backend's, not the read-only handle's
    assert lines["sessions"].strip() == "2"
    assert lines["path"].strip() == str(here / "chatkeep.db")
    assert f"({(here / 'chatkeep.db').stat().st_size} bytes)" in lines["size"]
    assert sorted(p.name for p in here.iterdir()) == ["chatkeep.db"]  # no -wal/-shm left


def test_info_of_a_missing_store_creates_nothing(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "info", "--json")
    assert code == 0 and json.loads(out)["exists"] is False
    assert list(here.iterdir()) == []


def test_info_hides_secrets_and_bounds_the_count(
    here: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(info_module, "COUNT_LIMIT", 3)
    store = open_store("memory://info-test")
    for n in range(5):
        store.append(f"s{n}", [Record("1", b"{}")])
    monkeypatch.setenv("CHATKEEP_URL", "memory://info-test")
    code, out, _ = run(capsys, "info", "--json")
    found = json.loads(out)
    assert code == 0 and found["from"] == "$CHATKEEP_URL"
    assert found["sessions"] == 3 and found["sessions_exact"] is False
    code, out, _ = run(capsys, "info")
    assert "sessions:     3+" in out
    code, out, _ = run(
        capsys,
        "info",
        "--url",
        "postgresql://ada:hunter2@127.0.0.1:1/x?connect_timeout=1&retries=0",
    )
    assert "hunter2" not in out + capsys.readouterr().err


def test_plain_progress_never_shows_an_unknown_total() -> None:
    # Without a terminal, a lazily listed migration printed "541/?" to the end.
    import io

    from chatkeep.cli.output import Progress
    from chatkeep.core import TransferProgress

    stream = io.StringIO()
    with Progress("migrate", stream=stream, interval=0) as progress:
        for done in (1, 2):
            progress.update(TransferProgress(done, None, done * 10, done * 100, f"s{done}", 1.0))
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("migrate: 1 sessions so far, 10 records")
    assert lines[-1].startswith("migrate: 2/2 sessions, 20 records")
    assert not any("/?" in line for line in lines)
