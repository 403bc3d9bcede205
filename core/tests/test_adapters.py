"""chatkeep.core.adapters: what every framework adapter shares."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatkeep.core import InvalidOption, Store, open_store
from chatkeep.core.adapters import (
    MAX_COMPONENT,
    adapter_store,
    async_session_lock,
    id_component,
    id_from_component,
    in_thread,
    native,
    session_lock,
    settled,
)


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


@given(st.text(), st.text())
def test_id_components_keep_distinct_ids_apart_and_read_back(first, second):
    one, two = id_component(first), id_component(second)
    assert (one == two) == (first == second)
    assert "/" not in one and ":" not in one and len(one) <= max(MAX_COMPONENT, 65)
    back = id_from_component(one)
    assert back == first or (back is None and one.startswith("!") and len(one) == 65)


def test_long_ids_are_hashed_and_short_ones_readable():
    assert id_component("a/b:c d") == "a%2Fb%3Ac%20d"
    assert id_from_component(id_component("\ud800 lone")) == "\ud800 lone"
    long = "x" * (MAX_COMPONENT + 1)
    assert id_component(long).startswith("!") and id_from_component(id_component(long)) is None
    assert id_component("!") == "%21"  # an encoded id never starts like a hashed one


def test_async_session_lock_serializes_one_session_and_is_dropped_after():
    from chatkeep.core import adapters

    store = open_store("memory://")
    order: list[str] = []

    async def work(name: str, session: str) -> None:
        async with async_session_lock(store, session):
            order.append(f"{name}+")
            await asyncio.sleep(0.01)
            order.append(f"{name}-")

    async def main() -> None:
        await asyncio.gather(work("a", "s1"), work("b", "s1"), work("c", "s2"))

    asyncio.run(main())
    assert order.index("a-") < order.index("b+")  # one session: one at a time
    assert order.index("c+") < order.index("a-")  # another session does not wait
    assert adapters._ASYNC_LOCKS == {}  # nothing kept once nobody holds a lock
    asyncio.run(main())  # a new loop gets new locks


def test_a_view_kept_through_a_tail_cache_follows_appends_and_sees_others() -> None:
    from chatkeep.core import Message, TailCache, aread_view, encode_records, new_id
    from chatkeep.core.adapters import appended_messages, aread_view_kept, stamped_records

    store = open_store("memory://adapters-kept-view")
    cache: TailCache[Message] = TailCache()

    async def main() -> None:
        view, count = await aread_view_kept(store, "s", cache)
        assert view == [] and count is not None and count.n == 0
        records = stamped_records([Message.user(f"m{n}", message_id=new_id()) for n in range(3)])
        await store.aappend("s", records)
        added = appended_messages(records)
        assert added == await aread_view(store, "s")  # as a read decodes them
        cache.extend(records, added, count=3)
        view, count = await aread_view_kept(store, "s", cache)
        assert view == added and count is not None and (count.n, count.last) == (3, records[-1].id)
        await store.aappend("s", encode_records([Message.user("theirs", message_id=new_id())]))
        view, count = await aread_view_kept(store, "s", cache)
        assert view == await aread_view(store, "s") and len(view) == 4

    asyncio.run(main())
