"""The Agents SDK's own runner (``Runner.run``, ``run_sync``, ``run_streamed``) with a
deterministic model (the SDK's ``ScriptedModel``) and a real tool, on chatkeep stores.

Adapted from the SDK's runner-level session tests (tests/memory/test_session.py,
test_session_limit.py): multi-turn memory, separate sessions, list input, the session
limit from ``RunConfig``; plus what the SDK cannot test for a store it does not have: a
second process resuming the conversation by id, and no event-loop warnings from any
backend under ``run_sync`` and per-thread event loops.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SessionSettings, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from chatkeep.core import FunctionCallContent, FunctionResultContent, Store, read_view
from chatkeep.openai_agents import ChatkeepSession

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("error")]
METHODS = ["run", "run_sync", "run_streamed"]


@function_tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


def _run_sync_on_a_fresh_loop(agent: Agent[Any], text: str, **options: Any) -> Any:
    # The SDK's own test helper does this: a new loop for the thread, closed afterwards.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, text, **options)
    finally:
        loop.close()
        asyncio.set_event_loop(None)


async def run(method: str, agent: Agent[Any], text: Any, **options: Any) -> Any:
    if method == "run":
        return await Runner.run(agent, text, **options)
    if method == "run_sync":
        return await asyncio.to_thread(_run_sync_on_a_fresh_loop, agent, text, **options)
    result = Runner.run_streamed(agent, text, **options)
    async for _event in result.stream_events():
        pass
    return result


@pytest.fixture(autouse=True)
def no_loop_errors(caplog: pytest.LogCaptureFixture) -> Any:
    """asyncio reports destroyed tasks and closed loops through logging, not warnings."""
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        yield
    errors = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert errors == []


@pytest.mark.parametrize("method", METHODS)
async def test_multi_turn_conversation_with_a_tool(method: str, store: Store, sid: str) -> None:
    session = ChatkeepSession(sid, store=store)
    model = ScriptedModel()
    agent = Agent(name="assistant", model=model, tools=[weather])
    model.enqueue([function_call("weather", {"city": "Oslo"}, call_id="call-1")])
    model.enqueue([assistant_message("It is sunny in Oslo.", item_id="1")])
    first = await run(method, agent, "What is the weather in Oslo?", session=session)
    assert first.final_output == "It is sunny in Oslo."

    model.enqueue([assistant_message("You asked about Oslo.", item_id="1")])
    second = await run(method, agent, "Which city did I ask about?", session=session)
    assert second.final_output == "You asked about Oslo."

    items = await session.get_items()
    sent = model.calls[-1].input
    assert sent == items[:-1]  # the model saw the whole stored history, exactly
    assert [item.get("type", "message") for item in items] == [
        "message", "function_call", "function_call_output", "message", "message", "message",
    ]  # fmt: skip
    assert items[2]["output"] == "sunny in Oslo"  # type: ignore[typeddict-item]
    view = read_view(store, sid)
    assert isinstance(view[1].contents[0], FunctionCallContent)
    assert isinstance(view[2].contents[0], FunctionResultContent)
    assert [m.text for m in view if m.role == "user"] == [
        "What is the weather in Oslo?",
        "Which city did I ask about?",
    ]


@pytest.mark.parametrize("method", METHODS)
async def test_separate_sessions_keep_separate_histories(
    method: str, store: Store, sid: str
) -> None:
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    cats, dogs = ChatkeepSession(sid + "-1", store=store), ChatkeepSession(sid + "-2", store=store)
    model.enqueue([assistant_message("I like cats")])
    await run(method, agent, "I like cats", session=cats)
    model.enqueue([assistant_message("I like dogs")])
    await run(method, agent, "I like dogs", session=dogs)
    model.enqueue([assistant_message("Yes, you mentioned cats")])
    await run(method, agent, "What did I say I like?", session=cats)
    seen = json.dumps(model.calls[-1].input)
    assert "cats" in seen and "dogs" not in seen


@pytest.mark.parametrize("method", METHODS)
async def test_list_input_is_appended(method: str, store: Store, sid: str) -> None:
    session = ChatkeepSession(sid, store=store)
    model = ScriptedModel([[assistant_message("noted")]])
    agent = Agent(name="test", model=model)
    await run(
        method,
        agent,
        [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
        session=session,
    )
    items = await session.get_items()
    assert items[:2] == [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]


@pytest.mark.parametrize("method", METHODS)
async def test_session_limit_from_run_config(method: str, store: Store, sid: str) -> None:
    session = ChatkeepSession(sid, store=store)
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    for n in (1, 2, 3):
        model.enqueue([assistant_message(f"Reply {n}")])
        await run(method, agent, f"Message {n}", session=session)
    assert len(await session.get_items()) == 6
    model.enqueue([assistant_message("Reply 4")])
    limited = RunConfig(session_settings=SessionSettings(limit=2))
    await run(method, agent, "Message 4", session=session, run_config=limited)
    sent = model.calls[-1].input
    assert len(sent) == 3
    assert sent[0]["content"] == "Message 3"  # type: ignore[typeddict-item]
    assert sent[1]["content"][0]["text"] == "Reply 3"  # type: ignore[typeddict-item,index]
    assert sent[2]["content"] == "Message 4"  # type: ignore[typeddict-item]


async def test_limit_cuts_an_output_from_its_call_and_the_runner_drops_it(
    store: Store, sid: str
) -> None:
    session = ChatkeepSession(sid, store=store)
    history: list[Any] = [
        {"role": "user", "content": "What is the weather?"},
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
        },
    ]
    await session.add_items(history)
    assert await session.get_items(limit=2) == history[-2:]  # the session gives exactly that
    model = ScriptedModel([[assistant_message("Tomorrow too.")]])
    limited = RunConfig(session_settings=SessionSettings(limit=2))
    await Runner.run(Agent(name="t", model=model), "Tomorrow?", session=session, run_config=limited)
    assert model.calls[-1].input == [history[-1], {"role": "user", "content": "Tomorrow?"}]


def test_run_sync_on_threads_with_their_own_loops(store: Store, sid: str) -> None:
    """Several threads, each running the SDK's run_sync on its default loop (kept open,
    as run_sync keeps it) and on loops it opens and closes: no loop errors or warnings
    from the store, whatever the backend."""
    failures: list[BaseException] = []

    def conversation(index: int) -> None:
        try:
            session = ChatkeepSession(f"{sid}-{index}", store=store)
            model = ScriptedModel([[assistant_message(f"reply {n}")] for n in range(4)])
            agent = Agent(name="t", model=model)
            for n in range(2):  # the thread's default loop, reused between calls
                Runner.run_sync(agent, f"turn {n}", session=session)
            # run_sync leaves the loop it made open for later calls: the thread closes it.
            asyncio.get_event_loop_policy().get_event_loop().close()
            for n in range(2, 4):  # a loop per call, closed after it
                _run_sync_on_a_fresh_loop(agent, f"turn {n}", session=session)
            assert len(model.calls[-1].input) == 7
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=conversation, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []


RESUME = textwrap.dedent(
    """
    import json, sys
    from agents import Agent, Runner
    from agents.testing import ScriptedModel, assistant_message
    from chatkeep.openai_agents import ChatkeepSession

    url, session_id = sys.argv[1], sys.argv[2]
    model = ScriptedModel([[assistant_message("You asked about Oslo.")]])
    with ChatkeepSession(session_id, url=url) as session:
        result = Runner.run_sync(Agent(name="t", model=model), "Which city?", session=session)
    print(json.dumps({"output": result.final_output, "input": model.calls[-1].input}))
    """
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_second_process_resumes_by_session_id(
    backend: str, request: pytest.FixtureRequest, sid: str, tmp_path: Path
) -> None:
    url: str = request.getfixturevalue(f"{backend}_url")
    session = ChatkeepSession(sid, url=url)
    model = ScriptedModel()
    model.enqueue([function_call("weather", {"city": "Oslo"}, call_id="call-1")])
    model.enqueue([assistant_message("It is sunny in Oslo.")])
    await Runner.run(
        Agent(name="t", model=model, tools=[weather]), "Weather in Oslo?", session=session
    )
    before = await session.get_items()
    session.close()

    script = tmp_path / "resume.py"
    script.write_text(RESUME)
    done = subprocess.run(
        [sys.executable, str(script), url, sid],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["output"] == "You asked about Oslo."
    assert answer["input"][:-1] == before  # the whole history, from the other process
    async with ChatkeepSession(sid, url=url) as again:
        assert len(await again.get_items()) == len(before) + 2
