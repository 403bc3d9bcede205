"""Log views and the agent lifecycle over the store under test.

Forks, undo and compaction checkpoints are built by the core on the two storage hooks, so
they must work unchanged on every backend; these tests prove it on the one under test.
The lifecycle tests run an :class:`~chatkeep.core.Agent` with the offline client against
the store: no duplicates across many turns, nothing stored for a failed model call, tool
calls and results round-trip.

:class:`ViewsAndLifecycleTests` gathers the mixins. Only :class:`ForkDeletionTests` needs a
capability (``delete``); it also skips by itself when the store lacks it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from chatkeep.core import (
    Agent,
    AgentSession,
    ChatResponseUpdate,
    CorruptRecord,
    EditOutOfRange,
    FunctionCallContent,
    FunctionResultContent,
    HistoryProvider,
    Message,
    OfflineChatClient,
    Record,
    SlidingWindowReducer,
    Store,
    compact,
    delete_session,
    encode_records,
    fork,
    list_forks,
    new_id,
    read_messages,
    read_view,
    undo,
)
from chatkeep.core.views import (
    TEMP_PREFIX,
    edit_delete,
    edit_insert,
    edit_replace,
    edit_set,
    edit_splice,
    read_log,
)

from ..checks import new_session_id
from ._base import NOT_DECLARED, ConformanceBase

__all__ = [
    "CheckpointTests",
    "CorruptRecordTests",
    "EditTests",
    "ForkDeletionTests",
    "ForkTests",
    "LifecycleTests",
    "UndoTests",
    "ViewsAndLifecycleTests",
]

_LONG = 2000  # messages in the "long session" window checks (kept modest for remote stores)
_WINDOW = 50


def _turn(store: Store, session: str, text: str) -> list[Message]:
    messages = [
        Message.user(text, message_id=new_id()),
        Message.assistant("re: " + text, message_id=new_id()),
    ]
    store.append(session, encode_records(messages))
    return messages


def _texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


class _Counting:
    """Wraps a :class:`Store` and counts the records its reads return, so the cost of a
    view is measured in records, whatever the backend."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.records = 0
        self.capabilities = store.capabilities

    def append(self, session_id: str, records: list[Record]) -> None:
        self.store.append(session_id, records)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        self.store.append_if(session_id, records, after=after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        result = self.store.read(session_id, start, stop)
        self.records += len(result)
        return result


def _long_session(store: Store) -> str:
    session = new_session_id("long")
    messages: list[Message] = []
    for i in range(_LONG // 2):
        messages += [
            Message.user(f"q{i}", message_id=new_id()),
            Message.assistant(f"a{i}", message_id=new_id()),
        ]
    for start in range(0, len(messages), 100):
        store.append(session, encode_records(messages[start : start + 100]))
    return session


def _window_cost(store: Store, session: str) -> tuple[list[Message], int]:
    counting = _Counting(store)
    with Store(counting, name="counting") as counted:
        provider = HistoryProvider(counted, reducer=SlidingWindowReducer(_WINDOW))
        loaded = asyncio.run(provider.load(AgentSession(session)))
    return loaded, counting.records


class ForkTests(ConformanceBase):
    """``fork``: a new session continuing from another, without copying its records."""

    def test_fork_continues_from_the_end(self, chatkeep_store: Store) -> None:
        parent = new_session_id("parent")
        for i in range(3):
            _turn(chatkeep_store, parent, f"p{i}")
        child = fork(chatkeep_store, parent)
        _turn(chatkeep_store, child, "child")
        _turn(chatkeep_store, parent, "parent again")
        assert _texts(read_view(chatkeep_store, child)) == [
            "p0", "re: p0", "p1", "re: p1", "p2", "re: p2", "child", "re: child",
        ]  # fmt: skip
        assert _texts(read_view(chatkeep_store, parent))[-2:] == [
            "parent again",
            "re: parent again",
        ]
        assert len(chatkeep_store.read(child)) == 3, "a fork holds one link record, no copies"

    def test_fork_at_a_message_and_forks_of_forks(self, chatkeep_store: Store) -> None:
        parent = new_session_id("parent")
        turns = [_turn(chatkeep_store, parent, f"p{i}") for i in range(4)]
        child = fork(chatkeep_store, parent, at=turns[1][1].message_id)
        _turn(chatkeep_store, child, "c")
        grandchild = fork(chatkeep_store, child)
        _turn(chatkeep_store, grandchild, "g")
        expected = ["p0", "re: p0", "p1", "re: p1", "c", "re: c", "g", "re: g"]
        assert _texts(read_view(chatkeep_store, grandchild)) == expected
        for limit in (1, 3, 5, 8, 20):
            assert _texts(read_view(chatkeep_store, grandchild, limit=limit)) == expected[-limit:]
        assert sorted(list_forks(chatkeep_store, parent)) == [child]

    def test_window_over_a_fork_reads_about_the_window(self, chatkeep_store: Store) -> None:
        parent = _long_session(chatkeep_store)
        child = fork(chatkeep_store, parent)
        _turn(chatkeep_store, child, "in the fork")
        loaded, cost = _window_cost(chatkeep_store, child)
        assert len(loaded) == _WINDOW and loaded[-1].text == "re: in the fork"
        assert cost <= 2 * _WINDOW, f"read {cost} records for a window of {_WINDOW}"


class UndoTests(ConformanceBase):
    """``undo``: retract the last turns by appending one record; the log keeps them."""

    def test_undo_retracts_and_keeps_the_audit_trail(self, chatkeep_store: Store) -> None:
        session = new_session_id("undo")
        for i in range(3):
            _turn(chatkeep_store, session, f"q{i}")
        assert _texts(undo(chatkeep_store, session)) == ["q2", "re: q2"]
        assert _texts(read_view(chatkeep_store, session)) == ["q0", "re: q0", "q1", "re: q1"]
        assert len(read_messages(chatkeep_store, session)) == 6, "the audit trail is kept"
        _turn(chatkeep_store, session, "retry")
        assert _texts(read_view(chatkeep_store, session))[-2:] == ["retry", "re: retry"]
        assert _texts(undo(chatkeep_store, session, turns=2)) == [
            "q1",
            "re: q1",
            "retry",
            "re: retry",
        ]
        assert _texts(read_view(chatkeep_store, session)) == ["q0", "re: q0"]

    def test_undo_in_a_fork_leaves_the_parent_alone(self, chatkeep_store: Store) -> None:
        parent = new_session_id("parent")
        for i in range(2):
            _turn(chatkeep_store, parent, f"p{i}")
        child = fork(chatkeep_store, parent)
        undo(chatkeep_store, child, turns=2)
        assert read_view(chatkeep_store, child) == []
        assert len(read_view(chatkeep_store, parent)) == 4

    def test_window_after_undo_reads_about_the_window(self, chatkeep_store: Store) -> None:
        session = _long_session(chatkeep_store)
        undo(chatkeep_store, session, turns=2)
        loaded, cost = _window_cost(chatkeep_store, session)
        assert len(loaded) == _WINDOW and loaded[-1].text == f"a{_LONG // 2 - 3}"
        assert cost <= 2 * _WINDOW, f"read {cost} records for a window of {_WINDOW}"


class CheckpointTests(ConformanceBase):
    """Compaction checkpoints: a reducer's result saved in the log; loads cost the view."""

    def test_checkpoint_replaces_the_view_not_the_transcript(self, chatkeep_store: Store) -> None:
        session = _long_session(chatkeep_store)
        summary = Message.system("summary", message_id=new_id())
        assert compact(chatkeep_store, session, lambda view: [summary, *view[-4:]]) is not None
        _turn(chatkeep_store, session, "after")
        counting = _Counting(chatkeep_store)
        with Store(counting, name="counting") as counted:
            view = read_view(counted, session)
        last = _LONG // 2 - 1
        expected = ["summary", f"q{last - 1}", f"a{last - 1}", f"q{last}", f"a{last}"]
        assert _texts(view) == [*expected, "after", "re: after"]
        assert counting.records <= 64, f"read {counting.records} records for a 7-message view"
        assert len(read_messages(chatkeep_store, session)) == _LONG + 2

    def test_window_of_a_long_session_reads_about_the_window(self, chatkeep_store: Store) -> None:
        session = _long_session(chatkeep_store)
        loaded, cost = _window_cost(chatkeep_store, session)
        assert [m.text for m in loaded[-2:]] == [f"q{_LONG // 2 - 1}", f"a{_LONG // 2 - 1}"]
        assert cost <= 2 * _WINDOW, f"read {cost} records for a window of {_WINDOW}"


class EditTests(ConformanceBase):
    """In-place edits (``chatkeep.core.views.edit_*``): Python's list semantics over the
    store, one record appended per edit, the log keeping what was replaced (concurrent
    edits are in :class:`~chatkeep.testing.mixins.ConditionalAppendTests`)."""

    def test_edits_follow_list_semantics(self, chatkeep_store: Store) -> None:
        session = new_session_id("edit")
        model = [f"m{i}" for i in range(6)]
        chatkeep_store.append(
            session, encode_records([Message.user(t, message_id=new_id()) for t in model])
        )
        steps: list[tuple[str, int, int]] = [
            ("insert", 2, 0), ("delete", 0, 0), ("replace", -1, 0), ("delete", -2, 0),
            ("splice", 1, 3), ("insert", 99, 0), ("replace", 0, 0), ("splice", -2, 99),
            ("delete", -1, 0), ("insert", -1, 0),
        ]  # fmt: skip
        for step, (action, index, stop) in enumerate(steps):
            text = f"e{step}"
            if action == "insert":
                edit_insert(chatkeep_store, session, index, Message.user(text))
                model.insert(index, text)
            elif action == "delete":
                assert edit_delete(chatkeep_store, session, index).text == model.pop(index)
            elif action == "replace":
                old = edit_replace(chatkeep_store, session, index, Message.user(text))
                assert old.text == model[index]
                model[index] = text
            else:
                removed = edit_splice(chatkeep_store, session, index, stop, [Message.user(text)])
                assert _texts(removed) == model[index:stop]
                model[index:stop] = [text]
            assert _texts(read_view(chatkeep_store, session)) == model, (step, action)
            assert _texts(read_view(chatkeep_store, session, limit=2)) == model[-2:], step
        with pytest.raises(EditOutOfRange):
            edit_delete(chatkeep_store, session, len(model))
        assert len(chatkeep_store.read(session)) == 6 + len(steps), "one record an edit"
        kept = [e.message.text for e in read_log(chatkeep_store, session) if e.message]
        assert kept[:6] == [f"m{i}" for i in range(6)], "the log keeps what was replaced"

    def test_set_messages_writes_only_what_differs(self, chatkeep_store: Store) -> None:
        session = new_session_id("edit")
        _turn(chatkeep_store, session, "q0")
        view = read_view(chatkeep_store, session)
        edit_set(chatkeep_store, session, [*view, Message.user("more")])
        assert read_log(chatkeep_store, session)[-1].kind == "message", "an extension appends"
        before = edit_set(chatkeep_store, session, [Message.system("fresh start")])
        assert _texts(before) == ["q0", "re: q0", "more"]
        assert _texts(read_view(chatkeep_store, session)) == ["fresh start"]
        assert len(read_messages(chatkeep_store, session)) == 3, "the transcript is kept"

    def test_window_after_edits_reads_about_the_window(self, chatkeep_store: Store) -> None:
        session = _long_session(chatkeep_store)
        edit_delete(chatkeep_store, session, 3)
        edit_replace(chatkeep_store, session, -1, Message.assistant("redacted"))
        edit_insert(chatkeep_store, session, _LONG // 2, Message.user("inserted"))
        loaded, cost = _window_cost(chatkeep_store, session)
        assert len(loaded) == _WINDOW and loaded[-1].text == "redacted"
        assert cost <= 2 * _WINDOW, f"read {cost} records for a window of {_WINDOW}"


class ForkDeletionTests(ConformanceBase):
    """Deleting a session with live forks, both ways (needs ``delete``)."""

    @pytest.fixture(autouse=True)
    def _needs_delete(self, chatkeep_store: Store) -> None:
        if not chatkeep_store.supports("delete"):
            pytest.skip(NOT_DECLARED + "delete")

    def _family(self, store: Store) -> tuple[str, str, str]:
        parent = new_session_id("parent")
        for i in range(3):
            _turn(store, parent, f"p{i}")
        child = fork(store, parent)
        _turn(store, child, "c")
        grandchild = fork(store, child)
        _turn(store, grandchild, "g")
        return parent, child, grandchild

    def test_cascade_deletes_the_forks(self, chatkeep_store: Store) -> None:
        parent, child, grandchild = self._family(chatkeep_store)
        delete_session(chatkeep_store, parent, cascade=True)
        for session in (parent, child, grandchild):
            assert chatkeep_store.read(session) == [], session

    def test_default_keeps_every_fork_whole(self, chatkeep_store: Store) -> None:
        parent, child, grandchild = self._family(chatkeep_store)
        before = {s: read_view(chatkeep_store, s) for s in (child, grandchild)}
        delete_session(chatkeep_store, parent)
        assert chatkeep_store.read(parent) == []
        for session, view in before.items():
            assert read_view(chatkeep_store, session) == view, session
        delete_session(chatkeep_store, child)
        assert read_view(chatkeep_store, grandchild) == before[grandchild]
        if chatkeep_store.supports("list_sessions"):
            assert not list(chatkeep_store.list_sessions(TEMP_PREFIX)), "temporary copies left"


class CorruptRecordTests(ConformanceBase):
    """A record that does not decode is reported by every view as ``CorruptRecord`` with
    its session and position, never skipped; what comes after it still loads."""

    def _damaged(self, store: Store, data: bytes) -> tuple[str, int]:
        session = new_session_id("corrupt")
        for i in range(2):
            _turn(store, session, f"before{i}")
        store.append(session, [Record(new_id(), data)])
        _turn(store, session, "after")
        return session, 4

    @pytest.mark.parametrize(
        "data",
        [
            b"\xff\xfe not a message",
            b'{"type": "message", "role": "user", "contents": [{"type": "text", "te',
            b'{"type": "chatkeep.no-such-kind"}',
            b"",
        ],
        ids=["garbage", "truncated", "unknown-control", "empty"],
    )
    def test_views_report_an_undecodable_record(self, chatkeep_store: Store, data: bytes) -> None:
        session, position = self._damaged(chatkeep_store, data)
        loads: dict[str, Callable[[], object]] = {
            "read_view": lambda: read_view(chatkeep_store, session),
            "read_messages": lambda: read_messages(chatkeep_store, session),
            "HistoryProvider.load": lambda: asyncio.run(
                HistoryProvider(chatkeep_store).load(AgentSession(session))
            ),
        }
        for name, load in loads.items():
            with pytest.raises(CorruptRecord) as error:
                load()
            assert error.value.session_id == session, f"{name} names another session"
            assert error.value.position == position, (
                f"{name} reports position {error.value.position}, not {position}"
            )
        assert _texts(read_view(chatkeep_store, session, limit=2)) == ["after", "re: after"]
        _turn(chatkeep_store, session, "still appendable")
        with pytest.raises(CorruptRecord):
            read_view(chatkeep_store, session)


def _weather(city: str) -> dict[str, Any]:
    """A tool for the lifecycle tests."""
    return {"city": city, "temp": 21, "raw": b"\x00\xff"}


class LifecycleTests(ConformanceBase):
    """An agent over the store: turns, failures and tool calls end up stored exactly once."""

    def test_fifty_turns_store_no_duplicates(self, chatkeep_store: Store) -> None:
        client = OfflineChatClient()
        agent = Agent(client, history_provider=HistoryProvider(chatkeep_store))
        session = agent.create_session(new_session_id("life"))
        for turn in range(50):
            agent.run_sync(f"turn {turn}", session)
        log = chatkeep_store.read(session.session_id)
        assert len(log) == 100
        assert len({record.id for record in log}) == 100, "a message was stored twice"
        assert client.requests[-1][0].text == "turn 0", "the history reached the model"
        assert len(client.requests[-1]) == 99

    def test_failed_model_call_stores_nothing(self, chatkeep_store: Store) -> None:
        client = OfflineChatClient()
        agent = Agent(client, history_provider=HistoryProvider(chatkeep_store))
        session = agent.create_session(new_session_id("life"))
        agent.run_sync("fine", session)
        before = chatkeep_store.read(session.session_id)
        client.fail_next = True
        with pytest.raises(RuntimeError):
            agent.run_sync("doomed", session)
        client.fail_stream_after = 2

        async def stream() -> list[ChatResponseUpdate]:
            return [u async for u in agent.run_stream("doomed too", session)]

        with pytest.raises(RuntimeError):
            asyncio.run(stream())
        assert chatkeep_store.read(session.session_id) == before

    def test_tool_calls_round_trip(self, chatkeep_store: Store) -> None:
        client = OfflineChatClient(
            script=[[FunctionCallContent("call-1", "_weather", {"city": "Oslo"})]]
        )
        agent = Agent(client, history_provider=HistoryProvider(chatkeep_store), tools=[_weather])
        session = agent.create_session(new_session_id("life"))
        agent.run_sync("weather?", session)
        stored = read_view(chatkeep_store, session.session_id)
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
        assert stored[1].contents == [FunctionCallContent("call-1", "_weather", {"city": "Oslo"})]
        assert stored[2].contents == [
            FunctionResultContent("call-1", {"city": "Oslo", "temp": 21, "raw": b"\x00\xff"})
        ]
        agent.run_sync("thanks", session)
        sent = [m.untagged() for m in client.requests[-1][1:3]]
        assert sent == stored[1:3], "the exchange went back to the model"

    def test_streamed_turn_is_stored_once(self, chatkeep_store: Store) -> None:
        agent = Agent(OfflineChatClient(), history_provider=HistoryProvider(chatkeep_store))
        session = agent.create_session(new_session_id("life"))

        async def stream() -> list[ChatResponseUpdate]:
            return [u async for u in agent.run_stream("stream this reply", session)]

        updates = asyncio.run(stream())
        stored = read_view(chatkeep_store, session.session_id)
        assert [m.role for m in stored] == ["user", "assistant"]
        assert stored[1].text == "".join(u.text for u in updates)


class ViewsAndLifecycleTests(
    ForkTests, UndoTests, CheckpointTests, EditTests, ForkDeletionTests, LifecycleTests
):
    """Every view and lifecycle test (forks, undo, checkpoints, in-place edits, deleting
    forked sessions, the agent loop) over the store under test."""
