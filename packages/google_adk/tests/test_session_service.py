"""ADK's own session-service tests, case by case, against ChatkeepSessionService.

Upstream: ``google/adk-python`` ``tests/unittests/sessions/test_session_service.py`` (the
tests that take the ``session_service`` fixture, the contract every ``BaseSessionService``
owes its callers, registered through ``tests/unittests/sessions/_conformance.py``). Each
test below names the upstream test it mirrors; the assertions are the upstream ones,
written again here. ``session_service`` (conftest) is the adapter on every store, then
ADK's ``InMemorySessionService`` and ``DatabaseSessionService`` as the reference.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

pytestmark = pytest.mark.anyio

APP = "my_app"


def event(**fields: Any) -> Event:
    """An event as the upstream tests build them (``invocation_id`` and ``author`` set)."""
    fields.setdefault("invocation_id", "inv1")
    fields.setdefault("author", "user")
    return Event(**fields)


def delta(**state: Any) -> EventActions:
    return EventActions(state_delta=state)


async def test_get_empty_session(session_service: Any) -> None:
    """Mirrors ``test_get_empty_session``: an unknown session reads as ``None``."""
    assert await session_service.get_session(app_name=APP, user_id="u", session_id="123") is None


async def test_create_get_session(session_service: Any) -> None:
    """Mirrors ``test_create_get_session``: the session read back equals the one created
    (state, time, storage marker); after ``delete_session`` it reads as ``None``."""
    session = await session_service.create_session(
        app_name=APP, user_id="test_user", state={"key": "value"}
    )
    assert session.app_name == APP and session.user_id == "test_user" and session.id
    assert session.state == {"key": "value"}
    assert session.last_update_time <= time.time()
    got = await session_service.get_session(
        app_name=APP, user_id="test_user", session_id=session.id
    )
    assert got == session
    assert got.last_update_time <= time.time()
    await session_service.delete_session(app_name=APP, user_id="test_user", session_id=session.id)
    assert (
        await session_service.get_session(app_name=APP, user_id="test_user", session_id=session.id)
        is None
    )


async def test_create_and_list_sessions(session_service: Any) -> None:
    """Mirrors ``test_create_and_list_sessions``."""
    ids = [f"session{i}" for i in range(5)]
    for session_id in ids:
        await session_service.create_session(
            app_name=APP, user_id="u", session_id=session_id, state={"key": "value" + session_id}
        )
    sessions = (await session_service.list_sessions(app_name=APP, user_id="u")).sessions
    assert len(sessions) == len(ids) and {s.id for s in sessions} == set(ids)
    for session in sessions:
        assert session.state == {"key": "value" + session.id}
        assert session.events == []


async def test_list_sessions_ordered_by_last_update_time(session_service: Any) -> None:
    """Mirrors ``test_list_sessions_ordered_by_last_update_time``: oldest update first, so
    appending to the oldest session moves it last."""
    for session_id in ("a", "b", "c"):
        await session_service.create_session(app_name=APP, user_id="u", session_id=session_id)
    session_a = await session_service.get_session(app_name=APP, user_id="u", session_id="a")
    time.sleep(0.01)
    await session_service.append_event(session_a, event(invocation_id="invocation"))
    listed = (await session_service.list_sessions(app_name=APP, user_id="u")).sessions
    assert [s.id for s in listed] == ["b", "c", "a"]


async def test_list_sessions_all_users(session_service: Any) -> None:
    """Mirrors ``test_list_sessions_all_users``: per user, and every user with
    ``user_id=None``."""
    for user, session_id in (("user1", "session1a"), ("user1", "session1b"), ("user2", "2a")):
        await session_service.create_session(
            app_name=APP, user_id=user, session_id=session_id, state={"key": "v" + session_id}
        )
    one = {
        s.id: s
        for s in (await session_service.list_sessions(app_name=APP, user_id="user1")).sessions
    }
    assert set(one) == {"session1a", "session1b"}
    assert one["session1a"].state == {"key": "vsession1a"}
    two = (await session_service.list_sessions(app_name=APP, user_id="user2")).sessions
    assert [(s.id, s.user_id, s.state) for s in two] == [("2a", "user2", {"key": "v2a"})]
    every = {s.id: s for s in (await session_service.list_sessions(app_name=APP)).sessions}
    assert set(every) == {"session1a", "session1b", "2a"}
    assert every["2a"].state == {"key": "v2a"} and every["session1b"].user_id == "user1"


async def test_app_state_is_shared_by_all_users_of_app(session_service: Any) -> None:
    """Mirrors ``test_app_state_is_shared_by_all_users_of_app``."""
    session1 = await session_service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"app:k1": "v1"}
    )
    await session_service.append_event(session1, event(actions=delta(**{"app:k2": "v2"})))
    session2 = await session_service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert session2.state == {"app:k1": "v1", "app:k2": "v2"}
    again = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert again.state.get("app:k1") == "v1" and again.state.get("app:k2") == "v2"


async def test_user_state_is_shared_only_by_user_sessions(session_service: Any) -> None:
    """Mirrors ``test_user_state_is_shared_only_by_user_sessions``."""
    session1 = await session_service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"user:k1": "v1"}
    )
    await session_service.append_event(session1, event(actions=delta(**{"user:k2": "v2"})))
    session1b = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert session1b.state == {"user:k1": "v1", "user:k2": "v2"}
    session2 = await session_service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert session2.state == {}


async def test_session_state_is_not_shared(session_service: Any) -> None:
    """Mirrors ``test_session_state_is_not_shared``."""
    session1 = await session_service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"sk1": "v1"}
    )
    await session_service.append_event(session1, event(actions=delta(sk2="v2")))
    again = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert again.state.get("sk1") == "v1" and again.state.get("sk2") == "v2"
    other = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert other.state == {}


async def test_dict_valued_state_delta_replaces_stored_value(session_service: Any) -> None:
    """Mirrors ``test_dict_valued_state_delta_replaces_stored_value``: no deep merge."""
    session = await session_service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"profile": {"name": "ada", "r": 1}}
    )
    await session_service.append_event(session, event(actions=delta(profile={"name": "bob"})))
    again = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert again.state.get("profile") == {"name": "bob"}
    assert session.state.get("profile") == {"name": "bob"}


async def test_none_valued_state_delta_is_stored_not_dropped(session_service: Any) -> None:
    """Mirrors ``test_none_valued_state_delta_is_stored_not_dropped``."""
    session = await session_service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"flag": True}
    )
    await session_service.append_event(session, event(actions=delta(flag=None)))
    again = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert "flag" in again.state and again.state["flag"] is None
    assert "flag" in session.state and session.state["flag"] is None


async def test_boolean_state_survives_unrelated_state_delta(session_service: Any) -> None:
    """Mirrors ``test_boolean_state_survives_unrelated_state_delta``."""
    session = await session_service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"flag": False}
    )
    await session_service.append_event(session, event(actions=delta(new_flag=True)))
    again = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert again.state.get("new_flag") is True and again.state.get("flag") is False
    assert session.state.get("new_flag") is True and session.state.get("flag") is False


async def test_app_state_dict_valued_delta_replaces_stored_value(session_service: Any) -> None:
    """Mirrors ``test_app_state_dict_valued_delta_replaces_stored_value``."""
    session1 = await session_service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"app:cfg": {"name": "ada", "r": 1}}
    )
    await session_service.append_event(session1, event(actions=delta(**{"app:cfg": {"name": "b"}})))
    session2 = await session_service.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert session2.state.get("app:cfg") == {"name": "b"}
    assert session1.state.get("app:cfg") == {"name": "b"}


async def test_user_state_none_valued_delta_is_stored_not_dropped(session_service: Any) -> None:
    """Mirrors ``test_user_state_none_valued_delta_is_stored_not_dropped``."""
    session1 = await session_service.create_session(
        app_name=APP, user_id="u1", session_id="s1", state={"user:pref": "dark_mode"}
    )
    await session_service.append_event(session1, event(actions=delta(**{"user:pref": None})))
    session1b = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert "user:pref" in session1b.state and session1b.state["user:pref"] is None
    assert "user:pref" in session1.state and session1.state["user:pref"] is None


async def test_temp_state_is_not_persisted_in_state_or_events(session_service: Any) -> None:
    """Mirrors ``test_temp_state_is_not_persisted_in_state_or_events`` (both versions: the
    current one checks the session object and the event, the earlier one what is read
    back): ``temp:`` state reaches the session object, never the store."""
    session = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1")
    appended = event(actions=delta(**{"temp:k1": "v1", "sk": "v2"}))
    await session_service.append_event(session, appended)
    assert session.state.get("temp:k1") == "v1" and session.state.get("sk") == "v2"
    assert "temp:k1" not in appended.actions.state_delta
    assert appended.actions.state_delta.get("sk") == "v2"
    again = await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert again.state.get("sk") == "v2" and "temp:k1" not in again.state
    assert "temp:k1" not in again.events[0].actions.state_delta
    assert again.events[0].actions.state_delta.get("sk") == "v2"


async def test_temp_state_visible_across_sequential_events(session_service: Any) -> None:
    """Mirrors ``test_temp_state_visible_across_sequential_events`` (a SequentialAgent's
    ``output_key='temp:...'`` read by the next agent of the same invocation)."""
    session = await session_service.create_session(app_name=APP, user_id="u1", session_id="seq")
    first = event(author="agent1", actions=delta(**{"temp:output": "result_from_a1"}))
    await session_service.append_event(session, first)
    assert session.state.get("temp:output") == "result_from_a1"
    assert "temp:output" not in first.actions.state_delta


async def test_get_session_respects_user_id(session_service: Any) -> None:
    """Mirrors ``test_get_session_respects_user_id``: one session id, two users."""
    session1 = await session_service.create_session(app_name=APP, user_id="u1", session_id="s1")
    await session_service.append_event(session1, event())
    await session_service.create_session(app_name=APP, user_id="u2", session_id="s1")
    got = await session_service.get_session(app_name=APP, user_id="u2", session_id="s1")
    assert got.user_id == "u2" and len(got.events) == 0


async def test_create_session_with_existing_id_raises_error(session_service: Any) -> None:
    """Mirrors ``test_create_session_with_existing_id_raises_error``."""
    await session_service.create_session(app_name=APP, user_id="u", session_id="existing")
    with pytest.raises(AlreadyExistsError):
        await session_service.create_session(app_name=APP, user_id="u", session_id="existing")


async def test_padded_session_id_reads_and_deletes(session_service: Any) -> None:
    """Mirrors ``test_padded_session_id_reads_and_deletes``: a padded id is stripped on
    create, read and delete (as ADK's in-memory and SQLite services do; its
    ``DatabaseSessionService`` keeps the padding, a divergence ADK records)."""
    created = await session_service.create_session(
        app_name=APP, user_id="u", session_id="order-42\n", state={"cart": "book"}
    )
    assert created.id == "order-42"
    got = await session_service.get_session(app_name=APP, user_id="u", session_id="order-42\n")
    assert got is not None and got.id == "order-42" and got.state["cart"] == "book"
    await session_service.delete_session(app_name=APP, user_id="u", session_id="order-42\n")
    assert (
        await session_service.get_session(app_name=APP, user_id="u", session_id="order-42") is None
    )


async def test_create_session_with_padded_duplicate_id_raises_error(session_service: Any) -> None:
    """Mirrors ``test_create_session_with_padded_duplicate_id_raises_error`` (upstream on
    the in-memory service): the duplicate check sees the stripped id."""
    await session_service.create_session(
        app_name=APP, user_id="u", session_id="existing", state={"keep": "original"}
    )
    with pytest.raises(AlreadyExistsError):
        await session_service.create_session(
            app_name=APP, user_id="u", session_id="  existing  ", state={"keep": "clobbered"}
        )
    got = await session_service.get_session(app_name=APP, user_id="u", session_id="existing")
    assert got.state["keep"] == "original"


async def test_create_session_with_blank_id_generates_one(session_service: Any) -> None:
    """Mirrors ``test_create_session_with_blank_id_generates_one`` (upstream on the
    in-memory service): a blank id is no id."""
    session = await session_service.create_session(app_name=APP, user_id="u", session_id="   ")
    assert session.id.strip()


async def test_append_event_bytes(session_service: Any) -> None:
    """Mirrors ``test_append_event_bytes``: inline bytes and grounding metadata bytes
    round-trip."""
    session = await session_service.create_session(app_name=APP, user_id="user")
    content = types.Content(
        role="user",
        parts=[types.Part.from_bytes(data=b"test_image_data", mime_type="image/png")],
    )
    grounding = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"test_sdk_blob")
    )
    await session_service.append_event(
        session, event(invocation_id="invocation", content=content, grounding_metadata=grounding)
    )
    assert session.events[0].content == content
    got = await session_service.get_session(app_name=APP, user_id="user", session_id=session.id)
    assert len(got.events) == 1
    assert got.events[0].content == content
    assert got.events[0].grounding_metadata == grounding


async def test_append_event_complete(session_service: Any) -> None:
    """Mirrors ``test_append_event_complete``: every field of an event, and the session
    read back equals the session object appended to."""
    session = await session_service.create_session(app_name=APP, user_id="user")
    complete = event(
        invocation_id="invocation",
        content=types.Content(role="user", parts=[types.Part(text="test_text")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        timestamp=1700000000.123,
        input_transcription=types.Transcription(text="input transcription", finished=True),
        output_transcription=types.Transcription(text="output transcription", finished=True),
    )
    await session_service.append_event(session, complete)
    got = await session_service.get_session(app_name=APP, user_id="user", session_id=session.id)
    assert got == session


async def test_append_event_with_requested_tool_confirmations(session_service: Any) -> None:
    """Mirrors ``test_append_event_with_requested_tool_confirmations``."""
    session = await session_service.create_session(app_name=APP, user_id="user")
    confirmation = ToolConfirmation(
        hint="dynamic hint",
        confirmed=False,
        payload={"collection_name": "photos", "resource_id": "album_1"},
    )
    await session_service.append_event(
        session,
        event(actions=EventActions(requested_tool_confirmations={"tool_call_1": confirmation})),
    )
    got = await session_service.get_session(app_name=APP, user_id="user", session_id=session.id)
    assert len(got.events) == 1
    kept = got.events[0].actions.requested_tool_confirmations["tool_call_1"]
    assert kept.hint == "dynamic hint" and not kept.confirmed
    assert kept.payload == {"collection_name": "photos", "resource_id": "album_1"}


async def test_session_last_update_time_updates_on_event(session_service: Any) -> None:
    """Mirrors ``test_session_last_update_time_updates_on_event``: the session's time is
    the appended event's."""
    session = await session_service.create_session(app_name=APP, user_id="user")
    before = session.last_update_time
    await session_service.append_event(session, event(timestamp=before + 10))
    assert session.last_update_time == pytest.approx(before + 10, abs=1e-6)
    got = await session_service.get_session(app_name=APP, user_id="user", session_id=session.id)
    assert got.last_update_time == pytest.approx(before + 10, abs=1e-6)
    assert got.last_update_time > before


async def test_get_session_with_config(session_service: Any) -> None:
    """Mirrors ``test_get_session_with_config``: ``num_recent_events`` (0 included) and
    ``after_timestamp`` (inclusive), alone and together."""
    base = int(time.time())
    session = await session_service.create_session(app_name=APP, user_id="user")
    for i in range(1, 6):
        await session_service.append_event(session, Event(author="user", timestamp=base + i))

    async def read(**config: Any) -> list[Event]:
        got = await session_service.get_session(
            app_name=APP,
            user_id="user",
            session_id=session.id,
            config=GetSessionConfig(**config) if config else None,
        )
        return list(got.events)

    assert len(await read()) == 5
    assert await read(num_recent_events=0) == []
    recent = await read(num_recent_events=3)
    assert len(recent) == 3 and recent[0].timestamp == base + 3
    since = await read(after_timestamp=base + 4)
    assert len(since) == 2 and since[0].timestamp == base + 4
    assert await read(after_timestamp=base + 50) == []
    assert len(await read(after_timestamp=base + 4, num_recent_events=3)) == 2


async def test_partial_events_are_not_persisted(session_service: Any) -> None:
    """Mirrors ``test_partial_events_are_not_persisted``."""
    session = await session_service.create_session(app_name=APP, user_id="user")
    await session_service.append_event(session, Event(author="user", partial=True))
    assert len(session.events) == 0
    got = await session_service.get_session(app_name=APP, user_id="user", session_id=session.id)
    assert len(got.events) == 0


async def test_get_user_state_returns_empty_dict_when_no_state_exists(
    session_service: Any,
) -> None:
    """Mirrors ``test_get_user_state_returns_empty_dict_when_no_state_exists``."""
    assert not await session_service.get_user_state(app_name=APP, user_id="u1")


async def test_get_user_state_returns_state_written_via_append_event(
    session_service: Any,
) -> None:
    """Mirrors ``test_get_user_state_returns_state_written_via_append_event``: raw keys,
    user scope only."""
    session = await session_service.create_session(app_name=APP, user_id="u1")
    await session_service.append_event(
        session,
        Event(author="system", actions=delta(**{"user:profile": {"name": "Alice"}, "sk": 1})),
    )
    state = await session_service.get_user_state(app_name=APP, user_id="u1")
    assert state == {"profile": {"name": "Alice"}}


async def test_get_user_state_is_not_visible_across_users(session_service: Any) -> None:
    """Mirrors ``test_get_user_state_is_not_visible_across_users``."""
    session = await session_service.create_session(app_name=APP, user_id="u1")
    await session_service.append_event(
        session, Event(author="system", actions=delta(**{"user:secret": "only-for-u1"}))
    )
    assert not await session_service.get_user_state(app_name=APP, user_id="u2")


async def test_get_user_state_is_not_visible_across_apps(session_service: Any) -> None:
    """Mirrors ``test_get_user_state_is_not_visible_across_apps``."""
    session = await session_service.create_session(app_name=APP, user_id="u1")
    await session_service.append_event(
        session, Event(author="system", actions=delta(**{"user:data": "only-app-a"}))
    )
    assert not await session_service.get_user_state(app_name="other_app", user_id="u1")


async def test_get_user_state_available_before_session_is_created(session_service: Any) -> None:
    """Mirrors ``test_get_user_state_available_before_session_is_created``."""
    first = await session_service.create_session(app_name=APP, user_id="u1")
    await session_service.append_event(
        first, Event(author="system", actions=delta(**{"user:ctx": {"v": 1}}))
    )
    assert await session_service.get_user_state(app_name=APP, user_id="u1") == {"ctx": {"v": 1}}


async def test_get_user_state_reflects_latest_write(session_service: Any) -> None:
    """Mirrors ``test_get_user_state_reflects_latest_write``."""
    session = await session_service.create_session(app_name=APP, user_id="u1")
    for value in (1, 2):
        await session_service.append_event(
            session, Event(author="system", actions=delta(**{"user:counter": value}))
        )
    assert (await session_service.get_user_state(app_name=APP, user_id="u1"))["counter"] == 2


@pytest.fixture
def local_timezone_with_dst() -> Iterator[None]:
    """Upstream's fixture of the same name: a local zone that repeats an hour."""
    original = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if original is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = original
        time.tzset()


async def test_get_session_keeps_exact_epoch_across_a_repeated_local_hour(
    session_service: Any, local_timezone_with_dst: None
) -> None:
    """Mirrors ``test_get_session_keeps_exact_epoch_across_a_repeated_local_hour``."""
    epochs = [1730613600.0, 1730615400.0]  # 01:00 and 01:30 US Eastern, the second time
    session = await session_service.create_session(app_name=APP, user_id="user")
    for epoch in epochs:
        await session_service.append_event(session, Event(author="user", timestamp=epoch))
    got = await session_service.get_session(app_name=APP, user_id="user", session_id=session.id)
    assert [e.timestamp for e in got.events] == epochs


async def test_delete_session_removes_only_the_targeted_users_session(
    session_service: Any,
) -> None:
    """Mirrors ``test_delete_session_sync_removes_only_the_targeted_users_session``
    (upstream on the in-memory service's sync API; here through the async one)."""
    await session_service.create_session(app_name=APP, user_id="u1", session_id="s1")
    await session_service.create_session(app_name=APP, user_id="u2", session_id="s1")
    await session_service.delete_session(app_name=APP, user_id="u1", session_id="s1")
    assert await session_service.get_session(app_name=APP, user_id="u1", session_id="s1") is None
    other = await session_service.get_session(app_name=APP, user_id="u2", session_id="s1")
    assert other is not None and other.id == "s1"


async def test_delete_session_unknown_session_is_a_noop(session_service: Any) -> None:
    """Mirrors ``test_delete_session_sync_unknown_session_is_a_noop``."""
    await session_service.create_session(app_name=APP, user_id="u1", session_id="s1")
    for app, user, session_id in ((APP, "u1", "nope"), (APP, "nope", "s1"), ("nope", "u1", "s1")):
        await session_service.delete_session(app_name=app, user_id=user, session_id=session_id)
    assert await session_service.get_session(app_name=APP, user_id="u1", session_id="s1")


async def test_list_sessions_strips_events_and_merges_scoped_state(session_service: Any) -> None:
    """Mirrors ``test_list_sessions_sync_strips_events_and_merges_scoped_state``."""
    session = await session_service.create_session(
        app_name=APP,
        user_id="u1",
        session_id="s1",
        state={"app:a": "av", "user:u": "uv", "sk": "sv", "temp:t": "tv"},
    )
    await session_service.append_event(session, event(actions=delta(sk2="sv2")))
    listed = (await session_service.list_sessions(app_name=APP, user_id="u1")).sessions
    assert [s.id for s in listed] == ["s1"]
    assert listed[0].events == []
    assert listed[0].state == {"app:a": "av", "user:u": "uv", "sk": "sv", "sk2": "sv2"}


async def test_list_sessions_unknown_app_or_user_returns_empty_response(
    session_service: Any,
) -> None:
    """Mirrors ``test_list_sessions_sync_unknown_app_or_user_returns_empty_response``."""
    await session_service.create_session(app_name=APP, user_id="u1", session_id="s1")
    assert (await session_service.list_sessions(app_name="unknown_app")).sessions == []
    assert (await session_service.list_sessions(app_name=APP, user_id="nobody")).sessions == []
    assert [s.id for s in (await session_service.list_sessions(app_name=APP)).sessions] == ["s1"]


async def test_append_event_is_idempotent_for_same_event_id(session_service: Any) -> None:
    """Mirrors ``test_append_event_is_idempotent_for_same_event_id`` (upstream on the
    in-memory service only: ADK's database services refuse the second insert): the same
    event again, as the same object or an equal copy, is stored once."""
    session = await session_service.create_session(app_name=APP, user_id="u", session_id="dup")
    once = event(invocation_id="inv_dup", actions=delta(**{"session:counter": 1}))
    await session_service.append_event(session, once)
    await session_service.append_event(session, once)
    await session_service.append_event(session, once.model_copy(deep=True))
    got = await session_service.get_session(app_name=APP, user_id="u", session_id="dup")
    assert [e.id for e in got.events] == [once.id]
    assert got.state.get("session:counter") == 1


async def test_append_different_events_not_deduplicated(session_service: Any) -> None:
    """Mirrors ``test_append_different_events_not_deduplicated`` (upstream on the
    in-memory service): two different events that share an id are both kept."""
    session = await session_service.create_session(app_name=APP, user_id="u", session_id="multi")
    await session_service.append_event(
        session, Event(id="shared", invocation_id="a", author="user")
    )
    await session_service.append_event(session, Event(id="shared", invocation_id="b", author="x"))
    got = await session_service.get_session(app_name=APP, user_id="u", session_id="multi")
    assert [e.author for e in got.events] == ["user", "x"]
