"""The view builder's batch feed (``ViewBuilder.feed_many``, what every walk uses) gives
exactly what feeding the records one by one gives: the same messages, the same stored ids,
the same running count, on random logs of turns, tool calls, undos, compactions and
HistoryProvider saves (stamps and running counts in the records)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from chatkeep.core import (
    AgentSession,
    FunctionCallContent,
    FunctionResultContent,
    HistoryProvider,
    Message,
    TextContent,
    encode_records,
    new_id,
    open_store,
)
from chatkeep.core.views import ViewBuilder, build_view, compact, fork, read_view, undo
from chatkeep.core.views._ops import view_program
from chatkeep.core.views._program import Program, run
from chatkeep.core.views._walk import walk_chain
from chatkeep.testing import example_count


def keep_last(count: int):  # type: ignore[no-untyped-def]
    def reduce(messages: list[Message]) -> list[Message]:
        return messages[-count:] if count else []

    return reduce


class OneByOne:
    """A view builder seen through the plain sink protocol (no ``feed_many``): the walk
    feeds it one record at a time, as before the batch feed existed."""

    def __init__(self, builder: ViewBuilder) -> None:
        self.builder = builder

    @property
    def done(self) -> bool:
        return self.builder.done

    @property
    def skipping(self) -> bool:
        return self.builder.skipping

    def wanted(self) -> int:
        return self.builder.wanted()

    def feed(self, record_id: str, data: bytes, session_id: str, position: int) -> None:
        self.builder.feed(record_id, data, session_id, position)


def one_by_one(
    session: str, limit: int | None
) -> Program[tuple[list[Message], frozenset[str], int | None, frozenset[str]]]:
    builder = ViewBuilder(limit, track_stored=True)
    yield from walk_chain(OneByOne(builder), session)  # type: ignore[arg-type]
    messages = builder.finish()
    count = builder.verified_count() if builder.truncated else len(messages)
    return (
        messages,
        frozenset(builder.stored_ids or ()),
        count,
        frozenset(builder.uncompacted_ids or ()),
    )


steps = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), st.integers(0, 3)),
        st.tuples(st.just("tool"), st.integers(0, 3)),
        st.tuples(st.just("provider"), st.integers(1, 6)),
        st.tuples(st.just("undo"), st.integers(1, 2)),
        st.tuples(st.just("compact"), st.integers(0, 3)),
        st.tuples(st.just("odd"), st.integers(0, 3)),
    ),
    max_size=14,
)


@settings(max_examples=example_count(120), deadline=None)
@given(steps)
def test_batch_feed_matches_feeding_one_by_one(plan: list[tuple[str, int]]) -> None:
    store = open_store("memory://")
    session = AgentSession("s")
    for number, (step, size) in enumerate(plan):
        if step == "turn":
            store.append(
                "s",
                encode_records(
                    [Message.user(f"u{number}.{i}", message_id=new_id()) for i in range(size)]
                    + [Message.assistant(f"a{number}", message_id=new_id())]
                ),
            )
        elif step == "tool":
            call = FunctionCallContent(f"c{number}", "f", '{"x":1}')
            result = FunctionResultContent(f"c{number}", [number] * size)
            store.append(
                "s",
                encode_records(
                    [
                        Message("assistant", [call], message_id=new_id()),
                        Message("tool", [result], message_id=new_id()),
                    ]
                ),
            )
        elif step == "provider":
            provider = HistoryProvider(store, max_messages=size)

            async def exchange(number: int = number, provider: HistoryProvider = provider) -> None:
                request = [Message.user(f"p{number}")]
                await provider.invoking(session, request)
                await provider.invoked(session, request, [Message.assistant("ok")])

            asyncio.run(exchange())
        elif step == "undo":
            undo(store, "s", size)
        elif step == "compact":
            compact(store, "s", keep_last(size))
        else:  # a shape the typed decoder refuses: extra fields, other contents
            odd = Message(
                "user",
                [TextContent("odd", extra={"annotations": [size]})],
                message_id=new_id(),
                extra={"status": "done"},
            )
            store.append("s", encode_records([odd]))
    records = store.read("s")
    for limit in (None, 0, 1, 2, 3, 7, 50):
        read = run(store, view_program("s", limit, track_stored=True))
        messages, stored, count, uncompacted = run(store, one_by_one("s", limit))
        assert read.messages == messages
        assert build_view("s", records, limit=limit) == messages
        assert read.stored_ids == stored
        assert read.count == count
        assert read.uncompacted_ids == uncompacted
        assert read_view(store, "s", limit=limit) == messages


def test_batch_feed_follows_a_fork_into_its_parent() -> None:
    store = open_store("memory://")
    prefix = [Message.user(f"m{i}", message_id=new_id()) for i in range(40)]
    store.append("p", encode_records(prefix))
    child = fork(store, "p")
    store.append("p", encode_records([Message.user("parent only", message_id=new_id())]))
    store.append(child, encode_records([Message.user("child", message_id=new_id())]))
    view = read_view(store, child)
    for limit in (None, 1, 3, 41, 45):
        assert run(store, one_by_one(child, limit))[0] == read_view(store, child, limit=limit)
    assert [m.text for m in view] == [f"m{i}" for i in range(40)] + ["child"]
    assert [m.text for m in read_view(store, child, limit=3)] == ["m38", "m39", "child"]
