"""LangChain's own chat-history tests, adapted to ``ChatkeepChatMessageHistory`` and run on
SQLite, PostgreSQL and Redis: langchain-core's ``test_chat_history.py`` (the base class's
sync/async interface), langchain-postgres's ``test_chat_histories.py``, langchain-community's
``test_sql.py`` (``SQLChatMessageHistory``) and langchain-redis's
``test_chat_message_history.py``. Tests of a store's own extras (Redis search, index names,
TTL, SQL table creation) have no counterpart here.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from chatkeep.core import CorruptRecord, EncodeError, Record, Store, read_view
from chatkeep.langchain import ChatkeepChatMessageHistory
from chatkeep.testing.servers import with_query

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("error")]


@pytest.fixture
def history(store: Store, sid: str) -> ChatkeepChatMessageHistory:
    return ChatkeepChatMessageHistory(sid, store=store)


THREE = [SystemMessage(content="Meow"), AIMessage(content="woof"), HumanMessage(content="bark")]


def test_sync_history(history: ChatkeepChatMessageHistory) -> None:
    assert history.messages == []
    history.add_messages(THREE)
    assert history.messages == THREE
    history.add_messages(THREE)  # the same messages again: stored again
    assert history.messages == THREE + THREE
    history.clear()
    assert history.messages == []


async def test_async_history(history: ChatkeepChatMessageHistory) -> None:
    assert await history.aget_messages() == []
    await history.aadd_messages(THREE)
    assert await history.aget_messages() == THREE
    await history.aadd_messages([HumanMessage(content="!")])
    assert await history.aget_messages() == [*THREE, HumanMessage(content="!")]
    await history.aclear()
    assert await history.aget_messages() == []


def test_add_message_one_at_a_time(history: ChatkeepChatMessageHistory) -> None:
    history.add_message(HumanMessage(content="Hello"))
    history.add_user_message("World")
    history.add_ai_message("Hi!")
    history.add_ai_message(AIMessage(content="again"))
    assert history.messages == [
        HumanMessage(content="Hello"),
        HumanMessage(content="World"),
        AIMessage(content="Hi!"),
        AIMessage(content="again"),
    ]
    assert str(history) == "Human: Hello\nHuman: World\nAI: Hi!\nAI: again"


def test_multiple_sessions(store: Store, sid: str) -> None:
    one = ChatkeepChatMessageHistory(sid + "-1", store=store)
    two = ChatkeepChatMessageHistory(sid + "-2", store=store)
    one.add_messages([HumanMessage(content="Hello!"), AIMessage(content="Hi there!")])
    two.add_messages([HumanMessage(content="Other")])
    assert [m.content for m in one.messages] == ["Hello!", "Hi there!"]
    assert [m.content for m in two.messages] == ["Other"]
    one.clear()
    assert one.messages == [] and len(two.messages) == 1  # clear is per session


async def test_async_multiple_sessions(store: Store, sid: str) -> None:
    one = ChatkeepChatMessageHistory(sid + "-1", store=store)
    two = ChatkeepChatMessageHistory(sid + "-2", store=store)
    await asyncio.gather(
        one.aadd_messages([HumanMessage(content="a1"), AIMessage(content="a2")]),
        two.aadd_messages([HumanMessage(content="b1")]),
    )
    assert [m.content for m in await one.aget_messages()] == ["a1", "a2"]
    assert [m.content for m in await two.aget_messages()] == ["b1"]


def test_different_message_types(history: ChatkeepChatMessageHistory) -> None:
    messages: list[BaseMessage] = [
        SystemMessage(content="system"),
        HumanMessage(content="human"),
        AIMessage(
            content="", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}]
        ),
        ToolMessage(content="sunny", tool_call_id="c1"),
        ToolMessage(content="failed", tool_call_id="c2", status="error", artifact={"code": 7}),
        AIMessage(
            content=[{"type": "reasoning", "reasoning": "hmm"}, {"type": "text", "text": "ok"}]
        ),
        HumanMessage(
            content=[{"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}]
        ),
    ]
    history.add_messages(messages)
    got = history.messages
    assert got == messages
    assert [type(m) for m in got] == [type(m) for m in messages]


def test_many_messages_in_order(history: ChatkeepChatMessageHistory) -> None:
    messages = [HumanMessage(content=f"Message {n}") for n in range(1000)]
    history.add_messages(messages)
    assert history.messages == messages


def test_rapid_additions_keep_their_order(history: ChatkeepChatMessageHistory) -> None:
    for n in range(30):
        history.add_message(HumanMessage(content=f"m{n}"))
    assert [m.content for m in history.messages] == [f"m{n}" for n in range(30)]


def test_contents_edge_cases(history: ChatkeepChatMessageHistory) -> None:
    messages = [
        HumanMessage(content=""),
        HumanMessage(content="x" * 1_000_000),
        HumanMessage(content="Hello, 世界! 🌍 Привет"),
        HumanMessage(content="Special chars: !@#$%^&*()_+{}|:\"<>?`-=[]\\;',./"),
        HumanMessage(content="DROP TABLE sessions; --"),
        AIMessage(content="with kwargs", additional_kwargs={"nested": {"a": [1, 2.5, None, True]}}),
        HumanMessage(content="\x00 NUL and \u2028"),
    ]
    history.add_messages(messages)
    assert history.messages == messages


@pytest.mark.parametrize(
    "odd", ["user:123:session", "with space", "ünïcödé-✓", "../../etc", "a" * 500]
)
def test_session_ids(store: Store, odd: str, sid: str) -> None:
    history = ChatkeepChatMessageHistory(f"{odd[:480]}{sid[-8:]}", store=store)
    history.add_message(HumanMessage(content="Hello"))
    assert history.messages == [HumanMessage(content="Hello")]
    history.clear()


def test_empty_session_id_is_refused(store: Store) -> None:
    with pytest.raises(ValueError):
        ChatkeepChatMessageHistory("", store=store)
    with pytest.raises(ValueError):
        ChatkeepChatMessageHistory(None, store=store)  # type: ignore[arg-type]


def test_clear_an_empty_session(history: ChatkeepChatMessageHistory) -> None:
    history.clear()
    assert history.messages == []


def test_two_histories_on_one_session(store: Store, sid: str) -> None:
    first = ChatkeepChatMessageHistory(sid, store=store)
    second = ChatkeepChatMessageHistory(sid, store=store)
    first.add_message(HumanMessage(content="from first"))
    second.add_message(AIMessage(content="from second"))
    assert (
        first.messages
        == second.messages
        == [
            HumanMessage(content="from first"),
            AIMessage(content="from second"),
        ]
    )


def test_threads_adding_at_once(history: ChatkeepChatMessageHistory) -> None:
    def add(start: int) -> None:
        history.add_messages([HumanMessage(content=f"{start + n}") for n in range(10)])

    threads = [threading.Thread(target=add, args=(n * 10,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(int(m.content) for m in history.messages) == list(range(40))  # type: ignore[arg-type]


def test_a_batch_that_cannot_be_stored_stores_nothing(history: ChatkeepChatMessageHistory) -> None:
    with pytest.raises(EncodeError):
        history.add_messages(
            [HumanMessage(content="ok"), ToolMessage("x", tool_call_id="c", artifact=object())]
        )
    assert history.messages == []


def test_window(store: Store, sid: str) -> None:
    ChatkeepChatMessageHistory(sid, store=store).add_messages(
        [HumanMessage(content=str(n)) for n in range(100)]
    )
    window = ChatkeepChatMessageHistory(sid, store=store, max_messages=3)
    assert [m.content for m in window.messages] == ["97", "98", "99"]
    with pytest.raises(ValueError):
        ChatkeepChatMessageHistory(sid, store=store, max_messages=0)


def test_stored_as_chatkeep_messages(history: ChatkeepChatMessageHistory, store: Store) -> None:
    history.add_messages(
        [HumanMessage(content="hi", id="lc-1"), AIMessage(content="hello", id="lc-1")]
    )
    view = read_view(store, history.session_id)
    assert [(m.role, m.text) for m in view] == [("user", "hi"), ("assistant", "hello")]
    assert all(m.message_id not in (None, "lc-1") for m in view)  # chatkeep's own ids


def test_damage_is_reported(history: ChatkeepChatMessageHistory, store: Store) -> None:
    history.add_message(HumanMessage(content="fine"))
    store.append(history.session_id, [Record("bad", b"{not json")])
    with pytest.raises(CorruptRecord):
        history.messages  # noqa: B018


def test_namespaces_isolate(request: pytest.FixtureRequest, sid: str) -> None:
    for backend in ("postgres", "redis"):
        url: str = request.getfixturevalue(f"{backend}_url")
        one = ChatkeepChatMessageHistory(sid, url=with_query(url, namespace="app1"))
        two = ChatkeepChatMessageHistory(sid, url=with_query(url, namespace="app2"))
        try:
            one.add_message(HumanMessage(content="app1"))
            two.add_message(HumanMessage(content="app2"))
            assert [m.content for m in one.messages] == ["app1"]
            assert [m.content for m in two.messages] == ["app2"]
        finally:
            one.close()
            two.close()


def test_arguments(store: Store) -> None:
    with pytest.raises(TypeError):
        ChatkeepChatMessageHistory("s", url="memory://", store=store)
    with pytest.raises(TypeError):
        ChatkeepChatMessageHistory("s", store="memory://")  # type: ignore[arg-type]
    secret = ChatkeepChatMessageHistory("s", url="redis://:topsecret@127.0.0.1:6379/0")
    assert "topsecret" not in repr(secret)
    secret.close()


@pytest.mark.parametrize("backend", ["s3", "azure"])
def test_object_stores(backend: str, request: pytest.FixtureRequest, sid: str) -> None:
    url: str = request.getfixturevalue(f"{backend}_url")
    history = ChatkeepChatMessageHistory(sid, url=url)
    try:
        messages: list[Any] = [
            HumanMessage(content="Weather?"),
            AIMessage(content="", tool_calls=[{"name": "weather", "args": {}, "id": "c1"}]),
            ToolMessage(content="sunny", tool_call_id="c1"),
            AIMessage(content="Sunny."),
        ]
        history.add_messages(messages[:2])
        asyncio.run(history.aadd_messages(messages[2:]))
        assert history.messages == messages
        assert asyncio.run(history.aget_messages()) == messages
        history.clear()
        assert history.messages == []
    finally:
        history.close()


def test_added_messages_carry_their_storage_time_and_read_back_equal(
    history: ChatkeepChatMessageHistory, store: Store
) -> None:
    from datetime import datetime, timezone

    from chatkeep.core.metadata import STORED_AT_KEY, describe_session

    before = datetime.now(timezone.utc)
    history.add_messages(THREE)
    after = datetime.now(timezone.utc)
    records = store.read(history.session_id)
    assert len(records) == 3
    assert all(f'"{STORED_AT_KEY}"'.encode() in record.data for record in records)
    info = describe_session(store, history.session_id)
    assert info.created_at is not None and info.updated_at is not None
    assert before <= info.created_at <= info.updated_at <= after
    assert info.messages == 3
    assert history.messages == THREE
    assert ChatkeepChatMessageHistory(history.session_id, store=store).messages == THREE
    assert all(
        STORED_AT_KEY not in m.additional_properties for m in read_view(store, history.session_id)
    )
