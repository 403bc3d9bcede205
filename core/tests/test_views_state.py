"""The ``chatkeep.state`` control kind (an adapter's own data in the log, skipped by every
view) and ``walk_from`` (the view as it was right after a record, what a fork there sees)."""

from __future__ import annotations

import pytest

from chatkeep.core import (
    CorruptRecord,
    Message,
    Record,
    Store,
    TextContent,
    delete_session,
    encode_records,
    fork,
    new_id,
    open_store,
    read_view,
)
from chatkeep.core.views import ViewBuilder, read_log
from chatkeep.core.views._control import STATE, control_record, parse_entry
from chatkeep.core.views._program import run
from chatkeep.core.views._walk import walk_from


def say(store: Store, session: str, *texts: str) -> list[str]:
    messages = [Message("user", [TextContent(text)], message_id=new_id()) for text in texts]
    store.append(session, encode_records(messages))
    return [m.message_id or "" for m in messages]


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def view_after(store: Store, session: str, position: int, anchor: str) -> list[str]:
    def program():  # type: ignore[no-untyped-def]
        builder = ViewBuilder()
        yield from walk_from(builder, session, position, anchor)
        return builder.finish()

    return texts(run(store, program()))


def test_a_state_record_is_in_the_log_but_in_no_view() -> None:
    store = open_store("memory://")
    say(store, "s", "a", "b")
    state = control_record(STATE, owner="someone", state={"head": "x", "n": [1, 2]})
    store.append("s", [state])
    say(store, "s", "c")
    assert texts(read_view(store, "s")) == ["a", "b", "c"]
    assert texts(read_view(store, "s", limit=2)) == ["b", "c"]
    assert [entry.kind for entry in read_log(store, "s")][2] == STATE
    parsed = parse_entry(state.data)
    assert not isinstance(parsed, Message)
    assert parsed["owner"] == "someone" and parsed["state"] == {"head": "x", "n": [1, 2]}


def test_a_state_record_without_its_fields_is_reported() -> None:
    store = open_store("memory://")
    say(store, "s", "a")
    store.append("s", [Record(new_id(), b'{"type":"chatkeep.state","owner":"x","state":[]}')])
    with pytest.raises(CorruptRecord, match="state"):
        read_view(store, "s")


def test_walk_from_sees_the_log_as_it_was_after_a_record() -> None:
    store = open_store("memory://")
    first = say(store, "s", "a", "b", "c")
    say(store, "s", "d")
    assert view_after(store, "s", 2, first[1]) == ["a", "b"]
    assert view_after(store, "s", 3, first[2]) == ["a", "b", "c"]
    assert view_after(store, "s", 0, first[0]) == []


def test_walk_from_follows_a_fork_into_its_parent_and_a_parent_erased_since() -> None:
    store = open_store("memory://")
    parent = say(store, "p", "a", "b", "c")
    child = fork(store, "p", parent[1], new_session_id="f")
    own = say(store, child, "x", "y")
    # The fork's log: [fork link, x, y]; right after x the view is a, b, x.
    assert view_after(store, child, 2, own[0]) == ["a", "b", "x"]
    delete_session(store, "p")  # the fork gets its own copy of the prefix (shifted log)
    log = store.read(child)
    position = next(i for i, record in enumerate(log) if record.id == own[0])
    assert view_after(store, child, position + 1, own[0]) == ["a", "b", "x"]
