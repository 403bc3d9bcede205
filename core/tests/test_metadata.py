"""Session metadata (``chatkeep.core.metadata``) and per-message storage times, on the
memory backend. Costs are asserted through the counting backend (records returned)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import ClassVar

import pytest

from chatkeep.core import (
    AgentSession,
    CapabilityMissing,
    CorruptRecord,
    HistoryProvider,
    InvalidOption,
    Message,
    Record,
    SessionInfo,
    SessionNotFound,
    SlidingWindowReducer,
    Store,
    adescribe_session,
    alist_session_infos,
    compact,
    describe_session,
    encode_message,
    encode_records,
    fork,
    list_session_infos,
    new_id,
    read_view,
    undo,
)
from chatkeep.core.memory import MemoryStore
from chatkeep.core.metadata import COUNT_KEY, COUNT_WALK, HEAD, STORED_AT_KEY, TITLE_LENGTH
from chatkeep.core.views import read_log
from chatkeep.core.views._erase import TEMP_PREFIX

from .conftest import CountingBackend

MakeStore = Callable[..., tuple[Store, CountingBackend]]


def user(text: str) -> Message:
    return Message.user(text, message_id=new_id())


def assistant(text: str) -> Message:
    return Message.assistant(text, message_id=new_id())


def chat(provider: HistoryProvider, session_id: str, *pairs: tuple[str, str]) -> None:
    """Store turns the way the agent does: invoking, then invoked, one call each."""
    session = AgentSession(session_id)

    async def run() -> None:
        for question, answer in pairs:
            sent = await provider.invoking(session, [user(question)])
            await provider.invoked(session, sent, [assistant(answer)])

    asyncio.run(run())


def now() -> datetime:
    return datetime.now(timezone.utc)


# -- per-message storage times --------------------------------------------------------------


def test_stored_messages_carry_their_time_but_reads_never_show_it() -> None:
    store = Store(MemoryStore())
    provider = HistoryProvider(store)
    passed = user("hello")
    before = now()
    asyncio.run(provider.invoked(AgentSession("s"), [passed], [assistant("hi")]))
    after = now()
    assert passed.additional_properties == {}, "the caller's message was changed"
    for record in store.read("s"):
        stamp = json.loads(record.data)["additional_properties"][STORED_AT_KEY]
        assert before <= datetime.fromisoformat(stamp) <= after
        assert stamp.endswith("+00:00")
    view = read_view(store, "s")
    assert view[0] == passed
    assert all(STORED_AT_KEY not in m.additional_properties for m in view)
    entries = read_log(store, "s")
    assert [e.stored_at is not None and before <= e.stored_at <= after for e in entries] == [
        True,
        True,
    ]
    assert entries[0].data is not None
    assert STORED_AT_KEY not in entries[0].data["additional_properties"]


def test_a_message_that_already_has_a_time_keeps_it() -> None:
    old = "2020-01-02T03:04:05.000006+00:00"
    message = Message.user("copied", message_id="m1", additional_properties={STORED_AT_KEY: old})
    (record,) = encode_records([message], stored_at="2026-01-01T00:00:00+00:00")
    assert json.loads(record.data)["additional_properties"][STORED_AT_KEY] == old
    (plain,) = encode_records([Message.user("x", message_id="m2")])
    assert STORED_AT_KEY not in json.loads(plain.data)["additional_properties"]


def test_control_records_carry_their_time() -> None:
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "s", ("q", "a"))
    before = now()
    undo(store, "s")
    branch = fork(store, "s")
    kinds = {e.kind: e.stored_at for e in read_log(store, "s") + read_log(store, branch)}
    for kind in ("chatkeep.retract", "chatkeep.forked", "chatkeep.fork"):
        assert kinds[kind] is not None and kinds[kind] >= before, kind


# -- describe_session ---------------------------------------------------------------------


def test_describe_a_conversation() -> None:
    store = Store(MemoryStore())
    provider = HistoryProvider(store)
    before = now()
    chat(provider, "s", ("  What is\nthe weather?  ", "Sunny."), ("And tomorrow?", "Rain."))
    after = now()
    info = describe_session(store, "s")
    assert isinstance(info, SessionInfo)
    assert info.id == "s"
    assert info.messages == 4
    assert info.title == "What is the weather?"
    assert info.created_at is not None and info.updated_at is not None
    assert before <= info.created_at <= info.updated_at <= after
    assert info.created_at.tzinfo is not None


def test_unknown_session_is_session_not_found() -> None:
    store = Store(MemoryStore())
    with pytest.raises(SessionNotFound):
        describe_session(store, "nobody")
    with pytest.raises(SessionNotFound):
        asyncio.run(adescribe_session(store, "nobody"))


def test_records_without_a_time_describe_as_none() -> None:
    store = Store(MemoryStore())
    messages = [user("written by hand"), assistant("ok")]
    store.append("s", [Record(m.message_id or "", encode_message(m)) for m in messages])
    info = describe_session(store, "s")
    assert (info.created_at, info.updated_at, info.messages) == (None, None, 2)
    assert info.title == "written by hand"


def test_title_is_one_line_and_truncated() -> None:
    store = Store(MemoryStore())
    long_text = "word " * 100
    chat(HistoryProvider(store), "s", (long_text, "ok"))
    title = describe_session(store, "s").title
    assert title is not None
    assert len(title) == TITLE_LENGTH and title.endswith("…")
    assert "\n" not in title and "  " not in title


def test_no_user_message_means_no_title() -> None:
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "s")
    asyncio.run(HistoryProvider(store).invoked(AgentSession("s"), [], [assistant("hi")]))
    assert describe_session(store, "s").title is None


def test_count_applies_undo_and_updated_at_moves() -> None:
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "s", ("one", "1"), ("two", "2"), ("three", "3"))
    first = describe_session(store, "s")
    undo(store, "s")
    second = describe_session(store, "s")
    assert (first.messages, second.messages) == (6, 4)
    assert first.updated_at is not None and second.updated_at is not None
    assert second.updated_at >= first.updated_at
    assert second.title == "one"
    assert second.created_at == first.created_at


def test_fork_counts_its_prefix_and_takes_the_root_title() -> None:
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "root", ("first question", "a"), ("second", "b"))
    at = read_view(store, "root")[1].message_id
    child = fork(store, "root", at, new_session_id="child")
    assert describe_session(store, child).messages == 2
    assert describe_session(store, child).title == "first question"
    chat(HistoryProvider(store), child, ("in the fork", "c"))
    grandchild = fork(store, child, new_session_id="grandchild")
    info = describe_session(store, grandchild)
    assert info.messages == len(read_view(store, grandchild)) == 4
    assert info.title == "first question"
    root = describe_session(store, "root")
    assert info.created_at is not None and root.created_at is not None
    assert info.created_at > root.created_at  # the fork's own creation


def test_fork_title_survives_the_parents_deletion() -> None:
    from chatkeep.core import delete_session

    store = Store(MemoryStore())
    chat(HistoryProvider(store), "root", ("the question", "a"))
    child = fork(store, "root", new_session_id="child")
    delete_session(store, "root")  # the fork is made self-contained
    info = describe_session(store, child)
    assert (info.title, info.messages) == ("the question", 2)


def test_count_matches_the_view_through_checkpoints_and_undos() -> None:
    rng = random.Random(7)
    store = Store(MemoryStore())
    provider = HistoryProvider(store)
    for step in range(60):
        action = rng.random()
        if action < 0.6:
            chat(provider, "s", (f"q{step}", f"a{step}"))
        elif action < 0.75:
            undo(store, "s")
        else:
            keep = rng.randrange(0, 6)
            compact(
                store,
                "s",
                lambda view, k=keep, n=step: [assistant(f"sum {n}"), *view[-k:]][: k + 1],
            )
        assert describe_session(store, "s").messages == len(read_view(store, "s")), step


def test_describing_a_compacted_session_reads_a_bounded_number_of_records(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(
        store, reducer=SlidingWindowReducer(10), reducer_trigger="after_message_added"
    )
    costs = []
    for size in (50, 500):
        session_id = f"s{size}"
        chat(provider, session_id, *[(f"q{n}", f"a{n}") for n in range(size // 2)])
        backend.reads.clear()
        info = describe_session(store, session_id)
        costs.append(sum(returned for *_, returned in backend.reads))
        assert info.messages == len(read_view(store, session_id)) == 10
    # Head, tail and the walk to the newest checkpoint: the same for 50 and 500 messages.
    assert costs[0] == costs[1] <= HEAD + 1 + 2 * 16


def _long(store: Store, session_id: str, messages: int) -> None:
    """A session of ``messages`` messages written in one batch (fast to build)."""
    batch = [user(f"m{n}") if n % 2 == 0 else assistant(f"m{n}") for n in range(messages)]
    store.append(session_id, encode_records(batch))


def test_count_walk_is_bounded_and_reports_a_lower_bound(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    _long(store, "big", 5 * COUNT_WALK)
    backend.reads.clear()
    info = describe_session(store, "big")
    read = sum(returned for *_, returned in backend.reads)
    assert not info.messages_exact
    assert COUNT_WALK // 2 <= info.messages <= COUNT_WALK < 5 * COUNT_WALK
    # Head, tail and the bounded walk (its slices may overshoot by one growth step).
    assert read <= HEAD + 1 + 2 * COUNT_WALK
    full = describe_session(store, "big", exact=True)
    assert (full.messages, full.messages_exact) == (5 * COUNT_WALK, True)
    assert full.title == info.title == "m0"


def test_a_short_session_is_counted_exactly() -> None:
    store = Store(MemoryStore())
    _long(store, "s", COUNT_WALK - 10)
    undo(store, "s")
    info = describe_session(store, "s")
    assert info.messages_exact
    assert info.messages == len(read_view(store, "s"))


def test_an_undo_past_the_bound_still_gives_a_true_lower_bound() -> None:
    store = Store(MemoryStore())
    _long(store, "s", 3 * COUNT_WALK)
    chat(HistoryProvider(store), "s", ("late", "reply"))
    # Retract everything back to message 100: the walk stops inside the retracted span.
    undo(store, "s", (3 * COUNT_WALK + 2 - 100) // 2)
    exact = len(read_view(store, "s"))
    assert exact == 100
    info = describe_session(store, "s")
    assert info.messages <= exact == describe_session(store, "s", exact=True).messages


def test_a_fork_of_a_long_session_is_bounded_across_the_fork_point() -> None:
    store = Store(MemoryStore())
    _long(store, "root", 2 * COUNT_WALK)
    child = fork(store, "root", new_session_id="child")
    # A message appended without a running count: the count's walk crosses the fork point.
    store.append(child, encode_records([user("in the fork")]))
    info = describe_session(store, child)
    assert not info.messages_exact and 1 < info.messages <= COUNT_WALK
    exact = describe_session(store, child, exact=True)
    assert exact.messages == len(read_view(store, child)) == 2 * COUNT_WALK + 1


def test_exact_is_checked() -> None:
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "s", ("hello", "hi"))
    with pytest.raises(InvalidOption):
        describe_session(store, "s", exact=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption):
        asyncio.run(adescribe_session(store, "s", exact="yes"))  # type: ignore[arg-type]


def _damage(store: Store, session_id: str) -> None:
    """A record no chatkeep version wrote (another application's data)."""
    store.append(session_id, [Record(id=new_id(), data=b"not json at all")])


def test_a_damaged_session_is_listed_not_raised() -> None:
    store = Store(MemoryStore())
    _three_sessions(store)
    _damage(store, "p-broken")
    store.append("p-foreign", [Record(id=new_id(), data=b'{"some": "other app"}')])
    with pytest.raises(CorruptRecord):
        describe_session(store, "p-broken")  # a direct ask still raises
    for newest_first in (True, False):
        infos = {i.id: i for i in list_session_infos(store, newest_first=newest_first)}
        assert set(infos) == {"p-a", "p-b", "p-c", "p-broken", "p-foreign"}
        broken = infos["p-broken"]
        assert broken.damaged is not None and "p-broken" in broken.damaged
        assert (broken.messages, broken.messages_exact) == (0, False)
        assert infos["p-foreign"].damaged is not None
        assert all(
            infos[k].damaged is None and infos[k].messages == 2 for k in ["p-a", "p-b", "p-c"]
        )
        ainfos = asyncio.run(_collect(store, newest_first))
        assert {i.id: i for i in ainfos} == infos


async def _collect(store: Store, newest_first: bool) -> list[SessionInfo]:
    return [i async for i in alist_session_infos(store, newest_first=newest_first)]


def test_async_describe_matches() -> None:
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "s", ("hello", "hi"))
    assert asyncio.run(adescribe_session(store, "s")) == describe_session(store, "s")


# -- list_session_infos -------------------------------------------------------------------


def _three_sessions(store: Store) -> None:
    provider = HistoryProvider(store)
    for name in ("b", "a", "c"):  # updated in this order
        chat(provider, f"p-{name}", (f"about {name}", "ok"))


def test_list_newest_first_with_a_limit() -> None:
    store = Store(MemoryStore())
    _three_sessions(store)
    chat(HistoryProvider(store), "other", ("not listed by prefix", "ok"))
    listed = list(list_session_infos(store, prefix="p-"))
    assert [i.id for i in listed] == ["p-c", "p-a", "p-b"]
    assert [i.id for i in list_session_infos(store, prefix="p-", limit=2)] == ["p-c", "p-a"]
    assert listed[0] == describe_session(store, "p-c")
    assert list(list_session_infos(store, prefix="p-", limit=0)) == []


def _without_recent() -> Store:
    """A memory store that hides its ``recent`` index: the listing's heap fallback."""
    return Store(MemoryStore(), capabilities=MemoryStore.capabilities - {"recent"})


def test_list_puts_sessions_without_a_time_last() -> None:
    store = _without_recent()
    _three_sessions(store)
    old = user("old")
    store.append("p-old", [Record(old.message_id or "", encode_message(old))])
    listed = [i.id for i in list_session_infos(store, prefix="p-")]
    assert listed == ["p-c", "p-a", "p-b", "p-old"]


def test_list_in_store_order_stops_after_the_limit(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    _three_sessions(store)
    backend.reads.clear()
    listing = list_session_infos(store, prefix="p-", newest_first=False, limit=1)
    (only,) = listing
    assert only.id in {"p-a", "p-b", "p-c"}
    assert {session for session, *_ in backend.reads} == {only.id}, "described more than one"


def test_list_leaves_out_internal_sessions() -> None:
    store = Store(MemoryStore())
    _three_sessions(store)
    store.append(TEMP_PREFIX + "x", [Record("r", b'{"type":"message","role":"user"}')])
    assert TEMP_PREFIX + "x" not in {i.id for i in list_session_infos(store)}
    assert TEMP_PREFIX + "x" not in {i.id for i in list_session_infos(store, newest_first=False)}


def test_newest_first_keeps_only_limit_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    import chatkeep.core.metadata as metadata

    store = _without_recent()
    provider = HistoryProvider(store)
    for n in range(20):
        chat(provider, f"s{n:02d}", ("q", "a"))
    largest = []
    real_keep = metadata._keep

    def keep(ranked: list[tuple[float, str]], item: tuple[float, str], limit: int | None) -> None:
        real_keep(ranked, item, limit)
        largest.append(len(ranked))

    monkeypatch.setattr(metadata, "_keep", keep)
    listed = [i.id for i in list_session_infos(store, limit=3)]
    assert listed == ["s19", "s18", "s17"]
    assert max(largest) == 3


def test_list_arguments_are_checked_at_the_call() -> None:
    store = Store(MemoryStore())
    for bad in ({"limit": -1}, {"limit": "3"}, {"limit": True}, {"prefix": 3}, {"newest_first": 1}):
        with pytest.raises(InvalidOption):
            list_session_infos(store, **bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidOption):
            alist_session_infos(store, **bad)  # type: ignore[arg-type]


class _NoListing:
    def __init__(self) -> None:
        self.inner = MemoryStore()

    def append(self, session_id: str, records: list[Record]) -> None:
        self.inner.append(session_id, records)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        return self.inner.read(session_id, start, stop)


def test_a_store_that_cannot_list_raises_at_the_call() -> None:
    store = Store(_NoListing())
    with pytest.raises(CapabilityMissing):
        list_session_infos(store)
    with pytest.raises(CapabilityMissing):
        alist_session_infos(store)


def test_async_listing_matches() -> None:
    store = Store(MemoryStore())
    _three_sessions(store)

    async def collect(**options: object) -> list[SessionInfo]:
        return [info async for info in alist_session_infos(store, prefix="p-", **options)]  # type: ignore[arg-type]

    assert asyncio.run(collect()) == list(list_session_infos(store, prefix="p-"))
    in_order = asyncio.run(collect(newest_first=False, limit=2))
    assert in_order == list(list_session_infos(store, prefix="p-", newest_first=False, limit=2))
    assert asyncio.run(collect(limit=0)) == []


def test_a_session_deleted_during_the_listing_is_left_out() -> None:
    store = Store(MemoryStore())
    _three_sessions(store)
    listing = list_session_infos(store, prefix="p-", newest_first=False)
    first = next(listing)
    rest = {"p-a", "p-b", "p-c"} - {first.id}
    gone = sorted(rest)[0]
    store.delete(gone)
    assert {i.id for i in listing} == rest - {gone}


def test_times_are_utc_and_ordered_within_a_second() -> None:
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "s", ("q", "a"))
    info = describe_session(store, "s")
    assert info.created_at is not None and info.updated_at is not None
    assert info.created_at.utcoffset() == timedelta(0)
    assert now() - info.updated_at < timedelta(seconds=60)


# -- the verified running count ---------------------------------------------------------------


def _windowed(store: Store) -> HistoryProvider:
    """A provider that loads only a window: its own loads never read the whole view."""
    return HistoryProvider(store, max_messages=10)


def _describe_reads(
    store: Store, backend: CountingBackend, session_id: str, forks: int = 0
) -> SessionInfo:
    """``describe_session``, asserting it made only small reads: head, tail, the count's
    check and, for the title, one head per fork level (``forks``); no walk."""
    backend.reads.clear()
    info = describe_session(store, session_id)
    calls = len(backend.reads)
    returned = sum(count for *_, count in backend.reads)
    assert calls <= 3 + forks and returned <= HEAD * (1 + forks) + 1 + 2, backend.reads
    return info


def _marked(store: Store, session_id: str) -> dict[str, object] | None:
    """The running count the session's last record carries, as stored (a message's under
    COUNT_KEY, a control record's in its ``count`` field)."""
    body = json.loads(store.read(session_id, -1)[-1].data)
    if body["type"] != "message":
        control: dict[str, object] | None = body.get("count")
        return control
    value: dict[str, object] | None = body.get("additional_properties", {}).get(COUNT_KEY)
    return value


def test_a_long_session_is_counted_exactly_in_constant_reads(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    _long(store, "s", COUNT_WALK + 100)
    assert not describe_session(store, "s").messages_exact  # no running count yet
    chat(HistoryProvider(store), "s", ("whole view", "read"))  # a load of the whole view
    chat(_windowed(store), "s", *[(f"q{n}", f"a{n}") for n in range(30)])
    info = _describe_reads(store, backend, "s")
    expected = COUNT_WALK + 100 + 2 + 60
    assert (info.messages, info.messages_exact) == (expected, True)
    assert info.messages == len(read_view(store, "s"))
    assert info.title == "m0" and info.updated_at is not None
    assert describe_session(store, "s", exact=True).messages == expected


def test_a_new_session_starts_its_count_with_the_first_turn(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    chat(_windowed(store), "s", ("hello", "hi"))
    assert _marked(store, "s") == {"n": 2, "after": None, "k": 2}
    chat(_windowed(store), "s", *[(f"q{n}", f"a{n}") for n in range(10)])  # past HEAD
    info = _describe_reads(store, backend, "s")
    assert (info.messages, info.messages_exact) == (22, True)


def test_undo_keeps_the_count_and_a_broken_chain_is_restored_by_a_whole_load(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()
    _long(store, "s", COUNT_WALK + 100)
    chat(HistoryProvider(store), "s", ("one", "two"), ("three", "four"))
    assert undo(store, "s") != []  # the retract carries the count of the view after it
    assert _marked(store, "s") == {"n": COUNT_WALK + 102, "after": _last_id(store, "s", 2), "k": 1}
    info = _describe_reads(store, backend, "s")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 102, True)
    chat(_windowed(store), "s", ("windowed", "load"))  # its load proves the count again
    info = _describe_reads(store, backend, "s")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 104, True)
    assert info.messages == len(read_view(store, "s"))
    # A raw append (no count) breaks the chain; a whole load restores it.
    store.append("s", encode_records([user("raw")]))
    assert not describe_session(store, "s").messages_exact
    chat(_windowed(store), "s", ("windowed", "again"))
    assert _marked(store, "s") is None
    assert not describe_session(store, "s").messages_exact
    chat(HistoryProvider(store), "s", ("whole", "view"))
    chat(_windowed(store), "s", ("and", "on"))
    info = describe_session(store, "s")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 104 + 7, True)
    assert info.messages == len(read_view(store, "s"))


def test_a_fork_counts_its_view_including_the_parent(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    _long(store, "root", COUNT_WALK + 100)
    chat(HistoryProvider(store), "root", ("before", "fork"))
    child = fork(store, "root", new_session_id="child")
    chat(HistoryProvider(store), child, ("in the fork", "ok"))
    chat(_windowed(store), child, ("more", "yes"))
    info = _describe_reads(store, backend, child, forks=1)
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 100 + 6, True)
    assert info.messages == len(read_view(store, child))
    # The parent's log now ends with the fork's registration, which carries the parent's
    # count: a windowed load there goes on counting.
    info = _describe_reads(store, backend, "root")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 102, True)
    chat(_windowed(store), "root", ("parent", "goes on"))
    info = _describe_reads(store, backend, "root")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 104, True)
    assert info.messages == len(read_view(store, "root"))


def test_compaction_and_a_checkpoint_batch_keep_the_count_true(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    _long(store, "s", COUNT_WALK + 100)
    chat(HistoryProvider(store), "s", ("one", "two"))
    compact(store, "s", lambda view: [assistant("summary"), *view[-3:]])
    assert describe_session(store, "s").messages == 4  # the walk stops at the checkpoint
    chat(_windowed(store), "s", ("after", "compaction"))  # the whole compacted view loads
    assert _marked(store, "s") == {"n": 6, "after": _last_id(store, "s", 3), "k": 2}
    info = _describe_reads(store, backend, "s")
    assert (info.messages, info.messages_exact) == (6, True) and len(read_view(store, "s")) == 6
    reducing = HistoryProvider(
        store, reducer=SlidingWindowReducer(5), reducer_trigger="after_message_added"
    )
    chat(reducing, "s", ("reduced", "turn"))  # the batch ends with a counted checkpoint
    assert _marked(store, "s") == {"n": 5, "after": _last_id(store, "s", 4), "k": 3}
    assert describe_session(store, "s").messages == len(read_view(store, "s")) == 5


def _last_id(store: Store, session_id: str, back: int) -> str:
    return store.read(session_id, -back, -back + 1 or None)[0].id


def test_another_writer_between_load_and_save_breaks_the_chain() -> None:
    store = Store(MemoryStore())
    _long(store, "s", COUNT_WALK + 100)
    chat(HistoryProvider(store), "s", ("one", "two"))
    first, second = _windowed(store), _windowed(store)
    session = AgentSession("s")

    async def race() -> None:
        sent = await first.invoking(session, [user("slow")])
        # Another process stores a whole turn in between (with a count of its own).
        other = AgentSession("s")
        await second.invoked(other, await second.invoking(other, [user("fast")]), [])
        await first.invoked(session, sent, [assistant("late")])

    asyncio.run(race())
    mark = _marked(store, "s")
    assert mark is not None and mark["after"] != _last_id(store, "s", 3)
    info = describe_session(store, "s")
    assert not info.messages_exact and info.messages <= len(read_view(store, "s"))
    chat(HistoryProvider(store), "s", ("whole", "view"))
    info = describe_session(store, "s")
    assert (info.messages, info.messages_exact) == (len(read_view(store, "s")), True)


def test_a_second_provider_instance_continues_the_count() -> None:
    store = Store(MemoryStore())
    _long(store, "s", COUNT_WALK + 100)
    chat(HistoryProvider(store), "s", ("one", "two"))
    for n in range(5):  # a new provider and a new session object each time: a new process
        chat(_windowed(store), "s", (f"q{n}", f"a{n}"))
    info = describe_session(store, "s")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 100 + 12, True)


def test_a_tampered_count_falls_back(counting_store: MakeStore) -> None:
    store, _backend = counting_store()
    _long(store, "s", COUNT_WALK + 100)
    chat(HistoryProvider(store), "s", ("one", "two"))
    records = store.read("s")
    for field, value in (("after", "not-the-record"), ("k", 3), ("k", 0), ("n", "many")):
        body = json.loads(records[-1].data)
        body["additional_properties"][COUNT_KEY][field] = value
        forged = Record(records[-1].id, json.dumps(body, separators=(",", ":")).encode())
        session_id = f"forged-{field}-{value}"
        store.append(session_id, [*records[:-1], forged])
        info = describe_session(store, session_id)
        assert not info.messages_exact, (field, value)
        assert info.messages <= COUNT_WALK + 102
        chat(_windowed(store), session_id, ("windowed", "load"))  # proves nothing either
        assert _marked(store, session_id) is None, (field, value)


def test_reads_never_show_the_count() -> None:
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "s", ("hello", "hi"), ("more", "ok"))
    assert _marked(store, "s") is not None
    stored = store.read("s")
    assert [COUNT_KEY.encode() in record.data for record in stored] == [False, True] * 2
    for message in read_view(store, "s"):
        assert COUNT_KEY not in message.additional_properties
        assert STORED_AT_KEY not in message.additional_properties
    for entry in read_log(store, "s"):
        assert entry.message is not None
        assert COUNT_KEY not in entry.message.additional_properties
    loaded = asyncio.run(HistoryProvider(store).messages("s"))
    assert all(COUNT_KEY not in m.additional_properties for m in loaded)


async def _interleave(store: Store, session_id: str) -> None:
    """Two windowed providers whose turns overlap: both load, then both save."""
    first, second = _windowed(store), _windowed(store)
    a, b = AgentSession(session_id), AgentSession(session_id)
    sent_a = await first.invoking(a, [user("a")])
    sent_b = await second.invoking(b, [user("b")])
    await first.invoked(a, sent_a, [assistant("ra")])
    await second.invoked(b, sent_b, [assistant("rb")])


def test_the_count_matches_the_view_whatever_happens() -> None:
    """Random turns, windowed and whole loads, undos, forks, compactions, raw appends and
    interleaved writers: a count reported exact is always the view's length."""
    rng = random.Random(13)
    store = Store(MemoryStore())
    sessions = ["s"]
    chat(HistoryProvider(store), "s", ("start", "ok"))
    for step in range(200):
        session_id = rng.choice(sessions)
        action = rng.random()
        if action < 0.35:
            chat(_windowed(store), session_id, (f"q{step}", f"a{step}"))
        elif action < 0.45:
            chat(HistoryProvider(store, max_messages=1), session_id, (f"q{step}", "a"))
        elif action < 0.55:
            chat(HistoryProvider(store), session_id, (f"q{step}", f"a{step}"))
        elif action < 0.62:
            undo(store, session_id)
        elif action < 0.68:
            sessions.append(fork(store, session_id))
        elif action < 0.74:
            keep = rng.randrange(0, 4)
            compact(store, session_id, lambda view, k=keep: [assistant("sum"), *view[-k:]][: k + 1])
        elif action < 0.8:
            store.append(session_id, encode_records([user(f"raw {step}")]))
        else:
            asyncio.run(_interleave(store, session_id))
        for name in sessions:
            info = describe_session(store, name)
            if info.messages_exact:
                assert info.messages == len(read_view(store, name)), (step, name)


# -- the count carried by control records (undo, fork, checkpoint) ----------------------------


class _Intruder(CountingBackend):
    """A backend without ``conditional`` on which another writer appends a raw message
    right before the next append of ``session_id`` (a writer racing a view operation)."""

    capabilities: ClassVar[frozenset[str]] = MemoryStore.capabilities - {"conditional"}

    def __init__(self) -> None:
        super().__init__()
        self.armed: str | None = None

    def append(self, session_id: str, records: list[Record]) -> None:
        if session_id == self.armed:
            self.armed = None
            self.inner.append(session_id, encode_records([user("intruder")]))
        super().append(session_id, records)


def test_undo_raced_by_another_writer_falls_back_never_wrong() -> None:
    backend = _Intruder()
    store = Store(backend)
    _long(store, "s", COUNT_WALK + 100)
    chat(HistoryProvider(store), "s", ("one", "two"))
    backend.armed = "s"
    undo(store, "s")  # the intruder lands between undo's read and its retract
    mark = _marked(store, "s")
    assert mark is not None and mark["after"] != _last_id(store, "s", 2)
    info = describe_session(store, "s")
    assert not info.messages_exact and info.messages <= len(read_view(store, "s"))
    chat(HistoryProvider(store), "s", ("whole", "view"))
    info = describe_session(store, "s")
    assert (info.messages, info.messages_exact) == (len(read_view(store, "s")), True)


class _ConditionalIntruder(_Intruder):
    """The same race on a store with ``conditional``: the retract loses and is retried."""

    capabilities: ClassVar[frozenset[str]] = MemoryStore.capabilities

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        if session_id == self.armed:
            self.armed = None
            self.inner.append(session_id, encode_records([user("intruder")]))
        super().append_if(session_id, records, after)


def test_a_conditional_undo_that_lost_a_race_counts_the_view_it_retried_on() -> None:
    backend = _ConditionalIntruder()
    store = Store(backend)
    _long(store, "s", COUNT_WALK + 100)
    chat(HistoryProvider(store), "s", ("one", "two"), ("three", "four"))
    chat(_windowed(store), "s", ("five", "six"))
    backend.armed = "s"
    retracted = undo(store, "s")  # lost to the intruder, retried: retracts its turn
    assert [m.text for m in retracted] == ["intruder"]
    # The retried read ended with the intruder's uncounted record: nothing proved, no count.
    assert _marked(store, "s") is None
    info = describe_session(store, "s")
    assert not info.messages_exact and info.messages <= len(read_view(store, "s"))
    chat(HistoryProvider(store), "s", ("whole", "view"))  # proves the count again
    undo(store, "s", turns=2)
    info = describe_session(store, "s")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 104, True)
    assert info.messages == len(read_view(store, "s"))


def test_an_undo_across_a_checkpoint_writes_no_count() -> None:
    """Retracting back over a checkpoint undoes the compaction too (the view before it
    comes back): undo does not guess that count."""
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "s", *[(f"q{n}", f"a{n}") for n in range(5)])
    compact(store, "s", lambda view: view[-3:])  # a1 in front: [a3, q4, a4]
    chat(HistoryProvider(store), "s", ("q5", "a5"))
    undo(store, "s", turns=2)  # back to q4, over the checkpoint
    assert _marked(store, "s") is None
    info = describe_session(store, "s")
    assert (info.messages, info.messages_exact) == (len(read_view(store, "s")), True) == (8, True)


def test_a_fork_at_a_message_takes_the_count_proved_there(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    _long(store, "root", COUNT_WALK + 100)
    chat(HistoryProvider(store), "root", ("one", "two"), ("three", "four"))
    view = read_view(store, "root")
    at = view[-3].message_id  # "two": the last message of a batch, with a count
    assert at is not None
    child = fork(store, "root", at, new_session_id="child")
    assert _marked(store, child) == {"n": COUNT_WALK + 102, "after": None, "k": 1}
    info = _describe_reads(store, backend, child, forks=1)
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 102, True)
    assert info.messages == len(read_view(store, child))
    # The parent's registration carries the parent's own count at its end.
    info = _describe_reads(store, backend, "root")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 104, True)
    # At a message without a count (the first of a batch), the fork counts by walking.
    plain = view[-4].message_id
    assert plain is not None
    other = fork(store, "root", plain, new_session_id="other")
    assert _marked(store, other) is None
    assert not describe_session(store, other).messages_exact


def test_a_fork_of_a_fork_chains_the_count(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    _long(store, "root", COUNT_WALK + 100)
    chat(HistoryProvider(store), "root", ("one", "two"))
    child = fork(store, "root", new_session_id="child")
    grandchild = fork(store, child, new_session_id="grandchild")
    chat(_windowed(store), grandchild, ("deep", "down"))
    info = _describe_reads(store, backend, grandchild, forks=2)
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 104, True)
    assert info.messages == len(read_view(store, grandchild))
    assert describe_session(store, child).messages == COUNT_WALK + 102


def test_compact_and_a_large_checkpoint_batch_are_counted(counting_store: MakeStore) -> None:
    """A checkpoint keeping more than COUNT_WALK messages: the walk could not count it,
    the checkpoint's own count does."""
    store, backend = counting_store()
    _long(store, "s", COUNT_WALK + 300)
    assert compact(store, "s", lambda view: [assistant("summary"), *view[-(COUNT_WALK + 10) :]])
    info = _describe_reads(store, backend, "s")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 11, True)
    reducing = HistoryProvider(
        store,
        reducer=SlidingWindowReducer(COUNT_WALK + 5),
        reducer_trigger="after_message_added",
    )
    chat(reducing, "s", ("reduced", "turn"))
    assert _marked(store, "s") == {"n": COUNT_WALK + 5, "after": _last_id(store, "s", 4), "k": 3}
    info = _describe_reads(store, backend, "s")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 5, True)
    assert info.messages == len(read_view(store, "s"))
    chat(_windowed(store), "s", ("after", "it"))  # the chain goes on past the checkpoint
    info = _describe_reads(store, backend, "s")
    assert (info.messages, info.messages_exact) == (COUNT_WALK + 7, True)


def test_hostile_marks_on_control_records_fall_back() -> None:
    store = Store(MemoryStore())
    _long(store, "s", COUNT_WALK + 100)
    chat(HistoryProvider(store), "s", ("one", "two"))
    undo(store, "s")
    records = store.read("s")
    retract = json.loads(records[-1].data)
    forgeries = {
        "after": {**retract["count"], "after": "not-the-record"},
        "k": {**retract["count"], "k": 2},
        "n": {**retract["count"], "n": -1},
        "bool": {**retract["count"], "n": True},
        "shape": "many",
    }
    for name, count in forgeries.items():
        body = {**retract, "count": count}
        forged = Record(records[-1].id, json.dumps(body).encode())
        store.append(f"forged-{name}", [*records[:-1], forged])
        info = describe_session(store, f"forged-{name}")
        assert not info.messages_exact, name
        assert info.messages <= len(read_view(store, f"forged-{name}"))
    # A fork record's count with after=None holds only at the start of a log.
    late = Record(
        new_id(),
        b'{"type":"chatkeep.forked","child":"x","position":1,'
        b'"count":{"n":99999,"after":null,"k":1}}',
    )
    store.append("late", [*encode_records([user("a")]), late])
    assert describe_session(store, "late").messages == 1
    # A record of an unknown kind is damage, whatever count it claims.
    unknown = Record(new_id(), b'{"type":"chatkeep.future","count":{"n":1,"after":null,"k":1}}')
    store.append("future", [unknown])
    with pytest.raises(CorruptRecord):
        describe_session(store, "future")


def test_the_count_on_control_records_is_never_seen_by_reads() -> None:
    store = Store(MemoryStore())
    chat(HistoryProvider(store), "s", ("one", "two"), ("three", "four"))
    undo(store, "s")
    child = fork(store, "s")
    assert read_view(store, child) == read_view(store, "s")
    assert [m.text for m in read_view(store, "s")] == ["one", "two"]
    assert describe_session(store, child).messages == 2
