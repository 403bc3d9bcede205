"""A real MAF ``Agent`` over ``ChatkeepHistoryProvider``, on SQLite and PostgreSQL.

The agent is MAF's own (``agent_framework.Agent`` with MAF's ``OpenAIChatCompletionClient``
and its function-invocation loop), the model is chatkeep's deterministic fake model server
on loopback (``chatkeep.fake_model``): it answers ``[seen N] first: ... | latest:
...`` from the history it was sent, and calls the ``weather`` tool when asked
``call:weather({...})``. Every turn runs on a fresh event loop (``asyncio.run``), some on
other threads, and a second process resumes the conversation by its session id alone.
Warnings are errors here, and no log line may say an event loop was closed or foreign.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from maf_support import LOOP_PROBLEMS, agent_turn, http_client, make_agent

from chatkeep.agent_framework import ChatkeepHistoryProvider
from chatkeep.core import open_store, read_view
from chatkeep.fake_model import FakeModelServer

pytestmark = [
    pytest.mark.filterwarnings("error"),
    # MAF itself warns about some of its own experimental features; not ours to fix.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:agent_framework"),
]

WEATHER = 'call:weather({"city": "Oslo"})'


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running


@pytest.fixture
def no_loop_problems(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail the test if any logger (asyncio, psycopg, redis, ...) reports a closed or a
    foreign event loop."""
    caplog.set_level(logging.WARNING)
    yield
    problems = [
        record.getMessage()
        for record in caplog.records
        if any(problem in record.getMessage() for problem in LOOP_PROBLEMS)
    ]
    assert problems == []


@pytest.fixture
def provider(agent_store_url: str) -> Iterator[ChatkeepHistoryProvider]:
    """One provider for the whole test, shared by every loop and thread."""
    opened = ChatkeepHistoryProvider(url=agent_store_url)
    yield opened
    asyncio.run(opened.aclose())


turn = agent_turn  # one agent run on a fresh event loop


def spawn(*args: str) -> Any:
    """Run ``maf_support.py <args>`` in a new Python process; its JSON result."""
    support = Path(__file__).with_name("maf_support.py")
    child = subprocess.run(
        [sys.executable, str(support), *args],
        check=False, capture_output=True, text=True, timeout=180, env={**os.environ},
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    for problem in LOOP_PROBLEMS:
        assert problem not in child.stderr
    return json.loads(child.stdout.strip().splitlines()[-1])


def turn_in_thread(
    provider: ChatkeepHistoryProvider, base_url: str, session_id: str, text: str
) -> str:
    """One agent run on another thread with its own event loop."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["reply"] = turn(provider, base_url, session_id, text)
        except BaseException as exc:  # re-raised in the test's thread
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(60)
    if "error" in result:
        raise result["error"]
    return str(result["reply"])


@pytest.mark.usefixtures("no_loop_problems")
def test_a_multi_turn_conversation_with_a_tool_call(
    agent_store_url: str, provider: ChatkeepHistoryProvider, server: FakeModelServer
) -> None:
    url, session_id = server.base_url, "conversation-" + uuid.uuid4().hex
    first = turn(provider, url, session_id, "My name is Ada.")
    assert first == "[seen 1] first: 'My name is Ada.' | latest: 'My name is Ada.'"

    second = turn_in_thread(provider, url, session_id, WEATHER)
    # The model called the tool, MAF ran it, and the model read its result, with the first
    # turn loaded from the store.
    assert second.startswith(f"[seen 5] first: 'My name is Ada.' | latest: {WEATHER!r}")
    assert '"temperature_c": -3.5' in second

    third = turn(provider, url, session_id, "What is my name?")
    assert third.startswith("[seen 7] first: 'My name is Ada.' | latest: 'What is my name?'")

    # What the store holds: the whole conversation, tool call and result included, as
    # chatkeep messages readable by any chatkeep tool.
    store = open_store(agent_store_url)
    try:
        view = read_view(store, session_id)
    finally:
        store.close()
    kinds = [(m.role, [c.type for c in m.contents]) for m in view]
    assert kinds == [
        ("user", ["text"]),
        ("assistant", ["text"]),
        ("user", ["text"]),
        ("assistant", ["function_call"]),
        ("tool", ["function_result"]),
        ("assistant", ["text"]),
        ("user", ["text"]),
        ("assistant", ["text"]),
    ]
    call = view[3].contents[0]
    assert call.name == "weather"  # type: ignore[union-attr]
    assert json.loads(call.arguments) == {"city": "Oslo"}  # type: ignore[union-attr, arg-type]
    # Every request after the first carried the stored history.
    sent = [len(request.body["messages"]) for request in server.requests_for("chat.completions")]
    assert sent == [2, 4, 6, 8]  # the system instructions, then the history and the request


@pytest.mark.usefixtures("no_loop_problems")
def test_a_second_process_resumes_the_session_by_its_id(
    agent_store_url: str, provider: ChatkeepHistoryProvider, server: FakeModelServer
) -> None:
    session_id = "resumed-" + uuid.uuid4().hex
    turn(provider, server.base_url, session_id, "My name is Ada.")
    turn(provider, server.base_url, session_id, WEATHER)
    asyncio.run(provider.aclose())  # this process is done with the store

    result = spawn("resume", agent_store_url, server.base_url, session_id, "What is my name?")
    assert result["reply"].startswith(
        "[seen 7] first: 'My name is Ada.' | latest: 'What is my name?'"
    )
    assert result["stored"][0] == "My name is Ada."
    assert len(result["stored"]) == 8


def test_many_loops_and_threads_share_one_provider(
    loop_store_url: str, server: FakeModelServer
) -> None:
    # Each request handler of a threaded server runs its own loop: the store's async
    # clients must follow (a pool bound to a closed loop is the classic failure). Run in a
    # process of its own, so that what a backend leaves to the garbage collector is seen
    # here and nowhere else.
    result = spawn("many-loops", loop_store_url, server.base_url)
    assert result["problems"] == []
    assert len(result["texts"]) == 4
    for texts in result["texts"].values():
        assert texts[::2] == ["hello", "again"]


@pytest.mark.usefixtures("no_loop_problems")
def test_streaming_runs_store_the_same_history(
    provider: ChatkeepHistoryProvider, server: FakeModelServer
) -> None:
    session_id = "stream-" + uuid.uuid4().hex

    async def streamed(text: str) -> str:
        async with http_client(server.base_url) as http:
            agent = make_agent(provider, http)
            session = agent.create_session(session_id=session_id)
            stream = agent.run(text, session=session, stream=True)
            pieces = [update.text async for update in stream]
            await stream.get_final_response()
            return "".join(pieces)

    assert asyncio.run(streamed("My name is Ada.")).startswith("[seen 1]")
    assert asyncio.run(streamed("And now?")).startswith("[seen 3] first: 'My name is Ada.'")
    stored = asyncio.run(provider.get_messages(session_id))
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]


def test_the_provider_is_what_the_agent_uses(
    provider: ChatkeepHistoryProvider, server: FakeModelServer
) -> None:
    # With a history provider configured, MAF adds no in-memory one of its own.
    async def go() -> list[type]:
        async with http_client(server.base_url) as http:
            agent = make_agent(provider, http)
            session = agent.create_session(session_id="only-" + uuid.uuid4().hex)
            await agent.run("hi", session=session)
            return [type(p) for p in agent.context_providers]

    assert asyncio.run(go()) == [ChatkeepHistoryProvider]
