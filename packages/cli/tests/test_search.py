"""``chatkeep search``, ``chatkeep sessions list -q`` and ``chatkeep index build`` in real
console-script runs on a SQLite file (indexed) and through the encryption wrapper (a scan)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from chatkeep.cli.search import _line, parse_since
from chatkeep.core import (
    FunctionCallContent,
    Message,
    Record,
    TextContent,
    encode_records,
    new_id,
    open_store,
    search,
)

from .test_recent_listing import chatkeep


def _turn(*contents: object) -> list[Record]:
    parts = [TextContent(c) if isinstance(c, str) else c for c in contents]
    return encode_records([Message("user", parts, message_id=new_id())])  # type: ignore[arg-type]


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'chats.db'}"
    with open_store(url) as store:
        store.append("trip-a", _turn("Where is the Oslo invoice?"))
        store.append("trip-b", _turn("Ålesund weather", FunctionCallContent("c", "get_weather")))
        store.append("trip-b", _turn("and the OSLO invoice again"))
    return url


def test_search_prints_one_hit_per_line_plain_when_piped(url: str, tmp_path: Path) -> None:
    found = chatkeep("search", "oslo", "invoice", "--url", url, cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert [line.split("  ")[1:4] for line in lines] == [
        ["trip-b", "#1", "user"],
        ["trip-a", "#0", "user"],
    ]
    assert lines[0].endswith("and the OSLO invoice again")  # no escape codes in a pipe
    assert "\x1b" not in found.stdout + found.stderr
    # a loaded machine may take over a second and print progress lines, never anything else
    assert all(line.startswith("chatkeep: searched ") for line in found.stderr.splitlines())


def test_search_json_lines_filters_and_exit_1_when_nothing_matched(
    url: str, tmp_path: Path
) -> None:
    found = chatkeep("search", "alesund", "--json", "--role", "user", "--url", url, cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    [hit] = [json.loads(line) for line in found.stdout.splitlines()]
    assert (hit["session_id"], hit["position"], hit["snippet"][:15]) == (
        "trip-b",
        0,
        "Ålesund weather",
    )
    tool = chatkeep("search", "get_weather", "--url", url, cwd=tmp_path)
    assert tool.returncode == 0 and "trip-b" in tool.stdout
    # encode_records stamps no storage time: --since leaves such messages out
    dated = chatkeep("search", "get_weather", "--since", "1h", "--url", url, cwd=tmp_path)
    assert dated.returncode == 1
    for args in (["nowhere"], ["oslo", "--role", "assistant"], ["oslo", "--prefix", "x-"]):
        none = chatkeep("search", *args, "--url", url, cwd=tmp_path)
        assert (none.returncode, none.stdout) == (1, ""), args
    bad = chatkeep("search", "--url", url, "--", "-oslo", cwd=tmp_path)
    assert bad.returncode == 2 and "no word to look for" in bad.stderr


def test_sessions_list_query(url: str, tmp_path: Path) -> None:
    table = chatkeep("sessions", "list", "-q", "oslo", "--url", url, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert [line.split()[0] for line in table.stdout.splitlines()] == ["ID", "trip-b", "trip-a"]
    ids = chatkeep("sessions", "list", "-q", "weather", "--quiet", "--url", url, cwd=tmp_path)
    assert ids.stdout == "trip-b\n"
    rows = chatkeep(
        "sessions", "list", "--query", "oslo", "--json", "-n", "1", "--url", url, cwd=tmp_path
    )
    assert [json.loads(line)["id"] for line in rows.stdout.splitlines()] == ["trip-b"]
    none = chatkeep("sessions", "list", "-q", "nowhere", "--url", url, cwd=tmp_path)
    assert none.returncode == 1


def test_index_build_indexes_what_came_before_the_index(url: str, tmp_path: Path) -> None:
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as connection:  # as if written before schema version 3
        connection.execute("DELETE FROM chatkeep_fulltext")
        connection.execute(
            "INSERT INTO chatkeep_fulltext_backlog SELECT id, 0, length FROM chatkeep_sessions"
        )
    with open_store(url) as store:
        assert store.fulltext_pending() == 3
    built = chatkeep("index", "build", "--url", url, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "indexed 3 records" in built.stderr
    with open_store(url) as store:
        assert store.fulltext_ready()
        indexed = [hit.to_json() for hit in search(store, "oslo")]
        assert indexed == [hit.to_json() for hit in search(store, "oslo", use_index=False)]
        assert len(indexed) == 2
    again = chatkeep("index", "build", "--url", url, cwd=tmp_path)
    assert again.returncode == 0 and "nothing to build" in again.stderr
    memory = chatkeep("index", "build", "--url", "memory://", cwd=tmp_path)
    assert memory.returncode == 2 and "fulltext" in memory.stderr


def test_highlight_and_since() -> None:
    from chatkeep.core import SearchHit

    hit = SearchHit("s", "m", "user", None, None, 3, "the Oslo invoice", ((4, 8),))
    assert _line(hit, color=True) == "-  s  #3  user  the \x1b[1;33mOslo\x1b[0m invoice"
    assert _line(hit, color=False) == "-  s  #3  user  the Oslo invoice"
    assert parse_since("2026-12-01").isoformat() == "2026-12-01T00:00:00+00:00"
    with pytest.raises(ValueError, match="not a time"):
        parse_since("yesterday")
