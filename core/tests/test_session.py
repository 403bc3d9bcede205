"""Sessions, the StateBag and ProviderSessionState."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import pytest

from chatkeep.core import (
    AgentSession,
    DataContent,
    FunctionCallContent,
    InvalidSessionId,
    Message,
    ProviderSessionState,
    StateBag,
    register_state_type,
)
from chatkeep.core.ids import new_id


@register_state_type
@dataclass
class Preferences:
    language: str
    tags: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"language": self.language, "tags": self.tags}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Preferences:
        return cls(data["language"], list(data["tags"]))


@dataclass(frozen=True)
class Point:
    x: int
    y: int


register_state_type(
    Point, name="tests.Point", to_json=lambda p: [p.x, p.y], from_json=lambda v: Point(*v)
)


class Unregistered:
    pass


def json_round_trip(bag: StateBag) -> StateBag:
    return StateBag.from_dict(json.loads(json.dumps(bag.to_dict(), allow_nan=False)))


# -- StateBag ----------------------------------------------------------------------------------


def test_get_try_get_set_remove() -> None:
    bag = StateBag()
    with pytest.raises(KeyError):
        bag.get("missing")
    assert bag.get("missing", int, 7) == 7
    assert bag.try_get("missing") is None
    bag.set("count", 1)
    assert bag.get("count") == 1
    assert bag.get("count", int) == 1
    assert bag.try_get("count", int) == 1
    assert bag.try_get("count", str) is None
    assert "count" in bag
    assert len(bag) == 1
    assert list(bag) == ["count"]
    bag.set("count", 2)
    assert bag.get("count") == 2
    assert bag.remove("count") is True
    assert bag.remove("count") is False
    assert "count" not in bag
    assert len(bag) == 0


def test_get_with_wrong_type_raises_type_error() -> None:
    bag = StateBag({"name": "ada"})
    with pytest.raises(TypeError, match="'name' holds a str, not a int"):
        bag.get("name", int)


def test_keys_must_be_strings() -> None:
    with pytest.raises(TypeError):
        StateBag().set(1, "x")  # type: ignore[arg-type]


def test_json_round_trip_with_registered_types_and_messages() -> None:
    bag = StateBag()
    message = Message(
        "assistant",
        [FunctionCallContent("c1", "f", {"a": [1, 2]}), DataContent(b"\x00\xff", "image/png")],
        message_id=new_id(),
        additional_properties={"raw": b"bytes survive too"},
    )
    bag.set("prefs", Preferences("nb", ["a", "b"]))
    bag.set("point", Point(1, 2))
    bag.set("history", [message, Message.user("hi")])
    bag.set("nested", {"points": [Point(3, 4)], "plain": {"a": None, "b": 1.5, "c": True}})
    bag.set("looks_tagged", {"$type": "tests.Point", "value": [9, 9]})
    bag.set("unicode", "😀 𝄞")

    back = json_round_trip(bag)
    assert back == bag
    assert back.get("prefs", Preferences) == Preferences("nb", ["a", "b"])
    assert back.get("point", Point) == Point(1, 2)
    assert back.get("history", list) == [message, Message.user("hi")]
    assert back.get("nested", dict)["points"] == [Point(3, 4)]
    # A user dict that uses the type marker is not mistaken for a registered value.
    assert back.get("looks_tagged", dict) == {"$type": "tests.Point", "value": [9, 9]}
    assert back.get("unicode") == "😀 𝄞"


def test_unregistered_type_raises_type_error_with_a_hint() -> None:
    bag = StateBag()
    bag.set("thing", Unregistered())  # storing is fine, serializing is not
    with pytest.raises(TypeError, match="register_state_type"):
        bag.to_dict()
    with pytest.raises(TypeError, match="keys must be str"):
        StateBag({"d": {1: "x"}}).to_dict()


def test_deserializing_an_unknown_type_name_raises_with_a_hint() -> None:
    with pytest.raises(TypeError, match="register_state_type"):
        StateBag.from_dict({"x": {"$type": "elsewhere.Missing", "value": 1}})


def test_register_state_type_needs_a_decoder() -> None:
    with pytest.raises(TypeError, match="from_dict"):
        register_state_type(Unregistered)


def test_copy_is_deep() -> None:
    bag = StateBag({"items": [1]})
    clone = bag.copy()
    clone.get("items", list).append(2)
    assert bag.get("items") == [1]


def test_repr_shows_keys_not_values() -> None:
    bag = StateBag({"api_key": "hunter2"})
    assert "hunter2" not in repr(bag)
    assert "api_key" in repr(bag)


def test_concurrent_use_from_many_threads() -> None:
    bag = StateBag()
    errors: list[BaseException] = []
    start = threading.Barrier(9)

    def worker(n: int) -> None:
        try:
            start.wait()
            for i in range(1000):
                bag.setdefault("shared", list).append((n, i))
                bag.setdefault(f"own-{n}", dict)[i] = i
                bag.set(f"tmp-{n}", i)
                bag.remove(f"tmp-{n}")
                bag.set(f"last-{n}", i)
        except BaseException as exc:
            errors.append(exc)

    def reader() -> None:
        try:
            start.wait()
            for _ in range(300):
                bag.to_dict()
                list(bag)
                len(bag)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    threads.append(threading.Thread(target=reader))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    shared = bag.get("shared", list)
    assert len(shared) == 8000
    assert len(set(shared)) == 8000
    for n in range(8):
        assert bag.get(f"own-{n}", dict) == {i: i for i in range(1000)}
        assert bag.get(f"last-{n}") == 999
        assert f"tmp-{n}" not in bag


# -- ProviderSessionState -------------------------------------------------------------------------


def test_provider_state_get_or_initialize_save_clear() -> None:
    calls: list[str] = []

    def initialize(session: AgentSession) -> dict[str, Any]:
        calls.append(session.session_id)
        return {"turns": 0}

    slot = ProviderSessionState("my-provider", initialize)
    one, two = AgentSession("one"), AgentSession("two")
    state = slot.get_or_initialize(one)
    assert state == {"turns": 0}
    state["turns"] += 1
    slot.save(one, state)
    assert slot.get_or_initialize(one) == {"turns": 1}
    assert slot.get_or_initialize(two) == {"turns": 0}  # per session, not per provider
    assert calls == ["one", "two"]
    assert one.state.get("my-provider") == {"turns": 1}
    slot.clear(one)
    assert "my-provider" not in one.state
    assert slot.get_or_initialize(one) == {"turns": 0}
    assert calls == ["one", "two", "one"]


def test_provider_state_initializes_once_under_contention() -> None:
    calls = 0
    lock = threading.Lock()

    def initialize(_session: AgentSession) -> list[int]:
        nonlocal calls
        with lock:
            calls += 1
        return []

    slot = ProviderSessionState[list[int]]("p", initialize)
    session = AgentSession()
    barrier = threading.Barrier(8)
    seen: list[list[int]] = []

    def worker() -> None:
        barrier.wait()
        for _ in range(200):
            seen.append(slot.get_or_initialize(session))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == 1
    assert all(value is seen[0] for value in seen)


# -- AgentSession ----------------------------------------------------------------------------------


def test_new_sessions_get_fresh_sortable_ids() -> None:
    first, second = AgentSession(), AgentSession()
    assert first.session_id != second.session_id
    assert first.session_id < second.session_id
    assert first.conversation_id is None
    assert not first.is_service_managed
    assert AgentSession("chat-42").session_id == "chat-42"


def test_session_serializes_through_json() -> None:
    session = AgentSession("chat-42", conversation_id="conv_1")
    session.state.set("prefs", Preferences("en", []))
    session.state.set("messages", [Message.user("hello", message_id="m1")])
    data = json.loads(json.dumps(session.to_dict()))
    assert data["type"] == "session"
    back = AgentSession.from_dict(data)
    assert back.session_id == "chat-42"
    assert back.conversation_id == "conv_1"
    assert back.is_service_managed
    assert back.state == session.state
    assert back.state.get("messages") == [Message.user("hello", message_id="m1")]
    assert "chat-42" in repr(back)


@pytest.mark.parametrize("bad", ["", "a" * 513, "a\x00b", "\ud800", 5])
def test_invalid_session_ids_are_rejected(bad: Any) -> None:
    with pytest.raises(InvalidSessionId):
        AgentSession(bad)
    with pytest.raises(InvalidSessionId):
        AgentSession.from_dict({"type": "session", "session_id": bad, "state": {}})


def test_from_dict_rejects_other_objects() -> None:
    with pytest.raises(ValueError, match="not a serialized session"):
        AgentSession.from_dict({"type": "message", "session_id": "x"})
