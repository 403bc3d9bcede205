"""HistoryProvider: loading, tagging, filtering and storing a turn."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from chatkeep.core import (
    AgentSession,
    CorruptRecord,
    HistoryProvider,
    Message,
    MessageSource,
    Record,
    Store,
    decode_records,
    encode_message,
    encode_records,
    open_store,
    read_messages,
)
from chatkeep.core.ids import new_id
from chatkeep.core.messages import ATTRIBUTION_KEY
from chatkeep.core.metadata import COUNT_KEY

# counting_store (conftest) returns (store, CountingBackend).
MakeStore = Callable[..., tuple[Store, Any]]


def user(text: str) -> Message:
    return Message.user(text, message_id=new_id())


def assistant(text: str) -> Message:
    return Message.assistant(text, message_id=new_id())


def turn(
    provider: HistoryProvider,
    session: AgentSession,
    request: list[Message],
    response: list[Message],
) -> list[Message]:
    """One model call as the agent makes it: invoking, then invoked. Returns what was sent."""

    async def run() -> list[Message]:
        sent = await provider.invoking(session, request)
        await provider.invoked(session, sent, response)
        return sent

    return asyncio.run(run())


def stored(store: Store, session: AgentSession) -> list[Message]:
    return read_messages(store, session.session_id)


def test_loaded_history_is_tagged_copies_followed_by_the_request(
    counting_store: MakeStore,
) -> None:
    store, _ = counting_store()
    provider = HistoryProvider(store, source_id="my-history")
    session = AgentSession()
    first = [user("hello"), assistant("hi there")]
    turn(provider, session, first[:1], first[1:])

    request = [user("again")]
    before = repr(request)
    sent = asyncio.run(provider.invoking(session, request))
    assert [m.text for m in sent] == ["hello", "hi there", "again"]
    for message in sent[:2]:
        assert message.source is MessageSource.CHAT_HISTORY
        assert message.source_id == "my-history"
    assert sent[2] == request[0]
    assert sent[2].source is MessageSource.EXTERNAL
    assert repr(request) == before  # the caller's messages are never modified
    # What is stored is untouched by tagging.
    assert all(ATTRIBUTION_KEY not in m.additional_properties for m in stored(store, session))


def test_tagging_returns_a_copy() -> None:
    original = Message.user("x", additional_properties={"k": 1})
    tagged = original.tagged(MessageSource.CONTEXT_PROVIDER, "rag")
    assert tagged is not original
    assert original.additional_properties == {"k": 1}
    assert original.source is MessageSource.EXTERNAL
    assert tagged.source is MessageSource.CONTEXT_PROVIDER
    assert tagged.source_id == "rag"
    assert tagged.untagged() == original
    assert original.untagged() is original


def test_stored_records_carry_no_attribution(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store, store_context_messages=True)
    session = AgentSession()
    context = user("retrieved doc").tagged(MessageSource.CONTEXT_PROVIDER, "rag")
    external = user("question").tagged(MessageSource.EXTERNAL, "caller")
    turn(provider, session, [context, external], [assistant("answer")])
    turn(provider, session, [user("more")], [assistant("ok")])
    batches = [batch for _, batch in backend.appends]
    assert [len(batch) for batch in batches] == [3, 2]
    for batch in batches:
        for index, record in enumerate(batch):
            assert ATTRIBUTION_KEY.encode() not in record.data
            # Only the time it was stored and, in a batch's last record, the running count
            # (see chatkeep.core.metadata), no tag.
            keys = sorted(json.loads(record.data)["additional_properties"])
            if index == len(batch) - 1:
                assert keys == ["chatkeep.count", "chatkeep.stored_at"]
            else:
                assert keys == ["chatkeep.stored_at"]


def test_chat_history_tagged_request_messages_are_never_stored(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store)
    session = AgentSession()
    replayed = user("from some other history").tagged(MessageSource.CHAT_HISTORY, "other")
    turn(provider, session, [replayed, user("new")], [assistant("reply")])
    assert [m.text for m in stored(store, session)] == ["new", "reply"]
    assert len(backend.appends) == 1


@pytest.mark.parametrize("store_context", [False, True])
def test_context_messages_are_stored_only_when_asked(
    counting_store: MakeStore, store_context: bool
) -> None:
    store, _ = counting_store()
    provider = HistoryProvider(store, store_context_messages=store_context)
    session = AgentSession()
    context = user("injected context").tagged(MessageSource.CONTEXT_PROVIDER, "rag")
    turn(provider, session, [context, user("question")], [assistant("answer")])
    texts = [m.text for m in stored(store, session)]
    if store_context:
        assert texts == ["injected context", "question", "answer"]
    else:
        assert texts == ["question", "answer"]


def test_nothing_is_stored_when_the_model_call_raised(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store)
    session = AgentSession()

    async def failed_turn() -> None:
        sent = await provider.invoking(session, [user("doomed")])
        await provider.invoked(session, sent, [assistant("x")], error=RuntimeError("boom"))

    asyncio.run(failed_turn())
    assert backend.appends == []
    assert stored(store, session) == []
    assert "chat_history.loaded_ids" not in session.state  # no leftovers in the session
    assert "chat_history.loaded_count" not in session.state


def test_already_stored_ids_are_dropped(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store)
    session = AgentSession()
    hello, reply = user("hello"), assistant("hi")
    turn(provider, session, [hello], [reply])
    # The caller re-sends the same (untagged) message objects along with a new one.
    again = user("again")
    turn(provider, session, [hello, reply, again], [assistant("ok")])
    assert [m.text for m in stored(store, session)] == ["hello", "hi", "again", "ok"]
    second_batch = decode_records(session.session_id, backend.appends[1][1])
    assert [m.text for m in second_batch] == ["again", "ok"]


def test_duplicates_within_one_turn_are_stored_once(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    provider = HistoryProvider(store)
    session = AgentSession()
    message = user("twice")
    turn(provider, session, [message, message], [])
    assert [m.text for m in stored(store, session)] == ["twice"]


def test_messages_without_ids_get_ids_when_stored(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    provider = HistoryProvider(store)
    session = AgentSession()
    request = [Message.user("no id")]
    turn(provider, session, request, [Message.assistant("no id either")])
    ids = [m.message_id for m in stored(store, session)]
    assert all(ids) and len(set(ids)) == 2
    assert request[0].message_id is None  # the caller's object is not modified


def test_exactly_one_append_per_turn_and_fifty_turns(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store)
    session = AgentSession()
    for i in range(50):
        turn(provider, session, [user(f"q{i}")], [assistant(f"a{i}")])
        assert len(backend.appends) == i + 1
    messages = stored(store, session)
    assert len(messages) == 100
    assert len({m.message_id for m in messages}) == 100
    assert [m.text for m in messages[:4]] == ["q0", "a0", "q1", "a1"]
    assert [m.role for m in messages] == ["user", "assistant"] * 50


def test_store_inputs_and_outputs_switches(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    session = AgentSession()
    turn(HistoryProvider(store, store_inputs=False), session, [user("q")], [assistant("a")])
    turn(HistoryProvider(store, store_outputs=False), session, [user("q2")], [assistant("a2")])
    assert [m.text for m in stored(store, session)] == ["a", "q2"]


def test_load_messages_false_sends_only_the_request(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    session = AgentSession()
    turn(HistoryProvider(store), session, [user("q")], [assistant("a")])
    reads_before = len(backend.reads)
    sent = turn(HistoryProvider(store, load_messages=False), session, [user("q2")], [])
    assert [m.text for m in sent] == ["q2"]
    assert len(backend.reads) == reads_before


def test_max_messages_reads_only_the_tail(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    session = AgentSession()
    store.append(session.session_id, encode_records([user(f"m{i}") for i in range(20)]))
    provider = HistoryProvider(store, max_messages=4)
    sent = asyncio.run(provider.invoking(session, [user("now")]))
    assert [m.text for m in sent] == ["m16", "m17", "m18", "m19", "now"]
    assert backend.reads == [(session.session_id, -4, None, 4)]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", True])
def test_max_messages_must_be_positive_int(bad: object) -> None:
    with pytest.raises(ValueError):
        HistoryProvider("memory://", max_messages=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_reducer_changes_the_view_not_the_transcript(
    counting_store: MakeStore, asynchronous: bool
) -> None:
    store, _ = counting_store()
    seen: list[int] = []

    def keep_last_two(history: list[Message]) -> list[Message]:
        seen.append(len(history))
        return history[-2:]

    async def keep_last_two_async(history: list[Message]) -> list[Message]:
        return keep_last_two(history)

    provider = HistoryProvider(
        store, reducer=keep_last_two_async if asynchronous else keep_last_two
    )
    session = AgentSession()
    for i in range(5):
        sent = turn(provider, session, [user(f"q{i}")], [assistant(f"a{i}")])
        assert len(sent) == min(2 * i, 2) + 1
    assert seen == [0, 2, 4, 6, 8]
    assert len(stored(store, session)) == 10  # the reducer never destroys the transcript


def test_output_filter_applies_to_loaded_history(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    provider = HistoryProvider(
        store, output_filter=lambda history: [m for m in history if m.role == "user"]
    )
    session = AgentSession()
    turn(provider, session, [user("q")], [assistant("a")])
    sent = turn(provider, session, [user("q2")], [assistant("a2")])
    assert [m.text for m in sent] == ["q", "q2"]
    assert len(stored(store, session)) == 4


def test_sessions_sharing_a_provider_stay_apart(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    provider = HistoryProvider(store)
    one, two = AgentSession(), AgentSession()

    async def interleaved() -> None:
        sent_one = await provider.invoking(one, [user("one-q")])
        sent_two = await provider.invoking(two, [user("two-q")])
        await provider.invoked(two, sent_two, [assistant("two-a")])
        await provider.invoked(one, sent_one, [assistant("one-a")])

    asyncio.run(interleaved())
    assert [m.text for m in stored(store, one)] == ["one-q", "one-a"]
    assert [m.text for m in stored(store, two)] == ["two-q", "two-a"]


def test_provider_opens_a_store_from_a_url(memory_url: str) -> None:
    provider = HistoryProvider(memory_url)
    session = AgentSession()
    turn(provider, session, [user("q")], [assistant("a")])
    assert [m.text for m in read_messages(open_store(memory_url), session.session_id)] == [
        "q",
        "a",
    ]
    assert [m.text for m in asyncio.run(provider.messages(session.session_id))] == ["q", "a"]


# -- corrupt records -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage", [b"not json at all", b"[1, 2]", b'{"role": 5}', b"\xff\xfe", b""]
)
def test_corrupt_record_names_session_and_position(
    counting_store: MakeStore, garbage: bytes
) -> None:
    store, _ = counting_store()
    session = AgentSession("chat-with-a-bad-record")
    good = [user("fine"), user("also fine")]
    store.append(
        session.session_id,
        [
            Record(good[0].message_id or "", encode_message(good[0])),
            Record("bad-one", garbage),
            Record(good[1].message_id or "", encode_message(good[1])),
        ],
    )
    provider = HistoryProvider(store)
    with pytest.raises(CorruptRecord) as info:
        asyncio.run(provider.invoking(session, [user("hi")]))
    error = info.value
    assert error.session_id == "chat-with-a-bad-record"
    assert error.position == 1
    assert error.record_id == "bad-one"
    assert "chat-with-a-bad-record" in str(error)
    assert "position 1" in str(error)
    with pytest.raises(CorruptRecord):
        read_messages(store, session.session_id)
    assert isinstance(error, ValueError)


def test_record_whose_message_id_differs_is_corrupt() -> None:
    message = Message.user("x", message_id="real-id")
    with pytest.raises(CorruptRecord, match="does not match"):
        decode_records("s", [Record("other-id", encode_message(message))])


def test_record_without_message_id_takes_the_record_id() -> None:
    (message,) = decode_records("s", [Record("rid", encode_message(Message.user("x")))])
    assert message.message_id == "rid"


def test_encode_records_requires_ids() -> None:
    with pytest.raises(ValueError):
        encode_records([Message.user("no id")])


def test_a_retried_save_is_a_no_op_despite_its_later_storage_time() -> None:
    """The same messages saved again (a retry after an ambiguous failure) carry a later
    ``chatkeep.stored_at``, so the store refuses them as a RecordConflict; the provider sees
    that only the time differs and stores nothing new."""
    import time

    from chatkeep.core import RecordConflict

    store = open_store("memory://")
    provider = HistoryProvider(store)
    session = AgentSession()
    batch = [user("hello"), assistant("hi")]
    asyncio.run(provider.save(session, batch))
    first = store.read(session.session_id)
    time.sleep(0.002)  # a later stamp, so the bytes really differ
    asyncio.run(provider.save(session, batch))
    assert store.read(session.session_id) == first
    # A real collision (the same id, other content) still raises.
    clash = Message.user("something else", message_id=batch[0].message_id)
    with pytest.raises(RecordConflict):
        asyncio.run(provider.save(session, [clash]))
    assert store.read(session.session_id) == first


# -- the running count (chatkeep.count, see chatkeep.core.metadata) ---------------------------


def _counts(store: Store, session_id: str) -> list[Any]:
    """The running count each stored record carries (``None`` for none)."""
    return [
        json.loads(record.data).get("additional_properties", {}).get(COUNT_KEY)
        for record in store.read(session_id)
    ]


def test_a_turn_after_a_proving_load_carries_the_count(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store)
    session = AgentSession()
    turn(provider, session, [user("q")], [assistant("a")])
    first_last = store.read(session.session_id)[-1].id
    turn(provider, session, [user("q2")], [assistant("a2"), assistant("a3")])
    assert _counts(store, session.session_id) == [
        None,
        {"n": 2, "after": None, "k": 2},
        None,
        None,
        {"n": 5, "after": first_last, "k": 3},
    ]
    assert "chat_history.loaded_count" not in session.state  # used once
    # One append per turn still, and the load made no extra read for it.
    assert len(backend.appends) == 2


def test_no_count_without_a_load_that_proves_it() -> None:
    store = open_store("memory://")
    session = AgentSession()
    asyncio.run(HistoryProvider(store).save(session, [user("direct save")]))
    turn(HistoryProvider(store, load_messages=False), session, [user("q")], [assistant("a")])

    class Elsewhere(HistoryProvider):
        async def load(self, session: AgentSession) -> list[Message]:
            return []

    turn(Elsewhere(store), session, [user("q2")], [assistant("a2")])
    assert _counts(store, session.session_id) == [None] * 5
    # A count kept in the session that is not a count is not used.
    provider = HistoryProvider(store)
    asyncio.run(provider.load(session))
    session.state.set("chat_history.loaded_count", {"n": "five", "after": None})
    asyncio.run(provider.save(session, [user("q3")]))
    assert _counts(store, session.session_id)[-1] is None


def test_a_batch_with_a_checkpoint_carries_no_count() -> None:
    from chatkeep.core import SlidingWindowReducer

    store = open_store("memory://")
    provider = HistoryProvider(
        store, reducer=SlidingWindowReducer(2), reducer_trigger="after_message_added"
    )
    session = AgentSession()
    turn(provider, session, [user("q")], [assistant("a"), assistant("b")])
    assert _counts(store, session.session_id) == [None] * 4  # messages, then the checkpoint


def test_a_retried_save_with_a_count_is_still_a_no_op() -> None:
    store = open_store("memory://")
    provider = HistoryProvider(store)
    session = AgentSession()
    batch = [user("hello"), assistant("hi")]
    asyncio.run(provider.load(session))
    asyncio.run(provider.save(session, batch))
    first = store.read(session.session_id)
    assert _counts(store, session.session_id)[-1] == {"n": 2, "after": None, "k": 2}
    asyncio.run(provider.load(session))  # now the count would be another one
    asyncio.run(provider.save(session, batch))
    assert store.read(session.session_id) == first
