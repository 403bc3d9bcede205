"""What the views say about stored data for tools that show it: the conversations a user
sees, and each record of a raw log with its kind."""

from __future__ import annotations

import asyncio
import json

import pytest

from chatkeep.core import (
    CapabilityMissing,
    Message,
    Record,
    Store,
    compact,
    encode_records,
    fork,
    message_to_dict,
    new_id,
    open_store,
    read_view,
    undo,
)
from chatkeep.core.views import (
    CORRUPT,
    MESSAGE,
    alist_conversations,
    aread_log,
    build_view,
    decode_log,
    is_internal_session,
    list_conversations,
    read_log,
)


def turn(store: Store, session: str, text: str) -> None:
    store.append(
        session,
        encode_records(
            [
                Message.user(text, message_id=new_id()),
                Message.assistant("re " + text, message_id=new_id()),
            ]
        ),
    )


def keep_last_two(messages: list[Message]) -> list[Message]:
    return messages[-2:]


def keep_last(messages: list[Message]) -> list[Message]:
    return messages[-1:]


def test_conversations_leave_out_the_cores_own_sessions() -> None:
    store = open_store("memory://")
    turn(store, "chat-a", "hi")
    turn(store, "chat-b", "hi")
    # What an interrupted erase of a parent of forks leaves behind.
    store.append("chatkeep.tmp.0123", [Record(new_id(), b'{"type":"message","role":"user"}')])
    assert sorted(store.list_sessions()) == ["chat-a", "chat-b", "chatkeep.tmp.0123"]
    assert sorted(list_conversations(store)) == ["chat-a", "chat-b"]
    assert list(list_conversations(store, "chat-b")) == ["chat-b"]
    assert list(list_conversations(store, "chatkeep.")) == []
    assert is_internal_session("chatkeep.tmp.0123") and not is_internal_session("chat-a")

    async def collect() -> list[str]:
        return sorted([s async for s in alist_conversations(store)])

    assert asyncio.run(collect()) == ["chat-a", "chat-b"]


def test_listing_conversations_needs_the_capability_and_says_so_at_the_call() -> None:
    class AppendOnly:
        capabilities = frozenset[str]()

        def append(self, session_id: str, records: list[Record]) -> None: ...

        def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
            return []

    with pytest.raises(CapabilityMissing):
        list_conversations(Store(AppendOnly(), name="append-only"))


def test_the_raw_log_names_each_records_kind() -> None:
    store = open_store("memory://")
    turn(store, "s", "one")
    turn(store, "s", "two")
    undo(store, "s")
    assert compact(store, "s", keep_last) is not None
    child = fork(store, "s")
    store.append("s", [Record("bad-1", b"\xff not json")])

    entries = read_log(store, "s")
    assert [e.kind for e in entries] == [
        MESSAGE,
        MESSAGE,
        MESSAGE,
        MESSAGE,
        "chatkeep.retract",
        "chatkeep.checkpoint",
        "chatkeep.forked",
        CORRUPT,
    ]
    assert [e.position for e in entries] == list(range(8))
    assert [e.record_id for e in entries] == [r.id for r in store.read("s")]
    # Retracted messages are still in the audit trail, with their text.
    assert [e.message.text for e in entries if e.message is not None] == [
        "one",
        "re one",
        "two",
        "re two",
    ]
    retract = entries[4]
    assert retract.is_control and not retract.is_message
    assert retract.data == json.loads(store.read("s")[4].data)
    assert retract.data is not None and retract.data["target"] == entries[2].record_id
    assert entries[0].message is not None
    assert entries[0].data == message_to_dict(entries[0].message)
    corrupt = entries[-1]
    assert corrupt.kind == CORRUPT and corrupt.error and corrupt.data is None
    # The fork's own log starts with its link to the parent; its prefix is not followed.
    assert [e.kind for e in read_log(store, child)] == ["chatkeep.fork"]
    assert asyncio.run(aread_log(store, "s")) == entries
    assert read_log(store, "never-written") == []


def test_a_slice_of_the_log_keeps_its_positions() -> None:
    store = open_store("memory://")
    for text in "abc":
        turn(store, "s", text)
    tail = read_log(store, "s", -2)
    assert [(e.position, e.message.text if e.message else None) for e in tail] == [
        (-2, "c"),
        (-1, "re c"),
    ]
    middle = read_log(store, "s", 2, 4)
    assert [e.position for e in middle] == [2, 3]
    assert decode_log(store.read("s", 1, 2), 1)[0].position == 1


def test_a_view_built_in_memory_matches_the_stored_one() -> None:
    store = open_store("memory://")
    for text in ("one", "two", "three"):
        turn(store, "s", text)
    undo(store, "s")
    compact(store, "s", keep_last_two)
    turn(store, "s", "four")
    records = store.read("s")
    assert "chatkeep.checkpoint" in [e.kind for e in read_log(store, "s")]
    as_dicts = [{**json.loads(r.data), "id": r.id} for r in records]
    for limit in (None, 1, 3):
        expected = read_view(store, "s", limit=limit)
        assert build_view("s", records, limit=limit) == expected
        assert build_view("s", as_dicts, limit=limit) == expected
