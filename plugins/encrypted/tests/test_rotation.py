"""Rotating keys: old records stay readable, rotate() re-encrypts in place, resumably."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chatkeep.core import Message, Record, Store, encode_records, new_id, open_store, read_view
from chatkeep.core.views import fork
from chatkeep.encrypted import EncryptedStore, rotate
from chatkeep.encrypted.rotation import TEMP_PREFIX

from .conftest import OLD, PRIMARY

OLD_ONLY = f"old:{OLD}"
ROTATED = f"primary:{PRIMARY},old:{OLD}"


def fill(url: str) -> dict[str, list[str]]:
    store = open_store(url, keys=OLD_ONLY)
    texts: dict[str, list[str]] = {}
    for number in range(4):
        session = f"chat-{number}"
        messages = [Message.user(f"{session} says {n}", message_id=new_id()) for n in range(7)]
        store.append(session, encode_records(messages))
        texts[session] = [m.text for m in messages]
    store.close()
    return texts


def key_ids(path: str) -> set[str]:
    raw = open_store(f"sqlite:///{path}")
    found = set()
    for session in raw.list_sessions():
        for record in raw.read(session):
            found.add(record.data[5 : 5 + record.data[4]].decode())
    return found


def test_old_records_stay_readable_and_rotate_reencrypts_them(tmp_path: Path) -> None:
    path = str(tmp_path / "c.db")
    url = f"encrypted+sqlite:///{path}"
    texts = fill(url)
    branch = fork(open_store(url, keys=OLD_ONLY), "chat-0")
    store = open_store(url, keys=ROTATED)
    assert [m.text for m in read_view(store, "chat-1")] == texts["chat-1"]  # the old key reads
    assert key_ids(path) == {"old"}
    report = rotate(store)
    assert report.complete and report.sessions_rewritten == 5  # four chats and the fork
    assert key_ids(path) == {"primary"}
    current = open_store(url, keys=f"primary:{PRIMARY}")  # the old key can go now
    for session, expected in texts.items():
        assert [m.text for m in read_view(current, session)] == expected
    assert [m.text for m in read_view(current, branch)] == texts["chat-0"]
    again = rotate(current)
    assert again.sessions_rewritten == 0 and again.sessions_current == 5


class Crashing:
    """An inner backend that raises at its N-th call (of any hook), once."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.capabilities = inner.capabilities
        self.calls = 0
        self.fail_at: int | None = None

    def _tick(self) -> None:
        self.calls += 1
        if self.fail_at is not None and self.calls == self.fail_at:
            self.fail_at = None
            raise RuntimeError("crash")

    def append(self, session_id: str, records: list[Record]) -> None:
        self._tick()
        self.inner.append(session_id, records)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        self._tick()
        self.inner.append_if(session_id, records, after=after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        self._tick()
        return self.inner.read(session_id, start, stop)

    def delete(self, session_id: str) -> None:
        self._tick()
        self.inner.delete(session_id)

    def list_sessions(self, prefix: str | None = None) -> Any:
        self._tick()
        return self.inner.list_sessions(prefix)


def test_rotation_killed_at_any_step_completes_when_run_again(tmp_path: Path) -> None:
    crash_point = 1
    while True:
        path = str(tmp_path / f"c{crash_point}.db")
        texts = fill(f"encrypted+sqlite:///{path}")
        crashing = Crashing(open_store(f"sqlite:///{path}"))
        store = Store(EncryptedStore(Store(crashing), keys=ROTATED), name="encrypted")
        crashing.fail_at = crash_point
        try:
            rotate(store)
        except RuntimeError:
            report = rotate(store)  # the second run finishes the work
            assert report.complete
        else:
            break  # no call left to crash at: every step was covered
        assert key_ids(path) == {"primary"}, crash_point
        for session, expected in texts.items():
            assert [m.text for m in read_view(store, session)] == expected, crash_point
        raw = open_store(f"sqlite:///{path}")
        assert not list(raw.list_sessions(TEMP_PREFIX)), crash_point
        crash_point += 1
    assert crash_point > 20  # the loop really crashed the rotation at many points


def test_a_session_written_during_rotation_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatkeep.encrypted import rotation

    path = str(tmp_path / "c.db")
    url = f"encrypted+sqlite:///{path}"
    texts = fill(url)
    store = open_store(url, keys=ROTATED)
    original = rotation._Rotation._finish

    def late_write_first(self: Any, temp: str, marker: dict[str, object]) -> None:
        if marker["session"] == "chat-2":  # another writer appends just before the swap
            store.append("chat-2", encode_records([Message.user("late", message_id=new_id())]))
        original(self, temp, marker)

    monkeypatch.setattr(rotation._Rotation, "_finish", late_write_first)
    report = rotate(store)
    assert report.changed_during_rotation == ["chat-2"] and not report.complete
    assert report.sessions_rewritten == 3
    view = [m.text for m in read_view(store, "chat-2")]
    assert view == [*texts["chat-2"], "late"]  # nothing lost, nothing overwritten
    raw = open_store(f"sqlite:///{path}")
    assert not list(raw.list_sessions(TEMP_PREFIX))
    monkeypatch.undo()
    assert rotate(store).complete  # run again with no writer about: done
    assert key_ids(path) == {"primary"}
