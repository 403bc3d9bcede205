"""chatkeep.core.adapters: what every framework adapter shares."""

from __future__ import annotations

import asyncio
import threading

import pytest

from chatkeep.core import InvalidOption, Store, open_store
from chatkeep.core.adapters import adapter_store, in_thread, native, session_lock, settled


def test_url_is_opened_and_owned():
    store, owned = adapter_store("memory://adapters-url", None, owner="Thing")
    try:
        assert isinstance(store, Store)
        assert owned is True
        assert store.name == "memory"
    finally:
        store.close()


def test_store_is_shared_and_not_owned():
    shared = open_store("memory://")
    store, owned = adapter_store(None, shared, owner="Thing")
    assert store is shared
    assert owned is False


def test_neither_opens_the_default(monkeypatch):
    monkeypatch.setenv("CHATKEEP_URL", "memory://adapters-default")
    store, owned = adapter_store(None, None, owner="Thing")
    assert owned is True
    assert store.name == "memory"


@pytest.mark.parametrize(
    ("url", "store", "message"),
    [
        ("memory://", open_store("memory://"), "Thing takes url= or store=, not both"),
        (None, object(), "Thing: store= must be a chatkeep Store"),
        (123, None, "Thing: url= must be a str, not int"),
    ],
)
def test_bad_arguments_are_one_typed_error(url, store, message):
    with pytest.raises(InvalidOption, match=message) as caught:
        adapter_store(url, store, owner="Thing")
    # Older adapters raised TypeError here; InvalidOption is one too.
    assert isinstance(caught.value, TypeError)


def test_session_lock_is_per_store_and_session():
    store = open_store("memory://")
    assert session_lock(store, "s1") is session_lock(store, "s1")
    locks = {id(session_lock(store, f"s{i}")) for i in range(200)}
    assert 1 < len(locks) <= 64


def test_native_needs_loop_safe_hooks_that_are_not_inline():
    assert native(open_store("memory://")) is False  # memory runs its hooks inline


def test_in_thread_runs_inline_hooks_here_and_others_in_a_worker():
    store = open_store("memory://")
    here = threading.get_ident()

    async def where(hooks):
        return await in_thread(store, hooks, threading.get_ident)

    assert asyncio.run(where(("read",))) == here
    assert asyncio.run(where(None)) != here


def test_settled_finishes_the_write_before_the_cancellation():
    finished = []

    async def write():
        await asyncio.sleep(0.05)
        finished.append(True)

    async def main():
        task = asyncio.ensure_future(settled(write()))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert finished == [True]


def test_plain_tail_is_the_tail_of_the_view_or_none():
    from chatkeep.core import Message, encode_records, new_id
    from chatkeep.core.adapters import aplain_tail, plain_tail
    from chatkeep.core.views import edit_delete, read_view

    store = open_store("memory://")
    messages = [Message.user(f"m{i}", message_id=new_id()) for i in range(5)]
    store.append("s", encode_records(messages))
    assert plain_tail(store, "unknown", None) == []
    assert [r.id for r in plain_tail(store, "s", 2)] == [m.message_id for m in messages[-2:]]
    assert len(plain_tail(store, "s", None)) == 5
    edit_delete(store, "s", 1)  # a control record: the view must be walked now
    assert plain_tail(store, "s", None) is None
    assert asyncio.run(aplain_tail(store, "s", 3)) is None
    store.append("s", encode_records([Message.user("after", message_id=new_id())]))
    tail = plain_tail(store, "s", 1)  # a message after the edit is the view's last
    assert tail is not None and len(tail) == 1
    assert read_view(store, "s")[-1].message_id == tail[0].id
