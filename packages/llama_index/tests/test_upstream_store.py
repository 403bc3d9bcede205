"""LlamaIndex's own chat-store tests, case by case, against ``ChatkeepChatStore`` on
SQLite, PostgreSQL and Redis (the ``store`` fixture), S3 and Azure Blob once each, and
behind the encryption wrapper once.

Mirrored (not copied) from run-llama/llama_index:

- ``llama-index-core/tests/storage/chat_store/test_simple_chat_store.py`` (``Simple``),
- ``llama-index-integrations/storage/chat_store/llama-index-storage-chat-store-redis/
  tests/test_chat_store_redis_chat_store.py`` (``Redis``: the shape the Redis and
  Postgres chat stores' integration tests share),
- ``.../llama-index-storage-chat-store-redis/tests/test_delete_message.py`` (``Delete``).

Where the upstream stores disagree, ``SimpleChatStore`` (the reference in llama-index-core)
decides: a negative ``idx`` counts from the end (``list.pop``), as there; the Redis store
refuses negative indices.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.storage.chat_store.base import BaseChatStore

from chatkeep.core import Store, open_store
from chatkeep.encrypted import Keyring
from chatkeep.llama_index import ChatkeepChatStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def chat_store(store: Store) -> ChatkeepChatStore:
    return ChatkeepChatStore(store=store)


@pytest.fixture
def key(sid: str) -> str:
    return sid


@pytest.fixture
def own_namespace(store_url: str) -> Iterator[ChatkeepChatStore]:
    """A chat store that sees only its own keys (for ``get_keys``)."""
    handle = open_store(store_url, namespace=f"li-{uuid.uuid4().hex[:12]}")
    yield ChatkeepChatStore(store=handle)
    handle.close()


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


# -- Simple: test_simple_chat_store.py --------------------------------------------------------


def test_add_messages(own_namespace: ChatkeepChatStore) -> None:
    """Simple::test_add_messages (two keys, get_keys, idx=0 insert)."""
    chat_store = own_namespace
    chat_store.add_message("user1", user("hello"))
    chat_store.add_message("user1", user("world"))
    chat_store.add_message("user2", user("hello"))
    chat_store.add_message("user2", user("world"))
    assert chat_store.get_messages("user1") == [user("hello"), user("world")]
    assert chat_store.get_messages("user2") == [user("hello"), user("world")]
    assert chat_store.get_keys() == ["user1", "user2"]
    chat_store.add_message("user1", user("hello"), idx=0)
    assert chat_store.get_messages("user1") == [user("hello"), user("hello"), user("world")]


def test_delete_chat_messages(chat_store: ChatkeepChatStore, key: str) -> None:
    """Simple::test_delete_chat_messages."""
    other = key + "-2"
    for k in (key, other):
        chat_store.add_message(k, user("hello"))
        chat_store.add_message(k, user("world"))
    assert chat_store.delete_messages(key) == [user("hello"), user("world")]
    assert chat_store.get_messages(key) == []
    assert chat_store.get_messages(other) == [user("hello"), user("world")]
    assert chat_store.delete_messages(key) is None, "an unknown key: None"


def test_delete_chat_message(chat_store: ChatkeepChatStore, key: str) -> None:
    """Simple::test_delete_chat_message (delete_last_message)."""
    chat_store.add_message(key, user("hello"))
    chat_store.add_message(key, user("world"))
    assert chat_store.delete_last_message(key) == user("world")
    assert chat_store.get_messages(key) == [user("hello")]


def test_delete_chat_message_idx(chat_store: ChatkeepChatStore, key: str) -> None:
    """Simple::test_delete_chat_message_idx."""
    chat_store.add_message(key, user("hello"))
    chat_store.add_message(key, user("world"))
    assert chat_store.delete_message(key, 0) == user("hello")
    assert chat_store.get_messages(key) == [user("world")]


def test_delete_chat_message_out_of_bounds(chat_store: ChatkeepChatStore, key: str) -> None:
    """Simple::test_delete_chat_message_out_of_bounds (and past the end)."""
    chat_store.add_message(key, user("hello"))
    assert chat_store.delete_message(key, -2) is None
    assert chat_store.delete_message(key, 1) is None
    assert chat_store.get_messages(key) == [user("hello")]


def test_delete_last_chat_message_from_empty_history(
    chat_store: ChatkeepChatStore, key: str
) -> None:
    """Simple::test_delete_last_chat_message_from_empty_history."""
    message = user("hello")
    chat_store.add_message(key, message)
    assert chat_store.delete_last_message(key) == message
    assert chat_store.delete_last_message(key) is None


def test_persist_non_ascii_unescaped(store_url: str, key: str) -> None:
    """Simple::test_persist_non_ascii_unescaped: non-ASCII text survives a new handle
    (chatkeep persists every append; there is no persist() step)."""
    with open_store(store_url) as first:
        ChatkeepChatStore(store=first).add_message(key, user("ハロー héllo"))
    with open_store(store_url) as second:
        assert ChatkeepChatStore(store=second).get_messages(key) == [user("ハロー héllo")]


# -- Redis / Postgres: the shared shape of the integration tests ------------------------------


def test_class() -> None:
    """Redis::test_class."""
    assert BaseChatStore.__name__ in [b.__name__ for b in ChatkeepChatStore.__mro__]


def _with_kwargs(text: str) -> ChatMessage:
    return ChatMessage(
        role=MessageRole.USER,
        content=text,
        additional_kwargs={"metadata": {"foo": "bar", "count": 5}},
    )


def test_add_message(chat_store: ChatkeepChatStore, key: str) -> None:
    """Redis::test_add_message."""
    chat_store.add_message(key, ChatMessage(role=MessageRole.USER, content="test_user_message"))
    stored = chat_store.get_messages(key)
    assert len(stored) == 1
    assert stored[0].content == "test_user_message" and stored[0].role == "user"


def test_add_message_with_additional_kwargs(chat_store: ChatkeepChatStore, key: str) -> None:
    """Redis::test_add_message_with_additional_kwargs."""
    chat_store.add_message(key, _with_kwargs("test_user_message"))
    stored = chat_store.get_messages(key)
    assert len(stored) == 1 and stored[0].content == "test_user_message"
    assert stored[0].additional_kwargs["metadata"] == {"foo": "bar", "count": 5}
    assert stored == [_with_kwargs("test_user_message")]


async def test_async_add_message(chat_store: ChatkeepChatStore, key: str) -> None:
    """Redis::test_async_add_message."""
    await chat_store.async_add_message(key, user("async_test_user_message"))
    stored = await chat_store.aget_messages(key)
    assert len(stored) == 1 and stored[0].content == "async_test_user_message"
    assert stored[0].role == "user"


async def test_async_add_message_with_additional_kwargs(
    chat_store: ChatkeepChatStore, key: str
) -> None:
    """Redis::test_async_add_message_with_additional_kwargs."""
    await chat_store.async_add_message(key, _with_kwargs("test_user_message"))
    assert await chat_store.aget_messages(key) == [_with_kwargs("test_user_message")]


def _pair() -> list[ChatMessage]:
    return [
        ChatMessage(role=MessageRole.USER, content="test_user_message"),
        ChatMessage(role=MessageRole.SYSTEM, content="test_system_message"),
    ]


def test_set_messages(chat_store: ChatkeepChatStore, key: str) -> None:
    """Redis::test_set_messages (and setting again replaces, as every store does)."""
    chat_store.set_messages(key, _pair())
    stored = chat_store.get_messages(key)
    assert [(m.role, m.content) for m in stored] == [
        ("user", "test_user_message"),
        ("system", "test_system_message"),
    ]
    chat_store.set_messages(key, [user("replaced")])
    assert chat_store.get_messages(key) == [user("replaced")]


async def test_aset_messages(chat_store: ChatkeepChatStore, key: str) -> None:
    """Redis::test_aset_messages."""
    await chat_store.aset_messages(key, _pair())
    assert await chat_store.aget_messages(key) == _pair()


def test_delete_messages(chat_store: ChatkeepChatStore, key: str) -> None:
    """Redis::test_delete_messages."""
    chat_store.set_messages(key, _pair())
    assert len(chat_store.get_messages(key)) == 2
    chat_store.delete_messages(key)
    assert chat_store.get_messages(key) == []


async def test_adelete_messages(chat_store: ChatkeepChatStore, key: str) -> None:
    """Redis::test_adelete_messages."""
    await chat_store.aset_messages(key, _pair())
    assert await chat_store.adelete_messages(key) == _pair()
    assert await chat_store.aget_messages(key) == []
    assert await chat_store.adelete_messages(key) is None


def test_delete_message(chat_store: ChatkeepChatStore, key: str) -> None:
    """Redis::test_delete_message."""
    chat_store.set_messages(key, _pair())
    assert chat_store.delete_message(key, 0) == _pair()[0]
    assert chat_store.get_messages(key) == [_pair()[1]]


async def test_adelete_message(chat_store: ChatkeepChatStore, key: str) -> None:
    """Redis::test_adelete_message."""
    await chat_store.aset_messages(key, _pair())
    assert await chat_store.adelete_message(key, 0) == _pair()[0]
    assert await chat_store.aget_messages(key) == [_pair()[1]]


def test_delete_last_message(chat_store: ChatkeepChatStore, key: str) -> None:
    """Redis::test_delete_last_message."""
    chat_store.set_messages(key, _pair())
    assert chat_store.delete_last_message(key) == _pair()[1]
    assert chat_store.get_messages(key) == [_pair()[0]]


async def test_adelete_last_message(chat_store: ChatkeepChatStore, key: str) -> None:
    """The async twin of Redis::test_delete_last_message."""
    await chat_store.aset_messages(key, _pair())
    assert await chat_store.adelete_last_message(key) == _pair()[1]
    assert await chat_store.adelete_last_message(key) == _pair()[0]
    assert await chat_store.adelete_last_message(key) is None


async def test_get_keys(own_namespace: ChatkeepChatStore) -> None:
    """Redis::test_get_keys (and its async twin)."""
    own_namespace.add_message("k1", user("test_user_message"))
    assert own_namespace.get_keys() == ["k1"]
    assert await own_namespace.aget_keys() == ["k1"]
    own_namespace.delete_messages("k1")
    assert own_namespace.get_keys() == []


# -- Delete: test_delete_message.py's table ----------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("contents", "idx", "expected"),
    [
        pytest.param(["A", "B", "C"], 0, ["B", "C"], id="first"),
        pytest.param(["A", "B", "C"], 1, ["A", "C"], id="middle"),
        pytest.param(["A", "B", "C"], 2, ["A", "B"], id="last"),
        pytest.param(["A"], 0, [], id="only-message"),
        pytest.param(["A", "B", "C"], -1, ["A", "B"], id="negative-index"),
        pytest.param(["A", "B", "C"], -4, ["A", "B", "C"], id="negative-out-of-range"),
        pytest.param(["A", "B", "C"], 3, ["A", "B", "C"], id="out-of-range"),
        pytest.param([], 0, [], id="missing-key"),
        pytest.param(["A", "B", "A"], 2, ["A", "B"], id="duplicate-content"),
    ],
)
async def test_delete_message_table(
    chat_store: ChatkeepChatStore,
    key: str,
    use_async: bool,
    contents: list[str],
    idx: int,
    expected: list[str],
) -> None:
    """Delete::test_delete_message, each case (``negative-index`` by SimpleChatStore's
    rule: -1 is the last message)."""
    messages = [
        ChatMessage(role=MessageRole.USER, content=c, additional_kwargs={"metadata": {"s": 1}})
        for c in contents
    ]
    if use_async:
        await chat_store.aset_messages(key, messages)
        removed = await chat_store.adelete_message(key, idx)
        remaining = await chat_store.aget_messages(key)
    else:
        chat_store.set_messages(key, messages)
        removed = chat_store.delete_message(key, idx)
        remaining = chat_store.get_messages(key)
    if -len(messages) <= idx < len(messages):
        assert removed == messages[idx]
    else:
        assert removed is None
    assert [m.content for m in remaining] == expected
    assert all(m.additional_kwargs == {"metadata": {"s": 1}} for m in remaining)


# -- every backend, once each: S3, Azure Blob, the encryption wrapper -------------------------


@pytest.mark.parametrize("backend", ["s3", "azure", "encrypted"])
async def test_operations_on_object_stores_and_encrypted(
    backend: str, request: pytest.FixtureRequest, sid: str, sqlite_url: str
) -> None:
    if backend == "encrypted":
        handle = open_store(f"encrypted+{sqlite_url}", keys=f"k1:{Keyring.generate_key()}")
        chat_store = ChatkeepChatStore(store=handle)
    else:
        handle = None
        chat_store = ChatkeepChatStore(url=request.getfixturevalue(f"{backend}_url"))
    try:
        chat_store.add_message(sid, user("a"))
        await chat_store.async_add_message(sid, user("c"))
        chat_store.add_message(sid, user("b"), idx=1)
        assert chat_store.get_messages(sid) == [user("a"), user("b"), user("c")]
        assert chat_store.delete_message(sid, 0) == user("a")
        assert await chat_store.adelete_last_message(sid) == user("c")
        chat_store.set_messages(sid, [user("x"), *chat_store.get_messages(sid)])
        assert await chat_store.aget_messages(sid) == [user("x"), user("b")]
        assert chat_store.delete_messages(sid) == [user("x"), user("b")]
        assert chat_store.get_messages(sid) == []
    finally:
        chat_store.close()
        if handle is not None:
            handle.close()
