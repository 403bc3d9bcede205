"""What a process killed between an event's append and the shared-state update leaves
(the README's "The event is the commit point"): the event stored with its whole delta, the
session's own state with it, the app's and the user's state without it, and everything
still readable and appendable by the next process."""

from __future__ import annotations

from typing import Any

import pytest
from google.adk.errors import StaleSessionError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types

from chatkeep.core import Record, Store, open_store
from chatkeep.google_adk import ChatkeepSessionService
from chatkeep.google_adk.layout import session_keys

pytestmark = pytest.mark.anyio


class Killed(RuntimeError):
    """Stands for the process dying: nothing after the failed call runs."""


class _DiesBeforeSharedState:
    """A backend whose appends to the app's and the user's state logs never happen: what a
    store sees of a process killed right after an event's append."""

    def __init__(self, store: Store, shared: tuple[str, ...]) -> None:
        self.store = store
        self.shared = shared
        self.capabilities = store.capabilities

    def append(self, session_id: str, records: list[Record]) -> None:
        if session_id in self.shared:
            raise Killed(session_id)
        self.store.append(session_id, records)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        if session_id in self.shared:
            raise Killed(session_id)
        self.store.append_if(session_id, records, after=after)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Any]:
        return self.store.read(session_id, start, stop)


def _event(text: str, delta: dict[str, Any]) -> Event:
    content = types.Content(role="user", parts=[types.Part(text=text)])
    return Event(author="user", content=content, actions=EventActions(state_delta=delta))


async def test_a_crash_after_the_event_leaves_the_shared_state_without_its_change() -> None:
    inner = open_store("memory://")
    first = ChatkeepSessionService(store=inner)
    await first.create_session(app_name="app", user_id="u", session_id="s")
    keys = session_keys("app", "u", "s")
    dying = Store(_DiesBeforeSharedState(inner, (keys.app_state, keys.user_state)), name="dying")
    crashing = ChatkeepSessionService(store=dying)
    loaded = await crashing.get_session(app_name="app", user_id="u", session_id="s")
    assert loaded is not None
    delta = {"user:plan": "pro", "app:version": 2, "step": 1}
    with pytest.raises(Killed):
        await crashing.append_event(loaded, _event("upgrade me", delta))

    # The object that raised is stale (its event is stored): it must be reloaded.
    with pytest.raises(StaleSessionError):
        await first.append_event(loaded, _event("retried", {"step": 9}))

    # The next process: the event and the session's own state are there, with the delta
    # the shared state lacks (how to find such an event after a crash).
    after = ChatkeepSessionService(store=inner)
    back = await after.get_session(app_name="app", user_id="u", session_id="s")
    assert back is not None
    assert [e.content.parts[0].text for e in back.events if e.content and e.content.parts] == [
        "upgrade me"
    ]
    assert back.events[-1].actions.state_delta == delta
    assert back.state == {"step": 1}, "user: and app: state without the lost change"
    # Nothing is stuck: the session takes the next event and its shared changes.
    await after.append_event(back, _event("again", {"user:plan": "pro", "step": 2}))
    again = await after.get_session(app_name="app", user_id="u", session_id="s")
    assert again is not None
    assert again.state == {"step": 2, "user:plan": "pro"}
    inner.close()
