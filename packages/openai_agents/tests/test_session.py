"""The Agents SDK's own session tests (tests/memory/test_session.py and
tests/extensions/memory/test_{redis,sqlalchemy}_session.py, openai-agents 0.24), adapted to
``ChatkeepSession`` and run on SQLite, PostgreSQL and Redis.

SQLite-, Redis- and SQLAlchemy-internal tests (file locks, connection reaping, WATCH
retries, pool listeners) have no counterpart; the behaviour they protect is the backends'
(chatkeep's conformance suite). Where chatkeep deliberately differs it says so: a damaged
record raises ``CorruptRecord`` instead of being skipped silently.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import SessionSettings

from chatkeep.core import CorruptRecord, Record, Store, read_view
from chatkeep.openai_agents import ChatkeepSession, SessionClosed
from chatkeep.testing.servers import with_query

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("error")]


@pytest.fixture
def session(store: Store, sid: str) -> ChatkeepSession:
    return ChatkeepSession(sid, store=store)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str, item_id: str = "1") -> dict[str, Any]:
    # As the SDK's test helper writes a response: every message has id "1".
    return {
        "id": item_id,
        "content": [{"annotations": [], "text": text, "type": "output_text", "logprobs": []}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }


def contents(items: list[Any]) -> list[Any]:
    return [item.get("content") for item in items]


async def test_direct_operations(session: ChatkeepSession) -> None:
    items = [user("Hello"), {"role": "assistant", "content": "Hi there!"}]
    await session.add_items(items)  # type: ignore[arg-type]
    assert await session.get_items() == items
    popped = await session.pop_item()
    assert popped == items[1]
    assert await session.get_items() == items[:1]
    await session.clear_session()
    assert await session.get_items() == []


async def test_pop_item_until_empty(session: ChatkeepSession) -> None:
    assert await session.pop_item() is None
    items = [user("Hello"), assistant("Hi there!"), user("How are you?")]
    await session.add_items(items)  # type: ignore[arg-type]
    assert await session.pop_item() == items[2]
    assert await session.get_items() == items[:2]
    assert await session.pop_item() == items[1]
    assert await session.pop_item() == items[0]
    assert await session.pop_item() is None
    assert await session.get_items() == []


async def test_pop_affects_only_its_session(store: Store, sid: str) -> None:
    first, second = (
        ChatkeepSession(sid + "-1", store=store),
        ChatkeepSession(sid + "-2", store=store),
    )
    await first.add_items([user("Session 1 message")])  # type: ignore[list-item]
    await second.add_items([user("Session 2 message 1"), user("Session 2 message 2")])  # type: ignore[list-item]
    assert await second.pop_item() == user("Session 2 message 2")
    assert contents(await first.get_items()) == ["Session 1 message"]
    assert contents(await second.get_items()) == ["Session 2 message 1"]


async def test_get_items_limit(session: ChatkeepSession) -> None:
    items = [user("1"), assistant("2"), user("3"), assistant("4")]
    await session.add_items(items)  # type: ignore[arg-type]
    assert await session.get_items(limit=2) == items[2:]
    assert await session.get_items() == items
    assert await session.get_items(limit=10) == items
    assert await session.get_items(limit=0) == []
    assert await session.get_items(limit=-1) == items  # SQLiteSession: LIMIT -1 is all


async def test_limit_beyond_a_short_history(session: ChatkeepSession) -> None:
    await session.add_items([user("only valid")])  # type: ignore[list-item]
    assert contents(await session.get_items(limit=5)) == ["only valid"]


async def test_limit_reads_the_newest_of_a_long_history(session: ChatkeepSession) -> None:
    items = [user(f"m{n}") for n in range(600)]
    await session.add_items(items)  # type: ignore[arg-type]
    assert await session.get_items(limit=3) == items[-3:]
    assert await session.get_items() == items


async def test_session_settings(store: Store, sid: str) -> None:
    default = ChatkeepSession(sid, store=store)
    assert default.session_settings == SessionSettings()
    assert default.session_settings is not None and default.session_settings.limit is None
    configured = ChatkeepSession(sid, store=store, session_settings=SessionSettings(limit=3))
    assert configured.session_settings == SessionSettings(limit=3)
    from_dict = ChatkeepSession(sid, store=store, session_settings={"limit": 2})
    assert from_dict.session_settings == SessionSettings(limit=2)
    with pytest.raises((TypeError, ValueError)):
        ChatkeepSession(sid, store=store, session_settings={"limt": 2})


async def test_settings_limit_and_explicit_override(store: Store, sid: str) -> None:
    session = ChatkeepSession(sid, store=store, session_settings=SessionSettings(limit=3))
    items = [user(f"Message {n}") for n in range(5)]
    await session.add_items(items)  # type: ignore[arg-type]
    assert await session.get_items() == items[-3:]
    assert await session.get_items(limit=1) == items[-1:]
    assert await session.get_items(limit=5) == items


async def test_unicode_and_special_characters(session: ChatkeepSession) -> None:
    items = [
        user("こんにちは"),
        {"role": "assistant", "content": "😊👍"},
        user("Привет"),
        user("O'Reilly"),
        {"role": "assistant", "content": '{"nested": "json"}'},
        user('Quote: "Hello world"'),
        {"role": "assistant", "content": "Line1\nLine2\tTabbed"},
        user("DROP TABLE sessions;"),
        user("Robert'); DROP TABLE students;--"),
        user("\\n\\t\\r Special escapes"),
        user("\x00 NUL and \u2028 separators"),
        user(""),
    ]
    await session.add_items(items)  # type: ignore[arg-type]
    assert await session.get_items() == items


async def test_concurrent_add_items(session: ChatkeepSession) -> None:
    async def add(start: int) -> None:
        await session.add_items([user(f"Message {start + n}") for n in range(5)])  # type: ignore[misc]

    await asyncio.gather(add(0), add(5), add(10))
    got = contents(await session.get_items())
    assert sorted(got) == sorted(f"Message {n}" for n in range(15))
    for start in (0, 5, 10):  # each batch stays contiguous and in order
        at = got.index(f"Message {start}")
        assert got[at : at + 5] == [f"Message {start + n}" for n in range(5)]


async def test_add_empty_is_a_no_op(session: ChatkeepSession, store: Store) -> None:
    await session.add_items([])
    assert await session.get_items() == []
    assert store.read(session.session_id) == []


async def test_repeated_item_ids_are_all_kept(session: ChatkeepSession) -> None:
    # The SDK's test model answers every turn with a message of id "1".
    items = [user("a"), assistant("one"), user("b"), assistant("two"), assistant("two")]
    await session.add_items(items[:2])  # type: ignore[arg-type]
    await session.add_items(items[2:])  # type: ignore[arg-type]
    assert await session.get_items() == items


async def test_items_are_stored_as_chatkeep_messages(
    session: ChatkeepSession, store: Store
) -> None:
    await session.add_items([user("hi"), assistant("hello")])  # type: ignore[list-item]
    view = read_view(store, session.session_id)
    assert [(m.role, m.text) for m in view] == [("user", "hi"), ("assistant", "hello")]
    assert all(m.message_id and m.message_id != "1" for m in view)  # chatkeep's own ids
    assert [(m.role, m.text) for m in await session.get_messages()] == [
        ("user", "hi"),
        ("assistant", "hello"),
    ]


async def test_closed_session_refuses_everything(store: Store, sid: str) -> None:
    session = ChatkeepSession(sid, store=store)
    await session.add_items([user("before close")])  # type: ignore[list-item]
    session.close()
    session.close()  # idempotent
    for call in (
        session.get_items(),
        session.add_items([user("after close")]),  # type: ignore[list-item]
        session.add_items([]),
        session.pop_item(),
        session.clear_session(),
    ):
        with pytest.raises(SessionClosed, match="is closed"):
            await call
    assert isinstance(SessionClosed("x"), RuntimeError)
    # The store was handed in: it is still open for others.
    assert contents(await ChatkeepSession(sid, store=store).get_items()) == ["before close"]


async def test_a_session_closes_the_store_it_opened(store_url: str, sid: str) -> None:
    session = ChatkeepSession(sid, url=store_url)
    await session.add_items([user("kept")])  # type: ignore[list-item]
    await session.aclose()
    assert session.store.closed
    async with ChatkeepSession(sid, url=store_url) as again:
        assert contents(await again.get_items()) == ["kept"]


@pytest.mark.parametrize("backend", ["postgres", "redis"])
async def test_namespaces_isolate_one_session_id(
    backend: str, request: pytest.FixtureRequest, sid: str
) -> None:
    # The SDK's key-prefix isolation test; SQLite separates tenants by file instead.
    url: str = request.getfixturevalue(f"{backend}_url")
    one = ChatkeepSession(sid, url=with_query(url, namespace="app1"))
    two = ChatkeepSession(sid, url=with_query(url, namespace="app2"))
    try:
        await one.add_items([user("app1 message")])  # type: ignore[list-item]
        await two.add_items([user("app2 message")])  # type: ignore[list-item]
        assert contents(await one.get_items()) == ["app1 message"]
        assert contents(await two.get_items()) == ["app2 message"]
    finally:
        one.close()
        two.close()


async def test_damage_is_reported_not_skipped(session: ChatkeepSession, store: Store) -> None:
    await session.add_items([user("valid 0"), user("valid 1")])  # type: ignore[list-item]
    store.append(session.session_id, [Record("garbage", b"not valid json {{{")])
    with pytest.raises(CorruptRecord) as caught:
        await session.get_items()
    assert caught.value.session_id == session.session_id
    assert caught.value.position == 2
    # The session stays appendable and the items after the damage read fine.
    await session.add_items([user("valid 3")])  # type: ignore[list-item]
    assert contents(await session.get_items(limit=1)) == ["valid 3"]


async def test_cancelled_add_items_still_completes(session: ChatkeepSession) -> None:
    task = asyncio.ensure_future(session.add_items([user("survives")]))  # type: ignore[list-item]
    await asyncio.sleep(0)  # the write is under way
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert contents(await session.get_items()) == ["survives"]  # the outcome is known


def test_arguments_are_checked(store: Store) -> None:
    with pytest.raises(TypeError):
        ChatkeepSession("s", url="memory://", store=store)
    with pytest.raises(TypeError):
        ChatkeepSession("s", store="memory://")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ChatkeepSession("", store=store)


def test_repr_names_no_secret() -> None:
    for url in ("redis://:topsecret@127.0.0.1:6379/0", "postgresql://u:topsecret@127.0.0.1/db"):
        session = ChatkeepSession("s", url=url)  # nothing connects before the first call
        assert "topsecret" not in repr(session)
        assert "ChatkeepSession('s'" in repr(session)
        session.close()


async def test_added_items_carry_their_storage_time_and_read_back_equal(
    session: ChatkeepSession, store: Store
) -> None:
    from datetime import datetime, timezone

    from chatkeep.core.metadata import STORED_AT_KEY, describe_session

    items = [user("hi"), assistant("hello")]
    before = datetime.now(timezone.utc)
    await session.add_items(items)  # type: ignore[arg-type]
    after = datetime.now(timezone.utc)
    records = store.read(session.session_id)
    assert len(records) == 2
    assert all(f'"{STORED_AT_KEY}"'.encode() in record.data for record in records)
    info = describe_session(store, session.session_id)
    assert info.created_at is not None and info.updated_at is not None
    assert before <= info.created_at <= info.updated_at <= after
    assert info.messages == 2 and info.title == "hi"
    assert await session.get_items() == items
    assert await session.get_items(limit=1) == items[1:]
    assert await ChatkeepSession(session.session_id, store=store).get_items() == items
    messages = await session.get_messages()
    assert all(STORED_AT_KEY not in m.additional_properties for m in messages)


async def test_reads_and_appends_take_the_backends_path(
    store: Store, store_url: str, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis declares loop-safe async hooks: the session awaits them on this loop, no
    # thread hop; SQLite runs them inline; PostgreSQL goes through a worker thread.
    hops: list[object] = []
    to_thread = asyncio.to_thread

    async def counting(function: Any, /, *args: Any, **kwargs: Any) -> Any:
        hops.append(function)
        return await to_thread(function, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counting)
    session = ChatkeepSession(sid, store=store)
    await session.add_items([user("one"), user("two")])  # type: ignore[list-item]
    assert contents(await session.get_items(limit=1)) == ["two"]
    assert len(await session.get_messages()) == 2
    assert store.loop_safe_async is store_url.startswith("redis")
    hopped = store_url.startswith("postgres")
    assert bool(hops) is hopped, hops
    assert await session.pop_item() is not None  # pops keep the thread path everywhere


def test_one_session_across_loops_that_open_and_close(store: Store, sid: str) -> None:
    # asyncio.run per call: on Redis each loop gets its own client, closed with the loop
    # (warnings are errors here: an unclosed client or a foreign loop would fail this).
    session = ChatkeepSession(sid, store=store)
    for n in range(4):
        asyncio.run(session.add_items([user(f"turn {n}")]))  # type: ignore[list-item]
        assert contents(asyncio.run(session.get_items(limit=1))) == [f"turn {n}"]
    assert contents(asyncio.run(session.get_items())) == [f"turn {n}" for n in range(4)]
