"""``ChatkeepHistoryProvider`` on every backend.

The first part is MAF's own tests for its history providers (``HistoryProvider``,
``InMemoryHistoryProvider``, ``FileHistoryProvider`` and agent-framework-redis's
``RedisHistoryProvider``, agent-framework 1.23), adapted to target this provider on a real
store: where MAF's tests mock a Redis client or read a file, these read the store. Each
adapted test names the MAF test it comes from. The second part is what chatkeep adds:
views, ids, de-duplication on every backend, lifecycle and errors.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast

import agent_framework._sessions
import pytest
from agent_framework import (
    AgentResponse,
    AgentResponseUpdate,
    AgentSession,
    Content,
    HistoryProvider,
    Message,
    SessionContext,
)
from maf_support import run

from chatkeep.agent_framework import FRAMEWORK_MESSAGE_ID, ChatkeepHistoryProvider
from chatkeep.agent_framework import tail as tail_module
from chatkeep.core import (
    CorruptRecord,
    EncodeError,
    InvalidOption,
    InvalidSessionId,
    Record,
    SlidingWindowReducer,
    Store,
    acompact,
    afork,
    aundo,
    decode_message,
    new_id,
    open_store,
)


@pytest.fixture
def open_provider(store_url: str) -> Iterator[Callable[..., ChatkeepHistoryProvider]]:
    """``open_provider(**options)``: a provider on the test's store (all on one Store, so
    that ``memory://`` providers share it); the store is closed at the end."""
    store = open_store(store_url)

    def make(**options: Any) -> ChatkeepHistoryProvider:
        return ChatkeepHistoryProvider(store=store, **options)

    yield make
    store.close()


@pytest.fixture
def provider(open_provider: Callable[..., ChatkeepHistoryProvider]) -> ChatkeepHistoryProvider:
    return open_provider()


@pytest.fixture
def sid() -> str:
    return "s-" + uuid.uuid4().hex


def texts(messages: list[Message]) -> list[str]:
    return [message.text for message in messages]


async def before(provider: HistoryProvider, context: SessionContext) -> AgentSession:
    session = AgentSession(session_id=context.session_id)
    await provider.before_run(
        agent=cast("Any", None),
        session=session,
        context=context,
        state=session.state.setdefault(provider.source_id, {}),
    )
    return session


async def after(provider: HistoryProvider, context: SessionContext) -> None:
    session = AgentSession(session_id=context.session_id)
    await provider.after_run(
        agent=cast("Any", None),
        session=session,
        context=context,
        state=session.state.setdefault(provider.source_id, {}),
    )


def respond(context: SessionContext, *replies: Message) -> SessionContext:
    context._response = AgentResponse(messages=list(replies))
    return context


# == MAF's tests, adapted =====================================================================

# -- from test_sessions.py::TestHistoryProviderBase -----------------------------------------


def test_default_flags(provider: ChatkeepHistoryProvider) -> None:
    assert provider.source_id == "chatkeep"
    assert provider.load_messages is True
    assert provider.store_outputs is True
    assert provider.store_inputs is True
    assert provider.store_context_messages is False
    assert provider.store_context_from is None
    assert provider.max_messages is None


def test_custom_flags(open_provider: Callable[..., ChatkeepHistoryProvider]) -> None:
    provider = open_provider(
        source_id="audit",
        load_messages=False,
        store_inputs=False,
        store_outputs=False,
        store_context_messages=True,
        store_context_from={"rag"},
        max_messages=50,
    )
    assert provider.source_id == "audit"
    assert provider.load_messages is False
    assert provider.store_inputs is False
    assert provider.store_outputs is False
    assert provider.store_context_messages is True
    assert provider.store_context_from == {"rag"}
    assert provider.max_messages == 50


def test_before_run_loads_messages(provider: ChatkeepHistoryProvider, sid: str) -> None:
    run(provider.save_messages(sid, [Message("user", ["history"])]))
    context = SessionContext(session_id=sid, input_messages=[])
    run(before(provider, context))
    assert texts(context.context_messages["chatkeep"]) == ["history"]


def test_after_run_stores_inputs_and_responses(provider: ChatkeepHistoryProvider, sid: str) -> None:
    context = SessionContext(session_id=sid, input_messages=[Message("user", ["hello"])])
    run(after(provider, respond(context, Message("assistant", ["hi"]))))
    assert texts(run(provider.get_messages(sid))) == ["hello", "hi"]


def test_after_run_stores_coalesced_code_interpreter_chunks(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str
) -> None:
    provider = open_provider(store_inputs=False)
    updates = [
        AgentResponseUpdate(
            role="assistant",
            contents=[Content.from_code_interpreter_tool_result(call_id="ci_123", outputs=[])],
        ),
        *(
            AgentResponseUpdate(
                contents=[
                    Content.from_code_interpreter_tool_call(
                        call_id="ci_123",
                        inputs=[Content.from_text(text=piece)],
                        additional_properties={"sequence_number": number},
                    )
                ]
            )
            for number, piece in enumerate(["import", " pandas", "import pandas as pd"], 1)
        ),
    ]
    context = SessionContext(session_id=sid, input_messages=[Message("user", ["make a sheet"])])
    context._response = AgentResponse.from_updates(updates)
    run(after(provider, context))

    (stored,) = run(provider.get_messages(sid))
    calls = [c for c in stored.contents if c.type == "code_interpreter_tool_call"]
    results = [c for c in stored.contents if c.type == "code_interpreter_tool_result"]
    assert len(calls) == 1
    assert len(results) == 1
    assert calls[0].inputs is not None
    # What is stored is the response as MAF coalesced it (MAF's coalescing rule is its own
    # business and changed between releases), content by content.
    (expected,) = context.response.messages  # type: ignore[union-attr]
    assert stored.contents == expected.contents


def test_after_run_skips_inputs_when_disabled(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str
) -> None:
    provider = open_provider(store_inputs=False)
    context = SessionContext(session_id=sid, input_messages=[Message("user", ["hello"])])
    run(after(provider, respond(context, Message("assistant", ["hi"]))))
    assert texts(run(provider.get_messages(sid))) == ["hi"]


def test_after_run_skips_responses_when_disabled(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str
) -> None:
    provider = open_provider(store_outputs=False)
    context = SessionContext(session_id=sid, input_messages=[Message("user", ["hello"])])
    run(after(provider, respond(context, Message("assistant", ["hi"]))))
    assert texts(run(provider.get_messages(sid))) == ["hello"]


def test_after_run_stores_context_messages(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str
) -> None:
    provider = open_provider(source_id="audit", load_messages=False, store_context_messages=True)
    context = SessionContext(session_id=sid, input_messages=[Message("user", ["hello"])])
    context.extend_messages("rag", [Message("system", ["context"])])
    run(after(provider, respond(context, Message("assistant", ["hi"]))))
    stored = run(provider.get_messages(sid))
    assert texts(stored) == ["context", "hello", "hi"]
    # The context message keeps MAF's attribution, as MAF's own stores keep it.
    assert stored[0].additional_properties["_attribution"]["source_id"] == "rag"


def test_after_run_stores_context_from_specific_sources(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str
) -> None:
    provider = open_provider(
        source_id="audit", load_messages=False, store_context_messages=True,
        store_context_from={"rag"},
    )  # fmt: skip
    context = SessionContext(session_id=sid, input_messages=[])
    context.extend_messages("rag", [Message("system", ["rag-context"])])
    context.extend_messages("other", [Message("system", ["other-context"])])
    run(after(provider, respond(context)))
    assert texts(run(provider.get_messages(sid))) == ["rag-context"]


# -- from test_sessions.py::TestInMemoryHistoryProvider -------------------------------------


def test_empty_session_returns_no_messages(provider: ChatkeepHistoryProvider, sid: str) -> None:
    context = SessionContext(session_id=sid, input_messages=[])
    run(before(provider, context))
    assert context.context_messages.get(provider.source_id, []) == []


def test_stores_and_loads_messages(provider: ChatkeepHistoryProvider, sid: str) -> None:
    first = SessionContext(session_id=sid, input_messages=[Message("user", ["hello"])])
    run(before(provider, first))
    run(after(provider, respond(first, Message("assistant", ["hi there"]))))

    second = SessionContext(session_id=sid, input_messages=[Message("user", ["again"])])
    run(before(provider, second))
    assert texts(second.context_messages[provider.source_id]) == ["hello", "hi there"]


def test_source_id_attribution(open_provider: Callable[..., ChatkeepHistoryProvider]) -> None:
    provider = open_provider(source_id="custom-source")
    assert provider.source_id == "custom-source"
    context = SessionContext(session_id="s1", input_messages=[])
    context.extend_messages("custom-source", [Message("user", ["test"])])
    assert "custom-source" in context.context_messages


# -- from test_sessions.py::TestFileHistoryProvider -----------------------------------------


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_preserves_non_finite_json_values(
    provider: ChatkeepHistoryProvider, sid: str, value: float
) -> None:
    message = Message("user", ["hello"], additional_properties={"value": value})
    run(provider.save_messages(sid, [message]))
    restored = run(provider.get_messages(sid))[0].additional_properties["value"]
    if math.isnan(value):
        assert math.isnan(restored)
    else:
        assert restored == value


def test_unsafe_session_ids_stay_apart(provider: ChatkeepHistoryProvider) -> None:
    # MAF: test_uses_encoded_filename_for_unsafe_session_id. Each backend keeps ids apart
    # however it names them; a look-alike id never reads another's history.
    ids = ["../unsafe/session", "unsafe/session", "..%2Funsafe%2Fsession", "a:b", "a|b", "ä 🌍"]
    suffix = uuid.uuid4().hex[:8]
    for number, session in enumerate(ids):
        run(provider.save_messages(session + suffix, [Message("user", [f"m{number}"])]))
    for number, session in enumerate(ids):
        assert texts(run(provider.get_messages(session + suffix))) == [f"m{number}"]


def test_missing_session_returns_empty_messages(
    provider: ChatkeepHistoryProvider, sid: str
) -> None:
    assert run(provider.get_messages(sid)) == []


def test_none_session_id_uses_the_default_session(
    open_provider: Callable[..., ChatkeepHistoryProvider],
) -> None:
    provider = open_provider()
    run(provider.clear(None))  # a shared server may keep "default" from an earlier test
    run(provider.save_messages(None, [Message("user", ["hello"])]))
    assert texts(run(provider.get_messages(None))) == ["hello"]
    assert texts(run(provider.get_messages("default"))) == ["hello"]
    run(provider.clear(None))
    assert run(provider.get_messages(None)) == []


def test_a_damaged_record_raises_corrupt_record(
    provider: ChatkeepHistoryProvider, sid: str
) -> None:
    # MAF: test_invalid_jsonl_line_raises / test_non_mapping_jsonl_line_raises. chatkeep's
    # error names the session and the position, and what is before it still reads.
    run(provider.save_messages(sid, [Message("user", ["fine"])]))
    provider.store.append(sid, [Record(new_id(), b"{not-json}")])
    with pytest.raises(CorruptRecord) as caught:
        run(provider.get_messages(sid))
    assert caught.value.session_id == sid
    assert caught.value.position == 1
    other = f"{sid}-list"
    provider.store.append(other, [Record(new_id(), b"[1, 2, 3]")])
    with pytest.raises(CorruptRecord, match="object"):
        run(provider.get_messages(other))


def test_concurrent_saves_to_one_session_all_survive(
    provider: ChatkeepHistoryProvider, sid: str
) -> None:
    # MAF: test_concurrent_writes_for_same_session_are_locked (MAF's file store takes a
    # lock; a chatkeep append is atomic, so concurrent saves need none, across processes too).
    async def scenario() -> None:
        await asyncio.gather(
            *(provider.save_messages(sid, [Message("user", [f"m{n}"])]) for n in range(8))
        )

    run(scenario())
    assert sorted(texts(run(provider.get_messages(sid)))) == [f"m{n}" for n in range(8)]


# -- from agent-framework-redis tests/test_providers.py::TestRedisHistoryProvider* ----------


def test_returns_deserialized_messages(provider: ChatkeepHistoryProvider, sid: str) -> None:
    run(provider.save_messages(sid, [Message("user", ["Hello"]), Message("assistant", ["Hi!"])]))
    messages = run(provider.get_messages(sid))
    assert [(m.role, m.text) for m in messages] == [("user", "Hello"), ("assistant", "Hi!")]


def test_saves_in_one_append(provider: ChatkeepHistoryProvider, sid: str) -> None:
    run(provider.save_messages(sid, [Message("user", ["Hello"]), Message("assistant", ["Hi"])]))
    records = provider.store.read(sid)
    assert len(records) == 2
    assert [decode_message(r.data).message_id for r in records] == [r.id for r in records]


def test_empty_messages_noop(provider: ChatkeepHistoryProvider, sid: str) -> None:
    run(provider.save_messages(sid, []))
    assert provider.store.read(sid) == []


def test_clear_removes_the_session(provider: ChatkeepHistoryProvider, sid: str) -> None:
    run(provider.save_messages(sid, [Message("user", ["gone soon"])]))
    run(provider.save_messages(sid + "-other", [Message("user", ["stays"])]))
    run(provider.clear(sid))
    assert run(provider.get_messages(sid)) == []
    assert provider.store.read(sid) == []
    assert texts(run(provider.get_messages(sid + "-other"))) == ["stays"]


def test_providers_with_other_source_ids_share_the_session(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str
) -> None:
    # RedisHistoryProvider keys history by source_id too (test_keys_isolated_per_source_id);
    # here a MAF session is one chatkeep session, whichever provider object writes it, so
    # the CLI, forks and other processes see one conversation. (An audit copy goes to
    # another store or namespace.)
    audit, primary = open_provider(source_id="audit"), open_provider(source_id="primary")
    run(primary.save_messages(sid, [Message("user", ["once"])]))
    assert texts(run(audit.get_messages(sid))) == ["once"]


def test_before_and_after_run(provider: ChatkeepHistoryProvider, sid: str) -> None:
    run(provider.save_messages(sid, [Message("user", ["old msg"])]))
    context = SessionContext(input_messages=[Message("user", ["new msg"])], session_id=sid)
    run(before(provider, context))
    assert texts(context.context_messages["chatkeep"]) == ["old msg"]
    run(after(provider, respond(context, Message("assistant", ["reply"]))))
    assert texts(run(provider.get_messages(sid))) == ["old msg", "new msg", "reply"]


def test_after_run_skips_when_no_messages(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str
) -> None:
    provider = open_provider(store_inputs=False, store_outputs=False)
    context = SessionContext(input_messages=[Message("user", ["hi"])], session_id=sid)
    run(after(provider, respond(context, Message("assistant", ["hello"]))))
    assert provider.store.read(sid) == []


def test_max_messages_loads_the_tail_and_deletes_nothing(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str
) -> None:
    # RedisHistoryProvider(max_messages=10) trims the stored list (test_max_messages_
    # trimming); here max_messages is how much is loaded, and nothing is ever deleted.
    provider = open_provider(max_messages=3)
    run(provider.save_messages(sid, [Message("user", [f"m{n}"]) for n in range(15)]))
    assert texts(run(provider.get_messages(sid))) == ["m12", "m13", "m14"]
    assert len(provider.store.read(sid)) == 15


# == chatkeep's additions =====================================================================


def test_maf_private_dedup_function_is_the_one_used() -> None:
    # The provider imports MAF's filter_new_messages from a private module; if MAF moves
    # it, this fails before any user sees an ImportError.
    assert tail_module.filter_new_messages is agent_framework._sessions.filter_new_messages


def test_a_window_does_not_start_with_an_orphan_tool_result(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str
) -> None:
    provider = open_provider(max_messages=2)
    call = Content.from_function_call("c1", "weather", arguments={"city": "Oslo"})
    run(
        provider.save_messages(
            sid,
            [
                Message("user", ["weather?"]),
                Message("assistant", [call]),
                Message("tool", [Content.from_function_result("c1", result="-3 C")]),
                Message("assistant", ["It is -3 C."]),
            ],
        )
    )
    loaded = run(provider.get_messages(sid))
    assert [m.role for m in loaded] == ["assistant"]  # the tool result lost its call
    assert texts(loaded) == ["It is -3 C."]


def test_history_is_the_view_undo(provider: ChatkeepHistoryProvider, sid: str) -> None:
    run(provider.save_messages(sid, [Message("user", ["one"]), Message("assistant", ["1"])]))
    run(provider.save_messages(sid, [Message("user", ["two"]), Message("assistant", ["2"])]))
    run(aundo(provider.store, sid))
    assert texts(run(provider.get_messages(sid))) == ["one", "1"]


def test_history_is_the_view_fork(provider: ChatkeepHistoryProvider, sid: str) -> None:
    run(provider.save_messages(sid, [Message("user", ["one"]), Message("assistant", ["1"])]))
    first_reply = run(provider.get_messages(sid))[1].message_id
    assert first_reply is not None
    run(provider.save_messages(sid, [Message("user", ["two"])]))
    child = run(afork(provider.store, sid, at=first_reply))
    run(provider.save_messages(child, [Message("user", ["other two"])]))
    assert texts(run(provider.get_messages(child))) == ["one", "1", "other two"]
    assert texts(run(provider.get_messages(sid))) == ["one", "1", "two"]


def test_history_is_the_view_compaction(provider: ChatkeepHistoryProvider, sid: str) -> None:
    run(provider.save_messages(sid, [Message("user", [f"m{n}"]) for n in range(6)]))
    run(acompact(provider.store, sid, SlidingWindowReducer(2)))
    assert texts(run(provider.get_messages(sid))) == ["m4", "m5"]
    assert len([r for r in provider.store.read(sid)]) == 7  # the transcript is all there


def test_record_ids_are_chatkeeps_and_mafs_ids_come_back(
    provider: ChatkeepHistoryProvider, sid: str
) -> None:
    # A framework's ids are not unique (the Agents SDK's own test helper gives every
    # assistant message id "1"): both messages are stored, each comes back with its id.
    batch = [
        Message("assistant", ["a"], message_id="1"),
        Message("user", ["q"]),
        Message("assistant", ["b"], message_id="1"),
    ]
    run(provider.save_messages(sid, batch))
    records = provider.store.read(sid)
    assert len(records) == 3
    assert "1" not in {record.id for record in records}
    stored = [decode_message(record.data) for record in records]
    assert [m.message_id for m in stored] == [r.id for r in records]
    assert [m.extra.get(FRAMEWORK_MESSAGE_ID) for m in stored] == ["1", None, "1"]
    loaded = run(provider.get_messages(sid))
    assert texts(loaded) == ["a", "q", "b"]
    assert [m.message_id for m in loaded] == ["1", records[1].id, "1"]


SAVE_SEQUENCES = {
    "replayed transcript": [
        [Message("user", ["hi"]), Message("assistant", ["hello"], message_id="r1")],
        [Message("user", ["hi"]), Message("assistant", ["hello"], message_id="r1"),
         Message("user", ["more"]), Message("assistant", ["sure"], message_id="r2")],
    ],
    "replay without ids": [
        [Message("user", ["hi"]), Message("assistant", ["hello"])],
        [Message("user", ["hi"]), Message("assistant", ["hello"]), Message("user", ["next"])],
    ],
    "same batch twice": [
        [Message("user", ["a"]), Message("assistant", ["b"], message_id="x")],
        [Message("user", ["a"]), Message("assistant", ["b"], message_id="x")],
    ],
    "repeated user input without id": [
        [Message("user", ["again"])],
        [Message("user", ["again"])],
    ],
    "an id equal to the last stored one": [
        [Message("assistant", ["a"], message_id="1")],
        [Message("user", ["q"]), Message("assistant", ["b"], message_id="1")],
    ],
    "new turns": [
        [Message("user", ["1"]), Message("assistant", ["one"], message_id="m1")],
        [Message("user", ["2"]), Message("assistant", ["two"], message_id="m2")],
        [Message("user", ["3"])],
    ],
}  # fmt: skip


@pytest.mark.parametrize("sequence", list(SAVE_SEQUENCES), ids=str)
def test_saves_keep_what_mafs_own_provider_keeps(
    provider: ChatkeepHistoryProvider, sid: str, sequence: str
) -> None:
    # De-duplication is MAF's rule (filter_new_messages), so a sequence of saves leaves
    # the same history here as in MAF's InMemoryHistoryProvider, on every backend.
    from agent_framework import InMemoryHistoryProvider

    reference = InMemoryHistoryProvider()
    state: dict[str, Any] = {}
    for batch in SAVE_SEQUENCES[sequence]:
        run(reference.save_messages(sid, batch, state=state))
        run(provider.save_messages(sid, batch))
    expected = run(reference.get_messages(sid, state=state))
    loaded = run(provider.get_messages(sid))
    assert [(m.role, m.text) for m in loaded] == [(m.role, m.text) for m in expected]
    assert [m.message_id for m in loaded if m.message_id in {"r1", "r2", "x", "1", "m1", "m2"}] == [
        m.message_id for m in expected if m.message_id is not None
    ]


def test_messages_without_ids_get_stable_ones(provider: ChatkeepHistoryProvider, sid: str) -> None:
    message = Message("user", ["no id"])
    run(provider.save_messages(sid, [message]))
    assert message.message_id is None  # the caller's object is not changed
    first = run(provider.get_messages(sid))[0].message_id
    assert first is not None
    assert run(provider.get_messages(sid))[0].message_id == first


def test_a_replayed_transcript_costs_one_short_read(
    provider: ChatkeepHistoryProvider, sid: str
) -> None:
    # Replaying the whole transcript of a long session adds only the new tail, although
    # the save reads only as many messages as it was given.
    run(provider.save_messages(sid, [Message("user", [f"m{n}"]) for n in range(30)]))
    transcript = run(provider.get_messages(sid))
    run(provider.save_messages(sid, [*transcript, Message("user", ["new"])]))
    assert texts(run(provider.get_messages(sid))) == [f"m{n}" for n in range(30)] + ["new"]


def test_a_message_that_cannot_be_stored_stores_nothing(
    provider: ChatkeepHistoryProvider, sid: str
) -> None:
    # MAF's to_dict() drops what it cannot serialize, but passes a tool result's int dict
    # keys on (JSON would turn them into strings): a typed error, and nothing stored.
    good = Message("user", ["fine"])
    bad = Message("tool", [Content("function_result", call_id="c", result={1: "int key"})])
    with pytest.raises(EncodeError):
        run(provider.save_messages(sid, [good, bad]))
    assert provider.store.read(sid) == []


def test_an_invalid_session_id_is_refused(provider: ChatkeepHistoryProvider) -> None:
    with pytest.raises(InvalidSessionId):
        run(provider.save_messages("nul\x00here", [Message("user", ["x"])]))


def test_list_sessions(provider: ChatkeepHistoryProvider) -> None:
    prefix = "ls-" + uuid.uuid4().hex[:8] + "-"
    for name in ("b", "a", "c"):
        run(provider.save_messages(prefix + name, [Message("user", [name])]))
    assert sorted(run(provider.list_sessions(prefix))) == [prefix + n for n in "abc"]


def test_lifecycle_owned_and_borrowed_stores(store_url: str, sid: str) -> None:
    async def scenario() -> None:
        async with ChatkeepHistoryProvider(url=store_url) as owned:
            await owned.save_messages(sid, [Message("user", ["x"])])
            assert texts(await owned.get_messages(sid)) == ["x"]
        assert owned.store._closed  # the provider opened it, so it closed it

        borrowed_store = open_store(store_url)
        async with ChatkeepHistoryProvider(store=borrowed_store) as borrowed:
            await borrowed.get_messages(sid)
        assert not borrowed_store._closed  # borrowed: left open
        await borrowed_store.aclose()

    run(scenario())
    sync_owned = ChatkeepHistoryProvider(url=store_url)
    sync_owned.close()
    sync_owned.close()  # idempotent
    assert sync_owned.store._closed


@pytest.mark.parametrize(
    "options",
    [
        {"url": "sqlite:///x.db", "store": "not-a-store"},
        {"store": "sqlite:///x.db"},
        {"url": 5},
        {"source_id": ""},
        {"max_messages": 0},
        {"max_messages": -1},
        {"max_messages": 2.5},
        {"max_messages": True},
    ],
    ids=repr,
)
def test_bad_options_raise_invalid_option(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidOption):
        ChatkeepHistoryProvider(**options)


def test_no_password_in_repr(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    provider = ChatkeepHistoryProvider(store=store)
    assert "chatkeep" in repr(provider)
    store.close()
    memory = cast(Store, open_store("memory://"))
    shown = repr(ChatkeepHistoryProvider(store=memory))
    assert "ChatkeepHistoryProvider(source_id='chatkeep'" in shown


def test_messages_other_writers_stored_load_in_maf(
    provider: ChatkeepHistoryProvider, sid: str
) -> None:
    # Another chatkeep writer (the CLI, another adapter, a newer version) may store
    # top-level fields MAF's Message has no place for; MAF's own from_dict() would refuse
    # such a message, the provider hands MAF the message without them.
    from chatkeep.core import Message as ChatkeepMessage
    from chatkeep.core import TextContent, encode_records

    other = ChatkeepMessage(
        "user", [TextContent("from elsewhere", extra={"annotations": []})], message_id=new_id(),
        extra={"created_at": "2026-12-01T00:00:00Z", "item": {"id": "x"}},
    )  # fmt: skip
    provider.store.append(sid, encode_records([other]))
    (loaded,) = run(provider.get_messages(sid))
    assert loaded.text == "from elsewhere"
    assert loaded.message_id == other.message_id
    assert loaded.contents[0].annotations == []


# -- the remembered tail (tail.py): one read and one append per turn -------------------------


@pytest.fixture
def store_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of the store's async reads and appends from now on (all stores)."""
    counts = {"aread": 0, "aappend": 0}
    for name in counts:
        original = getattr(Store, name)

        def counting(self: Store, *args: Any, _name: str = name, _original: Any = original) -> Any:
            counts[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(Store, name, counting)
    return counts


def test_a_turn_is_one_read_and_one_append(
    provider: ChatkeepHistoryProvider, sid: str, store_calls: dict[str, int]
) -> None:
    run(provider.save_messages(sid, [Message("user", [f"m{n}"]) for n in range(5)]))
    for number in range(3):
        store_calls.update(aread=0, aappend=0)
        context = SessionContext(session_id=sid, input_messages=[Message("user", [f"q{number}"])])
        run(before(provider, context))
        run(after(provider, respond(context, Message("assistant", [f"a{number}"]))))
        assert store_calls == {"aread": 1, "aappend": 1}
    assert texts(run(provider.get_messages(sid)))[-6:] == ["q0", "a0", "q1", "a1", "q2", "a2"]


def test_a_save_without_a_load_reads_the_tail_once(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str, store_calls: dict[str, int]
) -> None:
    writer = open_provider(load_messages=False)
    run(writer.save_messages(sid, [Message("user", ["a"])]))
    assert store_calls == {"aread": 1, "aappend": 1}
    run(writer.save_messages(sid, [Message("assistant", ["b"])]))  # remembered from the last
    assert store_calls == {"aread": 1, "aappend": 2}


def test_what_another_writer_appended_meanwhile_is_kept(
    open_provider: Callable[..., ChatkeepHistoryProvider], sid: str
) -> None:
    # The tail this provider remembers is older than the store's: nothing is lost, and
    # its own save is stored in full.
    mine, other = open_provider(), open_provider()
    run(mine.save_messages(sid, [Message("user", ["one"]), Message("assistant", ["1"])]))
    run(mine.get_messages(sid))
    run(other.save_messages(sid, [Message("user", ["from elsewhere"])]))
    run(mine.save_messages(sid, [Message("user", ["two"]), Message("assistant", ["2"])]))
    assert texts(run(mine.get_messages(sid))) == ["one", "1", "from elsewhere", "two", "2"]


def test_clear_forgets_the_remembered_tail(provider: ChatkeepHistoryProvider, sid: str) -> None:
    run(provider.save_messages(sid, [Message("user", ["hi"], message_id="x")]))
    run(provider.clear(sid))
    run(provider.save_messages(sid, [Message("user", ["hi"], message_id="x")]))
    assert texts(run(provider.get_messages(sid))) == ["hi"]  # not taken for a replay


def test_the_tail_memory_is_bounded_and_versioned() -> None:
    from chatkeep.agent_framework.tail import KnownTail, TailMemory

    memory = TailMemory(sessions=3)
    tail = KnownTail.of([(Message("user", ["x"]), None)], whole=True)
    for name in "abcd":
        memory.put(name, tail)
    assert memory.get("a") == (None, -1)  # the least recently used went first
    known, version = memory.get("d")
    assert known == tail
    memory.put("d", tail)  # another save in between
    memory.put("d", tail, version=version)  # a save that read the older version
    assert memory.get("d") == (None, -1)  # forgets rather than remembers a partial tail


def test_saved_messages_carry_their_storage_time_and_read_back_unchanged(
    provider: ChatkeepHistoryProvider, sid: str
) -> None:
    from datetime import datetime, timezone

    from chatkeep.core.metadata import STORED_AT_KEY, describe_session

    sent = [
        Message("user", ["hello"], message_id="maf-6", additional_properties={"mine": [1, "two"]}),
        Message("assistant", ["hi"], message_id="maf-7"),
    ]
    before_save = datetime.now(timezone.utc)
    run(provider.save_messages(sid, sent))
    after_save = datetime.now(timezone.utc)
    records = provider.store.read(sid)
    assert len(records) == 2
    assert all(f'"{STORED_AT_KEY}"'.encode() in record.data for record in records)
    info = describe_session(provider.store, sid)
    assert info.created_at is not None and info.updated_at is not None
    assert before_save <= info.created_at <= info.updated_at <= after_save
    assert info.messages == 2 and info.title == "hello"
    back = run(provider.get_messages(sid))
    assert [m.to_dict() for m in back] == [m.to_dict() for m in sent]
    fresh = ChatkeepHistoryProvider(store=provider.store)  # no tail cached: from the store
    assert [m.to_dict() for m in run(fresh.get_messages(sid))] == [m.to_dict() for m in sent]
