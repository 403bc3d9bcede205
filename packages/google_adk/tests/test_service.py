"""What ChatkeepSessionService does beyond ADK's tests: its constructor, ids no layout
confuses, what it costs in store requests, logs written by something else, and stores
without conditional appends."""

from __future__ import annotations

from typing import Any

import pytest
from adk_support import counting
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from chatkeep.core import (
    ChatkeepError,
    CorruptRecord,
    InvalidOption,
    Message,
    encode_records,
    new_id,
    open_store,
    undo,
)
from chatkeep.google_adk import ChatkeepSessionService, StaleSession, UnknownSession
from chatkeep.google_adk.layout import session_keys

pytestmark = pytest.mark.anyio

APP = "app"


def said(text: str, author: str = "user", **fields: Any) -> Event:
    role = "user" if author == "user" else "model"
    return Event(
        author=author, content=types.Content(role=role, parts=[types.Part(text=text)]), **fields
    )


async def test_the_constructor_takes_a_url_or_a_store() -> None:
    shared = open_store("memory://")
    service = ChatkeepSessionService(store=shared)
    assert service.store is shared
    await service.close()
    assert not shared.closed  # a shared store is left open
    owned = ChatkeepSessionService(url="memory://")
    async with owned:
        pass
    assert owned.store.closed
    with pytest.raises(InvalidOption, match="not both"):
        ChatkeepSessionService(url="memory://", store=shared)
    with pytest.raises(InvalidOption, match="must be a chatkeep Store"):
        ChatkeepSessionService(store="memory://")  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="app_name must be a str"):
        await ChatkeepSessionService(store=shared).get_session(
            app_name=1,  # type: ignore[arg-type]
            user_id="u",
            session_id="s",
        )


async def test_errors_are_adks_and_chatkeeps() -> None:
    service = ChatkeepSessionService(url="memory://")
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(AlreadyExistsError) as exists:
        await service.create_session(app_name=APP, user_id="u", session_id="s")
    assert isinstance(exists.value, ChatkeepError)
    stale = session.model_copy(deep=True)
    await service.append_event(session, said("one"))
    with pytest.raises(StaleSession) as caught:
        await service.append_event(stale, said("two"))
    assert isinstance(caught.value, StaleSessionError) and isinstance(caught.value, ValueError)
    await service.delete_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(UnknownSession, match="Session s not found"):
        await service.append_event(session, said("three"))


HOSTILE = ["a/b", "a:b", "%41", "..", "x y\n", "é👋", "!" + "0" * 64, "k" * 300, ""]


async def test_any_ids_stay_apart_and_come_back_as_given(store_url: str) -> None:
    """Slashes, colons, escapes, Unicode, empty and very long ids (hashed in the key) for
    app, user and session: each its own session, listed with the ids as given."""
    service = ChatkeepSessionService(url=store_url)
    for index, value in enumerate(HOSTILE):
        await service.create_session(
            app_name=value, user_id=value, session_id=value or "empty", state={"i": index}
        )
        await service.create_session(app_name=APP, user_id=value, session_id=value or "e")
    for index, value in enumerate(HOSTILE):
        got = await service.get_session(app_name=value, user_id=value, session_id=value or "empty")
        assert got is not None and got.state == {"i": index}
        listed = (await service.list_sessions(app_name=value)).sessions
        assert [(s.user_id, s.id, s.state) for s in listed] == [
            (value, value.strip() or "empty", {"i": index})  # session ids are stripped
        ]
    everyone = (await service.list_sessions(app_name=APP)).sessions
    assert sorted((s.user_id, s.id) for s in everyone) == sorted(
        (value, value.strip() or "e") for value in HOSTILE
    )
    # "a/b" is not app "a"'s user "b", nor is "a" a prefix of "a:b".
    assert (await service.list_sessions(app_name="a")).sessions == []
    await service.close()


async def test_what_each_operation_costs_in_store_requests() -> None:
    """One read per log for a whole or windowed session (a window reads what it returns,
    however long the session); an append is one conditional append, plus a read and an
    append per shared state it changes; nothing re-reads what this service wrote."""
    store, counter = counting("memory://")
    service = ChatkeepSessionService(store=store)
    session = await service.create_session(app_name=APP, user_id="u", state={"k": 0})
    assert counter.calls == {"append_if": 1, "read": 2}  # the creation record; app and user state
    counter.reset()
    await service.append_event(session, said("x", actions=EventActions(state_delta={"k": 1})))
    assert counter.calls == {"append_if": 1}  # the state it changes was cached
    counter.reset()
    for index in range(200):
        await service.append_event(session, said(f"m{index}"))
    assert counter.calls == {"append_if": 200}
    counter.reset()
    await service.append_event(session, said("y", actions=EventActions(state_delta={"user:a": 1})))
    assert counter.calls == {"append_if": 2, "read": 1}
    counter.reset()
    whole = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert whole is not None and len(whole.events) == 202
    assert counter.calls == {"read": 3} and counter.records_read == 203 + 1  # + user state
    fresh = ChatkeepSessionService(store=store)  # another process's service: no cache
    counter.reset()
    config = GetSessionConfig(num_recent_events=5)
    window = await fresh.get_session(
        app_name=APP, user_id="u", session_id=session.id, config=config
    )
    assert window is not None and window.events == whole.events[-5:]
    assert window.state == whole.state == {"k": 1, "user:a": 1}
    # the window, the record holding the session's state (outside it), the user's state
    assert counter.calls == {"read": 4} and counter.records_read == 5 + 1 + 1
    counter.reset()
    await fresh.get_session(app_name=APP, user_id="u", session_id=session.id, config=config)
    assert counter.calls == {"read": 3}  # that record is cached now
    counter.reset()
    since = GetSessionConfig(after_timestamp=whole.events[-3].timestamp)
    recent = await fresh.get_session(app_name=APP, user_id="u", session_id=session.id, config=since)
    assert recent is not None and recent.events == whole.events[-3:]
    assert counter.records_read <= 64 + 2  # one backward chunk, not the session


async def test_events_out_of_time_order_come_back_sorted_and_windowed() -> None:
    """A log whose events were not appended in (timestamp, id) order is read whole and
    sorted, so a window holds the newest events, as ADK's database service returns."""
    service = ChatkeepSessionService(url="memory://")
    session = await service.create_session(app_name=APP, user_id="u")
    for stamp in (30.0, 10.0, 40.0, 20.0):
        await service.append_event(session, said(str(stamp), timestamp=stamp))
    got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got is not None and [e.timestamp for e in got.events] == [10.0, 20.0, 30.0, 40.0]
    assert got.last_update_time == 20.0  # the last appended event's, as in ADK's services
    window = await service.get_session(
        app_name=APP,
        user_id="u",
        session_id=session.id,
        config=GetSessionConfig(num_recent_events=2),
    )
    assert window is not None and [e.timestamp for e in window.events] == [30.0, 40.0]
    since = await service.get_session(
        app_name=APP,
        user_id="u",
        session_id=session.id,
        config=GetSessionConfig(after_timestamp=25.0),
    )
    assert since is not None and [e.timestamp for e in since.events] == [30.0, 40.0]


async def test_a_log_written_by_something_else_is_reported_not_misread() -> None:
    """An ADK session's log is this service's: a chatkeep undo, or a message another
    writer appended, makes reading it fail with ``CorruptRecord`` naming the record,
    never a wrong session."""
    service = ChatkeepSessionService(url="memory://")
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.append_event(session, said("hello"))
    key = session_keys(APP, "u", "s").session
    undo(service.store, key)
    with pytest.raises(CorruptRecord, match=r"other than chatkeep\.google_adk|not a record"):
        await service.get_session(app_name=APP, user_id="u", session_id="s")
    other = await service.create_session(app_name=APP, user_id="u", session_id="t")
    message = Message("user", [], message_id=new_id())
    service.store.append(session_keys(APP, "u", "t").session, encode_records([message]))
    with pytest.raises(CorruptRecord):
        await service.get_session(app_name=APP, user_id="u", session_id="t")
    with pytest.raises(StaleSession):
        await service.append_event(other, said("after it"))  # nothing written after it


async def test_a_store_without_conditional_appends_still_works_alone() -> None:
    """Without the ``conditional`` capability the service checks by reading first: one
    writer at a time gets ADK's behaviour (existing ids refused, stale sessions refused,
    shared state merged); concurrent writers may lose shared-state updates (README)."""
    store, counter = counting("memory://", hide=frozenset({"conditional"}))
    assert not store.supports("conditional")
    service = ChatkeepSessionService(store=store)
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(AlreadyExistsError):
        await service.create_session(app_name=APP, user_id="u", session_id="s")
    stale = session.model_copy(deep=True)
    await service.append_event(session, said("one", actions=EventActions(state_delta={"app:x": 1})))
    await service.append_event(session, said("two", actions=EventActions(state_delta={"app:x": 2})))
    with pytest.raises(StaleSession):
        await service.append_event(stale, said("late"))
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got == session and got.state == {"app:x": 2}
    assert "append_if" not in counter.calls
