"""ADK's tests of its persistent services' own rules, against ChatkeepSessionService.

Upstream: ``google/adk-python`` ``tests/unittests/sessions/test_session_service.py``, the
tests that build a ``DatabaseSessionService`` (or a ``SqliteSessionService``) themselves:
stale session objects, a deleted session, values that are not JSON, the order of events
with equal timestamps. ``database_service`` (conftest) is the adapter on every store, then
ADK's ``DatabaseSessionService`` as the reference.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from google.adk.errors import StaleSessionError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions import Session

pytestmark = pytest.mark.anyio

APP = "my_app"


def event(invocation_id: str, **fields: Any) -> Event:
    return Event(invocation_id=invocation_id, author="user", **fields)


async def test_append_event_to_deleted_session_raises_session_not_found(
    database_service: Any,
) -> None:
    """Mirrors ``test_append_event_to_deleted_session_raises_session_not_found``."""
    session = await database_service.create_session(app_name=APP, user_id="user")
    await database_service.delete_session(app_name=APP, user_id="user", session_id=session.id)
    with pytest.raises(SessionNotFoundError):
        await database_service.append_event(session, event("inv1"))


async def test_append_event_to_stale_session(database_service: Any) -> None:
    """Mirrors ``test_append_event_to_stale_session``: a session object another writer got
    ahead of is refused with ``StaleSessionError`` ("modified in storage") and nothing of
    its event is stored."""
    now = time.time()
    original = await database_service.create_session(app_name=APP, user_id="user")
    await database_service.append_event(
        original, event("inv1", timestamp=now + 1, actions=EventActions(state_delta={"sk1": "v1"}))
    )
    updated = await database_service.get_session(
        app_name=APP, user_id="user", session_id=original.id
    )
    await database_service.append_event(
        updated, event("inv2", timestamp=now + 2, actions=EventActions(state_delta={"sk2": "v2"}))
    )
    assert original.last_update_time < updated.last_update_time
    assert len(original.events) == 1 and "sk2" not in original.state
    with pytest.raises(StaleSessionError, match="modified in storage"):
        await database_service.append_event(
            original,
            event("inv3", timestamp=now + 3, actions=EventActions(state_delta={"sk3": "v3"})),
        )
    final = await database_service.get_session(app_name=APP, user_id="user", session_id=original.id)
    assert [e.invocation_id for e in final.events] == ["inv1", "inv2"]
    assert final.state.get("sk1") == "v1" and final.state.get("sk2") == "v2"
    assert final.state.get("sk3") is None


async def test_append_event_uses_typed_stale_session_error(database_service: Any) -> None:
    """Mirrors ``test_sqlite_append_event_uses_typed_stale_session_error``: a copy of a
    session object taken before another append is stale, and the error is a
    ``ValueError`` too."""
    session = await database_service.create_session(app_name=APP, user_id="user")
    stale = session.model_copy(deep=True)
    await database_service.append_event(
        session, event("winner", timestamp=session.last_update_time + 1)
    )
    with pytest.raises(StaleSessionError) as caught:
        await database_service.append_event(
            stale, event("stale", timestamp=session.last_update_time + 1)
        )
    assert isinstance(caught.value, ValueError)


async def test_append_event_concurrent_stale_sessions_reject_stale_writer(
    database_service: Any,
) -> None:
    """Mirrors ``test_append_event_concurrent_stale_sessions_reject_stale_writer``: two
    copies of one session object appending at once, eight times over: exactly one wins
    each time, the other is stale, and only the winners' state and events are kept."""
    session = await database_service.create_session(app_name=APP, user_id="user")
    rounds = 8
    for i in range(rounds):
        latest = await database_service.get_session(
            app_name=APP, user_id="user", session_id=session.id
        )
        first, second = latest.model_copy(deep=True), latest.model_copy(deep=True)
        base = latest.last_update_time + 10.0
        results = await asyncio.gather(
            database_service.append_event(
                first,
                event(
                    f"inv{i}-1",
                    timestamp=base + 1,
                    actions=EventActions(state_delta={f"sk{i}-1": f"v{i}-1"}),
                ),
            ),
            database_service.append_event(
                second,
                event(
                    f"inv{i}-2",
                    timestamp=base + 2,
                    actions=EventActions(state_delta={f"sk{i}-2": f"v{i}-2"}),
                ),
            ),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, Exception)]
        assert len(errors) == 1 and isinstance(errors[0], StaleSessionError)
        assert "modified in storage" in str(errors[0])
    final = await database_service.get_session(app_name=APP, user_id="user", session_id=session.id)
    for i in range(rounds):
        values = {final.state.get(f"sk{i}-1"), final.state.get(f"sk{i}-2")}
        assert values & {f"v{i}-1", f"v{i}-2"} and None in values
    assert len(final.events) == rounds


async def test_append_event_allows_timestamp_drift_for_current_session(
    database_service: Any,
) -> None:
    """Mirrors ``test_append_event_allows_timestamp_drift_for_current_session``: the
    storage marker, not the float time, says whether a session object is current."""
    session = await database_service.create_session(app_name=APP, user_id="user", session_id="s1")
    first = event("inv1", timestamp=session.last_update_time + 10)
    await database_service.append_event(session, first)
    session.last_update_time -= 0.0001
    await database_service.append_event(session, event("inv2", timestamp=first.timestamp + 10))
    got = await database_service.get_session(app_name=APP, user_id="user", session_id="s1")
    assert [e.invocation_id for e in got.events] == ["inv1", "inv2"]


async def test_append_event_allows_markerless_current_session(database_service: Any) -> None:
    """Mirrors ``test_append_event_allows_markerless_current_session``: without a marker,
    a session object whose last event is the stored latest one is current."""
    session = await database_service.create_session(app_name=APP, user_id="user", session_id="s1")
    first = event("inv1", timestamp=session.last_update_time + 10)
    await database_service.append_event(session, first)
    session._storage_update_marker = None
    session.last_update_time -= 0.0001
    await database_service.append_event(session, event("inv2", timestamp=first.timestamp + 10))
    got = await database_service.get_session(app_name=APP, user_id="user", session_id="s1")
    assert [e.invocation_id for e in got.events] == ["inv1", "inv2"]


async def test_markerless_session_behind_storage_is_stale(database_service: Any) -> None:
    """The other side of the database service's marker-less check: a session object
    built by hand (no marker) whose last event is not the stored latest one, and older
    than the stored session, is stale; one with the latest event and time is current."""
    session = await database_service.create_session(app_name=APP, user_id="user", session_id="s1")
    base = session.last_update_time
    await database_service.append_event(session, event("inv1", timestamp=base + 10))
    await database_service.append_event(session, event("inv2", timestamp=base + 20))
    behind = Session(
        app_name=APP, user_id="user", id="s1", events=session.events[:1], last_update_time=base
    )
    with pytest.raises(StaleSessionError):
        await database_service.append_event(behind, event("inv3", timestamp=base + 30))
    current = Session(
        app_name=APP, user_id="user", id="s1", events=list(session.events), last_update_time=base
    )
    await database_service.append_event(current, event("inv3", timestamp=base + 30))
    got = await database_service.get_session(app_name=APP, user_id="user", session_id="s1")
    assert [e.invocation_id for e in got.events] == ["inv1", "inv2", "inv3"]
    fresh = Session(app_name=APP, user_id="user", id="nobody", last_update_time=base)
    with pytest.raises(SessionNotFoundError):
        await database_service.append_event(fresh, event("inv4"))


async def test_append_event_with_non_serializable_state_delta(database_service: Any) -> None:
    """Mirrors ``test_append_event_with_non_serializable_state_delta``: a value JSON
    cannot hold is stored as its string form; the event and the rest are kept."""
    session = await database_service.create_session(app_name=APP, user_id="user")
    await database_service.append_event(
        session, event("inv", actions=EventActions(state_delta={"callback": lambda: 1, "ok": 2}))
    )
    got = await database_service.get_session(app_name=APP, user_id="user", session_id=session.id)
    assert len(got.events) == 1
    assert got.state["ok"] == 2 and isinstance(got.state["callback"], str)


@pytest.mark.parametrize("reverse", [False, True])
async def test_get_session_orders_tied_timestamps_by_id(
    database_service: Any, reverse: bool
) -> None:
    """Mirrors ``test_get_session_orders_tied_timestamps_by_id``: events with one
    timestamp come back in id order, whatever order they were appended in; and a window
    (``num_recent_events``) cuts that order, not the append order."""
    from google.adk.sessions.base_session_service import GetSessionConfig

    ids = ["event_a", "event_m", "event_z"]
    session = await database_service.create_session(app_name=APP, user_id="user")
    for event_id in reversed(ids) if reverse else ids:
        await database_service.append_event(
            session, Event(author="user", id=event_id, timestamp=100.0)
        )
    got = await database_service.get_session(app_name=APP, user_id="user", session_id=session.id)
    assert [e.id for e in got.events] == ids
    window = await database_service.get_session(
        app_name=APP,
        user_id="user",
        session_id=session.id,
        config=GetSessionConfig(num_recent_events=2),
    )
    assert [e.id for e in window.events] == ids[1:]
    since = await database_service.get_session(
        app_name=APP,
        user_id="user",
        session_id=session.id,
        config=GetSessionConfig(after_timestamp=100.0),
    )
    assert [e.id for e in since.events] == ids
