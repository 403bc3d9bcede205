"""``chatkeep sessions list`` in real console-script runs: the order comes from the store's
last-append index (``recent``), the UPDATED column from the records' own stamps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from chatkeep.core import Message, Record, encode_records, new_id, open_store

CHATKEEP = Path(sys.executable).with_name("chatkeep")


def chatkeep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATKEEP_")}
    return subprocess.run(
        [str(CHATKEEP), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _turn(text: str) -> list[Record]:
    return encode_records([Message.user(text, message_id=new_id())])


def test_the_table_is_newest_first_by_last_append(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chats.db'}"
    store = open_store(url)
    assert store.supports("recent")
    for name in ("trip-b", "trip-a", "trip-c", "other"):
        store.append(name, _turn(f"about {name}"))
    store.append("trip-b", _turn("back to b"))  # now the newest
    retried = store.read("trip-a")
    store.append("trip-a", retried)  # a retry that stores nothing: trip-a does not move
    store.close()

    table = chatkeep("sessions", "list", "--url", url, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["ID", "MESSAGES", "UPDATED", "TITLE"]
    assert [line.split()[0] for line in lines[1:]] == ["trip-b", "other", "trip-c", "trip-a"]
    assert lines[1].split()[1] == "2" and lines[1].endswith("about trip-b")
    assert table.stderr == ""

    quiet = chatkeep("sessions", "list", "--url", url, "--prefix", "trip-", "--quiet", cwd=tmp_path)
    assert quiet.stdout.split() == ["trip-b", "trip-c", "trip-a"]
    rows = chatkeep("sessions", "list", "--url", url, "--json", "-n", "2", cwd=tmp_path)
    listed = [json.loads(line) for line in rows.stdout.splitlines()]
    assert [row["id"] for row in listed] == ["trip-b", "other"]
    # These records carry no storage time (written without a HistoryProvider): UPDATED is
    # empty, yet the order is right, since it comes from the store's index of appends.
    assert [row["updated_at"] for row in listed] == [None, None]
