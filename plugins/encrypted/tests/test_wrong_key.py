"""A handle whose keys cannot open what the store holds refuses to write, before anything
is stored, at bounded cost; rotate() reports the sessions it cannot open and goes on."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

from chatkeep.core import Record, Store, open_store
from chatkeep.encrypted import EncryptedStore, KeyMismatch, rotate

from .conftest import OLD, PRIMARY

OTHER = base64.urlsafe_b64encode(b"x" * 32).decode()
RIGHTFUL = f"primary:{PRIMARY}"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"encrypted+sqlite:///{tmp_path / 'chats.db'}"


def raw(url: str) -> Store:
    return open_store(url.removeprefix("encrypted+"))


@pytest.mark.parametrize(
    "wrong",
    [f"k9:{OTHER}", f"primary:{OTHER}", f"primary:{OTHER},old:{OLD}"],
    ids=["another key id", "another key under the same id", "the wrong key first"],
)
def test_a_write_with_the_wrong_key_is_refused_and_stores_nothing(url: str, wrong: str) -> None:
    rightful = open_store(url, keys=RIGHTFUL)
    rightful.append("chat", [Record("a", b"mine")])
    intruder = open_store(url, keys=wrong)
    with pytest.raises(KeyMismatch, match="refusing to write to session 'chat'") as refused:
        intruder.append("chat", [Record("b", b"not readable by the owner")])
    assert OTHER not in str(refused.value) and PRIMARY not in str(refused.value)
    with pytest.raises(KeyMismatch):
        intruder.append_if("chat", [Record("b", b"x")], after="a")
    with pytest.raises(KeyMismatch):
        asyncio.run(intruder.aappend("chat", [Record("b", b"x")]))
    # A new session of a store that holds data is checked against the newest session.
    with pytest.raises(KeyMismatch, match="checked against session 'chat'"):
        intruder.append("new-chat", [Record("c", b"x")])
    assert [r.id for r in raw(url).read("chat")] == ["a"]
    assert raw(url).read("new-chat") == []
    assert rightful.read("chat") == [Record("a", b"mine")]


def test_the_rightful_keys_write_and_an_empty_store_takes_any_key(url: str) -> None:
    first = open_store(url, keys=f"k9:{OTHER}")
    first.append("chat", [Record("a", b"x")])  # nothing to check against: accepted
    rotated = open_store(url, keys=f"primary:{PRIMARY},k9:{OTHER}")  # a new key first
    rotated.append("chat", [Record("b", b"y")])
    rotated.append("other", [Record("c", b"z")])
    assert [r.id for r in open_store(url, keys=f"k9:{OTHER},primary:{PRIMARY}").read("chat")] == [
        "a",
        "b",
    ]


class CountingReads:
    """The inner store, with each read (session, start, stop, records returned) noted."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reads: list[tuple[Any, ...]] = []

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        found = self.store.read(session_id, start, stop)
        self.reads.append((session_id, start, stop, len(found)))
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_the_check_costs_one_tail_read_per_session_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = open_store(url, keys=RIGHTFUL)
    writer.append("long", [Record(f"r{n}", b"x" * 10) for n in range(3000)])
    writer.append("short", [Record("r", b"x")])
    handle = open_store(url, keys=RIGHTFUL)
    wrapper = handle.backend
    assert isinstance(wrapper, EncryptedStore)
    counting = CountingReads(wrapper.inner)
    monkeypatch.setattr(wrapper, "inner", counting)
    reads = counting.reads
    handle.append("long", [Record("new-1", b"y")])
    assert reads == [("long", -1, None, 1)]  # the last record only, not the log
    handle.append("long", [Record("new-2", b"y")])
    handle.read("short", -1)
    handle.append("short", [Record("new", b"y")])  # read through this handle: known
    assert len(reads) == 2


def test_rotate_reports_sessions_it_cannot_open_and_rotates_the_rest(
    url: str, tmp_path: Path
) -> None:
    owner = open_store(url, keys=f"old:{OLD}")
    for session in ("chat-1", "chat-2"):
        owner.append(session, [Record("m", session.encode())])
    # A session sealed with a key the owner does not hold (written elsewhere, copied in).
    elsewhere = f"encrypted+sqlite:///{tmp_path / 'elsewhere.db'}"
    open_store(elsewhere, keys=f"k9:{OTHER}").append("foreign", [Record("m", b"?")])
    raw(url).append("foreign", raw(elsewhere).read("foreign"))
    report = rotate(url, keys=f"primary:{PRIMARY},old:{OLD}")
    assert report.undecryptable == ["foreign"]
    assert report.sessions_rewritten == 2 and not report.complete
    assert raw(url).read("foreign") == raw(elsewhere).read("foreign")  # left as it was
    rotated = open_store(url, keys=RIGHTFUL)
    assert rotated.read("chat-2") == [Record("m", b"chat-2")]
