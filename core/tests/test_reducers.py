"""Reducers, and the history provider's two reducer triggers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from chatkeep.core import (
    Agent,
    AgentSession,
    CharacterTokenizer,
    ChatResponse,
    FunctionCallContent,
    FunctionResultContent,
    HistoryProvider,
    InMemoryHistoryProvider,
    Message,
    OfflineChatClient,
    Pipeline,
    ReducerTrigger,
    SlidingWindowReducer,
    Store,
    SummarizationReducer,
    TextContent,
    TokenBudgetReducer,
    ToolCallCollapseReducer,
    TruncationReducer,
    new_id,
    read_messages,
    read_view,
)
from chatkeep.core.reducers import (
    SUMMARY_KEY,
    drop_orphan_results,
    group_messages,
    max_window,
    message_tokens,
)

MakeStore = Callable[..., tuple[Store, Any]]


def user(text: str) -> Message:
    return Message.user(text, message_id=new_id())


def assistant(text: str) -> Message:
    return Message.assistant(text, message_id=new_id())


def tool_exchange(call_id: str, name: str = "lookup", result: Any = "ok") -> list[Message]:
    return [
        Message(
            "assistant", [FunctionCallContent(call_id, name, {"q": call_id})], message_id=new_id()
        ),
        Message("tool", [FunctionResultContent(call_id, result)], message_id=new_id()),
    ]


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def conversation(turns: int) -> list[Message]:
    out = [Message.system("be brief", message_id=new_id())]
    for i in range(turns):
        out += [user(f"q{i}"), assistant(f"a{i}")]
    return out


def assert_pairs_intact(messages: list[Message]) -> None:
    calls = {c.call_id for m in messages for c in m.contents if isinstance(c, FunctionCallContent)}
    results = {
        c.call_id for m in messages for c in m.contents if isinstance(c, FunctionResultContent)
    }
    assert calls == results, (calls, results)


# -- groups ----------------------------------------------------------------------------------


def test_groups_keep_a_call_with_its_results() -> None:
    messages = [user("q"), *tool_exchange("c1"), assistant("a"), Message.system("s")]
    assert group_messages(messages) == [[0], [1, 2], [3]]
    parallel = [
        Message(
            "assistant",
            [FunctionCallContent("x", "f"), FunctionCallContent("y", "f")],
            message_id=new_id(),
        ),
        Message("tool", [FunctionResultContent("x", 1)], message_id=new_id()),
        Message("tool", [FunctionResultContent("y", 2)], message_id=new_id()),
        user("next"),
    ]
    assert group_messages(parallel) == [[0, 1, 2], [3]]


def test_orphan_results_are_dropped() -> None:
    exchange = tool_exchange("c1")
    question = user("q")
    assert drop_orphan_results([exchange[1], question]) == [question]
    assert drop_orphan_results(exchange) == exchange
    mixed = Message(
        "tool",
        [FunctionResultContent("gone", 1), FunctionResultContent("c1", 2)],
        message_id=new_id(),
    )
    (kept,) = drop_orphan_results([exchange[0], mixed])[1:]
    assert [c.call_id for c in kept.contents if isinstance(c, FunctionResultContent)] == ["c1"]


# -- the reducers ------------------------------------------------------------------------------


def test_sliding_window_keeps_system_messages_and_the_newest() -> None:
    history = conversation(10)
    reduced = SlidingWindowReducer(4)(history)
    assert texts(reduced) == ["be brief", "q8", "a8", "q9", "a9"]
    assert SlidingWindowReducer(4).max_window == 4


def test_window_never_splits_a_tool_exchange() -> None:
    history = [user("q0"), *tool_exchange("c1"), assistant("a0"), user("q1")]
    for window in range(1, 6):
        reduced = SlidingWindowReducer(window)(history)
        assert_pairs_intact(reduced)
        assert reduced[-1].text == "q1"
    # A window too small for the exchange stops before it rather than split it.
    assert texts(SlidingWindowReducer(3)(history)) == ["a0", "q1"]
    assert len(SlidingWindowReducer(4)(history)) == 4


def test_newest_group_is_kept_even_when_it_alone_is_over_the_limit() -> None:
    history = [user("q"), *tool_exchange("c1")]
    assert SlidingWindowReducer(1)(history) == history[1:]


def test_truncation_with_a_threshold_waits_then_cuts() -> None:
    reducer = TruncationReducer(4, threshold=3)
    assert reducer.max_window == 7
    short = conversation(3)  # 6 non-system messages: within 4 + 3
    assert reducer(short) == short
    long = conversation(4)  # 8: over, cut to 4
    assert texts(reducer(long)) == ["be brief", "q2", "a2", "q3", "a3"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3"])
def test_reducer_arguments_are_checked(bad: object) -> None:
    with pytest.raises(ValueError):
        SlidingWindowReducer(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TokenBudgetReducer(bad)  # type: ignore[arg-type]


def test_token_budget_counts_with_the_tokenizer() -> None:
    tokenizer = CharacterTokenizer(chars_per_token=1)
    history = [
        Message.system("sys", message_id=new_id()),
        user("a" * 10),
        user("b" * 10),
        user("c" * 10),
    ]
    # system: 3 + 4 overhead = 7; each user: 14. Budget 40: system + two users.
    reduced = TokenBudgetReducer(40, tokenizer)(history)
    assert texts(reduced) == ["sys", "b" * 10, "c" * 10]
    assert message_tokens(history[1], tokenizer) == 14
    assert TokenBudgetReducer(40, tokenizer).max_window == 10

    class Words:
        def count_tokens(self, text: str) -> int:
            return len(text.split())

    assert TokenBudgetReducer(100, Words())(history) == history


def test_character_tokenizer_default_needs_nothing() -> None:
    assert CharacterTokenizer().count_tokens("") == 0
    assert CharacterTokenizer().count_tokens("abcd") == 1
    assert CharacterTokenizer().count_tokens("abcde") == 2


def test_tool_call_collapse_turns_old_exchanges_into_notes() -> None:
    history = [
        user("q"),
        *tool_exchange("c1", "weather", {"temp": 21}),
        *tool_exchange("c2", "clock", "noon"),
        assistant("done"),
    ]
    reduced = ToolCallCollapseReducer(keep_last=1)(history)
    assert len(reduced) == 5
    note = reduced[1]
    assert note.role == "assistant" and note.message_id == history[1].message_id
    assert note.text.startswith("[tool weather(") and '"temp": 21' in note.text
    assert_pairs_intact(reduced)
    assert reduced[2:] == history[3:]
    everything = ToolCallCollapseReducer(keep_last=0)(history)
    assert [m.role for m in everything] == ["user", "assistant", "assistant", "assistant"]
    assert ToolCallCollapseReducer(keep_last=5)(history) == history


def test_summarization_through_a_chat_client() -> None:
    client = OfflineChatClient(script=[Message.assistant("they talked about q0..q7")])
    reducer = SummarizationReducer(client, keep_last=4, threshold=2)
    history = conversation(10)
    reduced = asyncio.run(reducer(history))
    assert texts(reduced)[0] == "be brief"
    assert reduced[1].additional_properties[SUMMARY_KEY] is True
    assert "they talked about q0..q7" in reduced[1].text
    assert texts(reduced)[2:] == ["q8", "a8", "q9", "a9"]
    prompt = client.requests[0]
    assert "q0" in prompt[-1].text and "q9" not in prompt[-1].text
    # Short histories are left alone (no model call).
    short = conversation(3)
    assert asyncio.run(reducer(short)) == short
    assert len(client.requests) == 1


def test_pipeline_applies_in_order_and_takes_the_first_window() -> None:
    pipeline = Pipeline(SlidingWindowReducer(6), ToolCallCollapseReducer(keep_last=0))
    history = [user("old"), *tool_exchange("c1"), user("q"), *tool_exchange("c2"), assistant("a")]
    reduced = asyncio.run(pipeline(history))
    assert [m.role for m in reduced] == ["assistant", "user", "assistant", "assistant"]
    assert pipeline.max_window == 6
    assert max_window(Pipeline(ToolCallCollapseReducer())) is None
    with pytest.raises(ValueError):
        Pipeline()


# -- the provider's triggers -------------------------------------------------------------------


def run_turns(agent: Agent, session: AgentSession, count: int) -> None:
    for i in range(count):
        agent.run_sync(f"turn {i}", session)


def test_before_retrieval_window_reads_only_what_it_needs(counting_store: MakeStore) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(store, reducer=SlidingWindowReducer(6))
    agent = Agent(OfflineChatClient(), history_provider=provider)
    session = agent.create_session()
    run_turns(agent, session, 20)
    backend.reads.clear()
    response = agent.run_sync("now", session)
    assert response.text.startswith("[seen 7]")
    assert sum(count for *_, count in backend.reads) == 6
    assert len(read_messages(store, session.session_id)) == 42  # nothing is ever dropped


def test_after_message_added_saves_checkpoints_in_the_same_append(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()
    provider = HistoryProvider(
        store,
        reducer=TruncationReducer(6, threshold=4),
        reducer_trigger=ReducerTrigger.AFTER_MESSAGE_ADDED,
    )
    client = OfflineChatClient()
    agent = Agent(client, history_provider=provider)
    session = agent.create_session()
    run_turns(agent, session, 12)
    assert len(backend.appends) == 12  # one append per turn, checkpoints included
    sizes = [len(batch) for _, batch in backend.appends]
    assert 3 in sizes  # some turns carried a checkpoint
    view = read_view(store, session.session_id)
    assert len(view) <= 10
    assert texts(view)[-1].startswith("[seen")
    # The model never saw more than the threshold allows; the transcript is whole.
    assert max(len(request) for request in client.requests) <= 11
    assert len(read_messages(store, session.session_id)) == 24


def test_after_message_added_summarization_loads_in_proportion_to_the_view(
    counting_store: MakeStore,
) -> None:
    store, backend = counting_store()

    class Summarizer:
        def __init__(self) -> None:
            self.requests: list[list[Message]] = []

        async def get_response(
            self, messages: list[Message], *, conversation_id: str | None = None
        ) -> ChatResponse:
            self.requests.append(messages)
            return ChatResponse([Message.assistant(f"summary #{len(self.requests)}")])

    summarizer = Summarizer()
    provider = HistoryProvider(
        store,
        reducer=SummarizationReducer(summarizer, keep_last=4, threshold=6),
        reducer_trigger="after_message_added",
    )
    agent = Agent(OfflineChatClient(), history_provider=provider)
    session = agent.create_session()
    run_turns(agent, session, 40)
    backend.reads.clear()
    view = asyncio.run(provider.load(session))
    assert view[0].additional_properties.get(SUMMARY_KEY)
    assert len(view) <= 11
    assert sum(count for *_, count in backend.reads) <= 2 * 16
    assert len(summarizer.requests) >= 3


def test_a_failing_after_reducer_still_stores_the_turn(counting_store: MakeStore) -> None:
    store, _ = counting_store()

    def broken(messages: list[Message]) -> list[Message]:
        raise RuntimeError("reducer bug")

    provider = HistoryProvider(store, reducer=broken, reducer_trigger="after_message_added")
    agent = Agent(OfflineChatClient(), history_provider=provider)
    session = agent.create_session()
    with pytest.warns(RuntimeWarning, match="reducer bug"):
        agent.run_sync("hi", session)
    assert len(read_messages(store, session.session_id)) == 2


def test_in_memory_provider_applies_checkpoints_too() -> None:
    provider = InMemoryHistoryProvider(
        reducer=SlidingWindowReducer(4), reducer_trigger="after_message_added"
    )
    agent = Agent(OfflineChatClient(), history_provider=provider)
    session = agent.create_session()
    run_turns(agent, session, 6)
    view = asyncio.run(provider.load(session))
    assert len(view) == 4
    restored = agent.deserialize_session(agent.serialize_session(session))
    assert asyncio.run(provider.load(restored)) == view


def test_provider_load_limit_is_the_smaller_of_max_messages_and_the_window() -> None:
    assert HistoryProvider("memory://", reducer=SlidingWindowReducer(50)).load_limit == 50
    assert (
        HistoryProvider("memory://", max_messages=10, reducer=SlidingWindowReducer(50)).load_limit
        == 10
    )
    assert HistoryProvider("memory://", reducer=ToolCallCollapseReducer()).load_limit is None
    assert HistoryProvider("memory://").load_limit is None


def test_windowed_load_drops_a_result_cut_from_its_call(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    session = AgentSession()
    from chatkeep.core import encode_records

    store.append(
        session.session_id, encode_records([user("q"), *tool_exchange("c1"), assistant("a")])
    )
    provider = HistoryProvider(store, max_messages=2)
    loaded = asyncio.run(provider.load(session))
    assert texts(loaded) == ["a"]
    assert isinstance(loaded[0].contents[0], TextContent)


def test_no_checkpoint_when_the_view_was_not_loaded(counting_store: MakeStore) -> None:
    store, _ = counting_store()
    session = AgentSession()
    for i in range(3):
        agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(store))
        agent.run_sync(f"q{i}", session)
    blind = HistoryProvider(
        store,
        load_messages=False,
        reducer=lambda messages: messages[-1:],
        reducer_trigger="after_message_added",
    )
    Agent(OfflineChatClient(), history_provider=blind).run_sync("blind", session)
    # The reducer saw only the new turn, so it must not have replaced the history.
    assert len(read_view(store, session.session_id)) == 8
