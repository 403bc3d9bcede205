"""ADK's own ``Runner`` on ChatkeepSessionService: a multi-turn conversation with a tool
call against a deterministic model, on SQLite and PostgreSQL, resumed by id in a second
process; the same script on ADK's ``InMemorySessionService`` gives the same events."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from adk_support import APP, USER, make_runner, turn
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import GetSessionConfig

from chatkeep.core import open_store, read_view
from chatkeep.core.metadata import describe_session
from chatkeep.google_adk import ChatkeepSessionService
from chatkeep.google_adk.layout import session_keys

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("error::RuntimeWarning")]

SUPPORT = Path(__file__).with_name("adk_support.py")


def shape(events: list[Any]) -> list[tuple[Any, ...]]:
    """What a run's events say, without the ids and times each run makes anew."""
    out = []
    for event in events:
        parts = []
        for part in event.content.parts if event.content else []:
            if part.function_call:
                parts.append(("call", part.function_call.name, part.function_call.args))
            elif part.function_response:
                parts.append(
                    ("result", part.function_response.name, part.function_response.response)
                )
            else:
                parts.append(("text", part.text))
        delta = event.actions.state_delta
        out.append((event.author, event.content.role if event.content else None, parts, delta))
    return out


async def converse(service: Any) -> tuple[str, list[Any]]:
    runner, model = make_runner(service)
    session = await service.create_session(app_name=APP, user_id=USER)
    produced = await turn(runner, session.id, "weather: Oslo")
    produced += await turn(runner, session.id, "thanks")
    assert model.requests[-1].contents[0].parts[0].text == "weather: Oslo"
    return session.id, produced


async def test_a_conversation_with_a_tool_call_is_stored_and_resumed(agent_store_url: str) -> None:
    service = ChatkeepSessionService(url=agent_store_url)
    session_id, produced = await converse(service)
    reference_id, reference = await converse(InMemorySessionService())
    assert shape(produced) == shape(reference)
    assert [e.author for e in produced] == ["assistant"] * 4  # call, tool result, answer, answer
    assert produced[2].content.parts[0].text == "The forecast: sunny in Oslo."

    stored = await service.get_session(app_name=APP, user_id=USER, session_id=session_id)
    assert stored is not None
    # What the runner appended, the user's messages included, came back exactly.
    assert [e for e in stored.events if e.author == "assistant"] == produced
    assert [e.content.parts[0].text for e in stored.events if e.author == "user"] == [
        "weather: Oslo",
        "thanks",
    ]
    assert stored.state["last_answer"] == "you said: thanks (2 user messages so far)"
    assert stored.events[1].usage_metadata is not None  # model metadata round-trips
    window = await service.get_session(
        app_name=APP,
        user_id=USER,
        session_id=session_id,
        config=GetSessionConfig(num_recent_events=2),
    )
    assert window.events == stored.events[-2:] and window.state == stored.state
    await service.close()

    # chatkeep readers see the conversation: roles, text and the tool call.
    store = open_store(agent_store_url)
    key = session_keys(APP, USER, session_id).session
    view = read_view(store, key)
    assert [m.role for m in view] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert view[0].text == "weather: Oslo" and view[3].text == "The forecast: sunny in Oslo."
    assert view[1].contents[0].name == "weather"  # type: ignore[union-attr]
    assert describe_session(store, key).messages == 6
    store.close()

    # A second process resumes the session by its id alone.
    done = subprocess.run(
        [sys.executable, str(SUPPORT), agent_store_url, session_id, "and tomorrow?"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    resumed = json.loads(done.stdout.strip().splitlines()[-1])
    assert resumed["answer"] == "you said: and tomorrow? (3 user messages so far)"
    assert resumed["seen"][0] == ["weather: Oslo"] and ["thanks"] in resumed["seen"]

    again = ChatkeepSessionService(url=agent_store_url)
    final = await again.get_session(app_name=APP, user_id=USER, session_id=session_id)
    assert final is not None and len(final.events) == len(stored.events) + 2
    assert final.events[: len(stored.events)] == stored.events
    assert final.state["last_answer"] == resumed["answer"]
    await again.close()
    del reference_id


async def test_rewind_through_the_runner_undoes_a_turn() -> None:
    """``Runner.rewind_async`` appends an event that reverses the state of the rewound
    invocations; the next turn's model sees the conversation without them."""
    service = ChatkeepSessionService(url="memory://")
    runner, model = make_runner(service)
    session = await service.create_session(app_name=APP, user_id=USER)
    await turn(runner, session.id, "first")
    second = await turn(runner, session.id, "second")
    await runner.rewind_async(
        user_id=USER, session_id=session.id, rewind_before_invocation_id=second[0].invocation_id
    )
    rewound = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert rewound is not None
    assert rewound.state["last_answer"] == "you said: first (1 user messages so far)"
    answer = await turn(runner, session.id, "third")
    assert answer[-1].content.parts[0].text == "you said: third (2 user messages so far)"
    seen = [c.parts[0].text for c in model.requests[-1].contents if c.role == "user"]
    assert seen == ["first", "third"]
