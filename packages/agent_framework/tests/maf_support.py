"""Helpers for the adapter's tests, importable by name (also from spawned processes).

``python maf_support.py resume <store-url> <model-base-url> <session-id> <text>`` is the
"second process" of the resume test: it builds a fresh MAF ``Agent`` over the store and
runs one more turn of an existing session, known by its id alone, and prints a JSON line
with the reply and the session's stored texts.

``python maf_support.py many-loops <store-url> <model-base-url>`` runs agent turns on one
shared provider from many event loops (one ``asyncio.run`` per turn, then four threads
with their own loops at once) and prints a JSON line with what went wrong: exceptions,
warnings, unraisable exceptions from finalizers (an unclosed transport of a closed loop)
and log lines about closed or foreign loops, all collected until the interpreter has
collected its garbage. In a process of its own, nothing it leaves behind can surface in
another test.
"""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from collections.abc import Awaitable
from typing import Any, TypeVar, cast

T = TypeVar("T")


def run(coroutine: Awaitable[T]) -> T:
    """Each test drives its coroutines on a fresh event loop, as an application would."""
    return asyncio.run(cast("Any", coroutine))


#: What a backend's async client says when used across event loops; the tests turn these
#: (and unraisable exceptions in finalizers) into failures.
LOOP_PROBLEMS = (
    "Event loop is closed",
    "attached to a different loop",
    "belongs to a different loop",
    "loop is closed",
    "Task was destroyed but it is pending",
)


def weather(city: str) -> str:
    """The weather tool of the agent tests (deterministic)."""
    return json.dumps({"city": city, "temperature_c": -3.5, "sky": "snow"})


def make_agent(provider: Any, http: Any) -> Any:
    """A MAF ``Agent`` with MAF's OpenAI chat client on the fake model, a ``weather`` tool
    and ``provider``; ``http`` is the ``openai.AsyncOpenAI`` it sends with. Make one per
    event loop and close ``http`` before the loop ends: the SDK's HTTP client belongs to
    the loop it was first used on (the SDK's rule, not chatkeep's)."""
    from agent_framework import Agent, tool
    from agent_framework.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient("fake-model", async_client=http)
    return Agent(
        client,
        "You are a weather assistant.",
        tools=[tool(weather, approval_mode="never_require")],
        context_providers=[provider],
    )


def http_client(base_url: str) -> Any:
    """The OpenAI SDK's async client for the fake model (no retries: failures show)."""
    import openai

    return openai.AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0)


async def _resume(store_url: str, base_url: str, session_id: str, text: str) -> dict[str, Any]:
    from chatkeep.agent_framework import ChatkeepHistoryProvider

    provider = ChatkeepHistoryProvider(url=store_url)
    try:
        async with http_client(base_url) as http:
            agent = make_agent(provider, http)
            session = agent.create_session(session_id=session_id)
            reply = await agent.run(text, session=session)
        stored = await provider.get_messages(session_id)
        return {"reply": reply.text, "stored": [m.text for m in stored]}
    finally:
        await provider.aclose()


def agent_turn(provider: Any, base_url: str, session_id: str, text: str) -> str:
    """One agent run on a fresh event loop (a new Agent and HTTP client: the provider is
    what is shared), as a script or a request handler does it."""

    async def go() -> str:
        async with http_client(base_url) as http:
            agent = make_agent(provider, http)
            session = agent.create_session(session_id=session_id)
            reply = await agent.run(text, session=session)
            return str(reply.text)

    return asyncio.run(go())


def _many_loops(store_url: str, base_url: str) -> dict[str, Any]:
    import gc
    import logging
    import threading
    import uuid

    from chatkeep.agent_framework import ChatkeepHistoryProvider

    problems: list[str] = []

    def unraisable(info: Any) -> None:
        problems.append(
            f"unraisable in {info.object!r}: {info.exc_type.__name__}: {info.exc_value}"
        )

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if any(problem in message for problem in LOOP_PROBLEMS):
                problems.append(f"log {record.name}: {message.splitlines()[0]}")

    def scenario() -> dict[str, list[str]]:
        provider = ChatkeepHistoryProvider(url=store_url)
        sessions = [f"loop-{n}-{uuid.uuid4().hex[:8]}" for n in range(4)]
        texts: dict[str, list[str]] = {}
        try:
            for session_id in sessions:
                agent_turn(provider, base_url, session_id, "hello")

            def worker(session_id: str) -> None:
                try:
                    agent_turn(provider, base_url, session_id, "again")
                except BaseException as exc:  # reported below
                    problems.append(f"{session_id}: {type(exc).__name__}: {exc}")

            threads = [threading.Thread(target=worker, args=(s,)) for s in sessions]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            for session_id in sessions:
                stored = asyncio.run(provider.get_messages(session_id))
                texts[session_id] = [m.text for m in stored]
        finally:
            asyncio.run(provider.aclose())
        return texts

    sys.unraisablehook = unraisable
    logging.getLogger().addHandler(Lines(logging.WARNING))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        texts = scenario()
        gc.collect()  # the provider, its store and what ended loops left: finalized now
    problems += [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if not issubclass(w.category, DeprecationWarning)
    ]
    return {"problems": problems, "texts": texts}


def main(argv: list[str]) -> int:
    """The spawned processes of the resume and many-loops tests."""
    command, *args = argv
    if command == "resume":
        store_url, base_url, session_id, text = args
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            result = asyncio.run(_resume(store_url, base_url, session_id, text))
    elif command == "many-loops":
        result = _many_loops(*args)
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
