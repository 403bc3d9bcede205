"""HistoryProvider's window cache: a session object kept across turns loads what a fresh
one would, for the price of a tail read of the last batch and the record before it.

Other writers (another handle of a shared store) are covered on every backend by the
conformance suite's ``KeptSessionTests``; these tests pin the cost, the isolation of what
is handed out, and when the cache is not used."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from chatkeep.core import (
    AgentSession,
    FunctionCallContent,
    FunctionResultContent,
    HistoryProvider,
    Message,
    Record,
    SlidingWindowReducer,
    StateBag,
    Store,
    StoreUnavailable,
    TextContent,
    read_view,
)
from chatkeep.core.memory import MemoryStore
from chatkeep.core.metadata import running_count
from chatkeep.core.reducers import drop_orphan_results

from .conftest import CountingBackend

MakeStore = Callable[..., tuple[Store, CountingBackend]]


def _answer(n: int, tool: bool) -> list[Message]:
    if not tool:
        return [Message.assistant(f"a{n}")]
    return [
        Message("assistant", [FunctionCallContent(f"c{n}", "look", {"n": n, "raw": b"\x01"})]),
        Message("tool", [FunctionResultContent(f"c{n}", {"found": n})]),
        Message.assistant(f"a{n}"),
    ]


async def _turn(provider: HistoryProvider, session: AgentSession, n: int, tool: bool = False):
    request = [Message.user(f"q{n}")]
    history = await provider.invoking(session, request)
    await provider.invoked(session, request, _answer(n, tool))
    return history[:-1]


def _cold(store: Store, session_id: str, limit: int) -> list[Message]:
    return drop_orphan_results(read_view(store, session_id, limit=limit))


def test_warm_turns_load_the_cold_view_for_a_tail_read(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store, max_messages=4)
    session = AgentSession("s")

    async def scenario() -> None:
        for n in range(12):
            backend.reads.clear()
            history = await _turn(provider, session, n, tool=n % 2 == 1)
            reads = list(backend.reads)
            assert [m.untagged() for m in history] == previous[0]
            assert all(m.source_id == "chat_history" for m in history)
            if n:  # the last batch (2 or 4 records) and the record before it; nothing decoded
                logged = len(store.read("s")) - len(_answer(n, n % 2 == 1)) - 1
                assert reads == [("s", -(batch[0] + 1), None, min(batch[0] + 1, logged))]
            previous[0] = _cold(store, "s", 4)
            cut[0] += len(previous[0]) < len(read_view(store, "s", limit=4))
            batch[0] = 4 if n % 2 == 1 else 2

    previous: list[list[Message]] = [[]]
    batch = [0]
    cut = [0]
    asyncio.run(scenario())
    # some windows began with a tool result whose call was cut off: the warm path dropped
    # it as the cold one does
    assert cut[0] > 0


def test_the_running_count_stays_exact_through_warm_turns(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    provider = HistoryProvider(store, max_messages=4)
    session = AgentSession("s")

    async def scenario() -> None:
        for n in range(7):
            await _turn(provider, session, n, tool=n == 3)

    asyncio.run(scenario())
    count = running_count(store, "s")
    assert count is not None and count.n == len(read_view(store, "s")) == 16


def test_what_is_handed_out_does_not_change_the_cache() -> None:
    store = Store(MemoryStore())
    provider = HistoryProvider(store, max_messages=10)
    session = AgentSession("s")

    async def scenario() -> None:
        for n in range(3):
            await _turn(provider, session, n)
        loaded = await provider.invoking(session, [])
        loaded[0].additional_properties["mine"] = 1
        loaded[0].contents.append(TextContent("added"))
        loaded[1].message_id = "changed"
        loaded.pop()
        again = await provider.invoking(session, [])
        assert [m.untagged() for m in again] == read_view(store, "s")

    asyncio.run(scenario())


def test_the_messages_given_to_invoked_are_not_cached_by_reference() -> None:
    store = Store(MemoryStore())
    provider = HistoryProvider(store, max_messages=10)
    session = AgentSession("s")

    async def scenario() -> None:
        await _turn(provider, session, 0)
        request = [Message.user("q1")]
        await provider.invoking(session, request)
        answer = [Message.assistant("a1")]
        await provider.invoked(session, request, answer)
        answer[0].contents[0] = TextContent("rewritten by the caller afterwards")
        request[0].role = "system"
        loaded = await provider.invoking(session, [])
        assert [m.untagged() for m in loaded] == read_view(store, "s")
        assert loaded[-1].text == "a1"

    asyncio.run(scenario())


def test_a_deserialized_session_starts_cold(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store, max_messages=4)
    session = AgentSession("s")

    async def scenario() -> None:
        for n in range(4):
            await _turn(provider, session, n)
        restored = AgentSession.from_dict(session.to_dict())
        backend.reads.clear()
        await provider.invoking(restored, [])
        assert backend.reads[0][1:3] == (-4, None), backend.reads
        assert "_local" not in repr(session.to_dict())

    asyncio.run(scenario())


def _window_reads(backend: CountingBackend) -> list[int]:
    return [start for _, start, _, _ in backend.reads]


@pytest.mark.parametrize(
    "options",
    [
        {"cache_view": False},
        {"reducer": SlidingWindowReducer(4)},
        {"output_filter": list},
    ],
    ids=["cache_view=False", "reducer", "output_filter"],
)
def test_the_cache_is_used_only_on_the_default_path(
    counting_store: MakeStore, options: dict[str, Any]
) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store, max_messages=4, **options)
    session = AgentSession("s")

    async def scenario() -> None:
        for n in range(3):
            await _turn(provider, session, n)
        backend.reads.clear()
        await provider.invoking(session, [])

    asyncio.run(scenario())
    assert -3 not in _window_reads(backend)  # a full window read, not the tail check
    assert session._local == {}


def test_a_subclass_that_overrides_load_is_not_cached(counting_store: MakeStore) -> None:
    store, _ = counting_store()

    class Loud(HistoryProvider):
        async def load(self, session: AgentSession) -> list[Message]:
            return await super().load(session)

    provider = Loud(store, max_messages=4)
    session = AgentSession("s")

    async def scenario() -> None:
        for n in range(3):
            await _turn(provider, session, n)

    asyncio.run(scenario())
    assert session._local == {}


def test_a_failed_model_call_keeps_the_cache_and_a_failed_save_drops_it(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store, max_messages=6)
    session = AgentSession("s")
    inner: Any = backend.inner
    real_append = inner.append

    async def scenario() -> None:
        for n in range(3):
            await _turn(provider, session, n)
        request = [Message.user("doomed")]
        await provider.invoking(session, request)
        await provider.invoked(session, request, [], error=RuntimeError("model down"))
        backend.reads.clear()
        await _turn(provider, session, 3)
        assert backend.reads[0][1] == -1  # still warm: the last record, checked last turn
        # the store fails the next save: nothing cached from it
        request = [Message.user("lost")]
        await provider.invoking(session, request)

        def refuse(session_id: str, records: list[Record]) -> None:
            raise StoreUnavailable("injected")

        inner.append = refuse
        with pytest.raises(StoreUnavailable):
            await provider.invoked(session, request, [Message.assistant("never stored")])
        inner.append = real_append
        assert not session._local.get("chat_history.window")  # emptied
        backend.reads.clear()
        loaded = await provider.invoking(session, [])
        assert backend.reads[0][1] == -6  # cold again
        assert [m.untagged() for m in loaded] == _cold(store, "s", 6)
        assert "never stored" not in [m.text for m in loaded]

    asyncio.run(scenario())


def test_another_store_or_window_size_is_not_served_from_the_cache(
    counting_store: MakeStore,
) -> None:
    first, _ = counting_store()
    second, backend = counting_store()
    session = AgentSession("s")

    async def scenario() -> None:
        for n in range(3):
            await _turn(HistoryProvider(first, max_messages=4), session, n)
        loaded = await HistoryProvider(second, max_messages=4).invoking(session, [])
        assert loaded == []  # the other store has nothing for "s"
        assert backend.reads[0][1] == -4
        for n in range(3):
            await _turn(HistoryProvider(first, max_messages=4), session, n + 3)
        wider = await HistoryProvider(first, max_messages=8).invoking(session, [])
        assert [m.untagged() for m in wider] == _cold(first, "s", 8)

    asyncio.run(scenario())


def test_a_turn_without_loading_forgets_the_window(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    loading = HistoryProvider(store, max_messages=4)
    blind = HistoryProvider(store, max_messages=4, load_messages=False)
    session = AgentSession("s")

    async def scenario() -> None:
        for n in range(2):
            await _turn(loading, session, n)
        await _turn(blind, session, 2)
        backend.reads.clear()
        loaded = await loading.invoking(session, [])
        assert [m.untagged() for m in loaded] == _cold(store, "s", 4)

    asyncio.run(scenario())


def test_the_whole_view_is_cached_too(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store)
    session = AgentSession("s")

    async def scenario() -> None:
        for n in range(5):
            await _turn(provider, session, n, tool=n == 2)
        backend.reads.clear()
        loaded = await provider.invoking(session, [])
        assert backend.reads == [("s", -3, None, 3)]
        assert [m.untagged() for m in loaded] == read_view(store, "s")

    asyncio.run(scenario())


def test_a_session_subclass_that_skips_the_base_init_still_works(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()

    class Bare(AgentSession):
        def __init__(self, session_id: str) -> None:  # no super().__init__()
            self.session_id = session_id
            self.conversation_id = None
            self.state = StateBag()

    provider = HistoryProvider(store, max_messages=4)
    session = Bare("s")

    async def scenario() -> None:
        for n in range(3):
            await _turn(provider, session, n)
        backend.reads.clear()
        loaded = await provider.invoking(session, [])
        assert backend.reads[0][1] == -3  # the cache took a slot of its own
        assert [m.untagged() for m in loaded] == _cold(store, "s", 4)

    asyncio.run(scenario())


def test_a_view_larger_than_cache_bytes_is_not_kept(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store, cache_bytes=1200)  # the whole view, ~1.2 KB at most
    session = AgentSession("s")

    async def scenario() -> None:
        await _turn(provider, session, 0)
        await _turn(provider, session, 1)
        cache = session._local["chat_history.window"]
        assert len(cache) == 4 and 0 < cache.nbytes <= 1200  # kept
        for n in range(2, 6):
            await _turn(provider, session, n)
        assert not session._local["chat_history.window"]  # over 1.2 KB: let go
        backend.reads.clear()
        loaded = await provider.invoking(session, [])
        assert sum(n for *_, n in backend.reads) >= 12  # the whole log read again
        assert [m.untagged() for m in loaded] == read_view(store, "s")
        with pytest.raises(ValueError, match="cache_bytes"):
            HistoryProvider(store, cache_bytes=-1)

    asyncio.run(scenario())


def test_a_long_whole_view_is_kept_from_a_session_objects_second_load(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()
    seed = HistoryProvider(store, cache_view=False)
    for n in range(150):  # 300 messages: more than a first load copies into the cache
        asyncio.run(_turn(seed, AgentSession("s"), n))
    provider = HistoryProvider(store)
    session = AgentSession("s")

    async def scenario() -> None:
        first = await _turn(provider, session, 150)  # a resumed session's one load
        assert not session._local["chat_history.window"]  # nothing copied for it
        assert [m.untagged() for m in first] == read_view(store, "s")[:-2]
        await _turn(provider, session, 151)  # the second load keeps the view
        backend.reads.clear()
        loaded = await _turn(provider, session, 152)
        assert backend.reads[0][1:] == (-3, None, 3)  # warm: a tail read
        assert [m.untagged() for m in loaded] == read_view(store, "s")[:-2]

    asyncio.run(scenario())


def test_the_state_names_the_loaded_view_not_every_id(counting_store: MakeStore) -> None:
    store, _backend = counting_store()
    provider = HistoryProvider(store)
    session = AgentSession("s")

    async def scenario() -> None:
        for n in range(3):
            await _turn(provider, session, n)
        history = await provider.invoking(session, [])
        state = session.state.try_get("chat_history.loaded_ids")
        assert state == {"through": read_view(store, "s")[-1].message_id}
        # the loaded messages handed back untagged (as a framework may) are not stored again
        again = [m.untagged() for m in history[-2:]]
        await provider.invoked(session, again, [Message.assistant("new")])
        assert [m.text for m in read_view(store, "s")][-3:] == ["q2", "a2", "new"]

        # the session copied between load and save: the ids are read again, same result
        history = await provider.invoking(session, [])
        moved = AgentSession.from_dict(session.to_dict())
        await provider.invoked(moved, [m.untagged() for m in history[-2:]], [])
        assert [m.text for m in read_view(store, "s")][-1] == "new"

        # state written by an older version: a list of ids
        moved = AgentSession.from_dict(session.to_dict())
        view = read_view(store, "s")
        moved.state.set("chat_history.loaded_ids", [m.message_id for m in view])
        await provider.invoked(moved, [view[-1]], [Message.assistant("newer")])
        assert [m.text for m in read_view(store, "s")][-2:] == ["new", "newer"]

    asyncio.run(scenario())
