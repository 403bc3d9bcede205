"""Helpers for the adapter's tests, importable by name (also from spawned processes).

``python maf_support.py resume <store-url> <model-base-url> <session-id> <text>`` is the
"second process" of the resume test: it builds a fresh MAF ``Agent`` over the store and
runs one more turn of an existing session, known by its id alone, and prints a JSON line
with the reply and the session's stored texts.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import warnings
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

POSTGRES_URL = os.environ.get("CHATKEEP_TEST_POSTGRES_URL") or (
    "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("CHATKEEP_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"

#: Warnings a backend's async client leaves when used across event loops; the tests turn
#: them (and unraisable exceptions in finalizers) into failures.
LOOP_PROBLEMS = ("Event loop is closed", "attached to a different loop")


def with_query(url: str, **params: object) -> str:
    """``url`` with ``params`` added to (or replacing those in) its query string."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update({key: str(value) for key, value in params.items()})
    return urlunsplit(parts._replace(query=urlencode(query)))


def weather(city: str) -> str:
    """The weather tool of the agent tests (deterministic)."""
    return json.dumps({"city": city, "temperature_c": -3.5, "sky": "snow"})


def make_agent(store_url: str, base_url: str) -> tuple[Any, Any]:
    """A MAF ``Agent`` with MAF's OpenAI chat client on the fake model, a ``weather``
    tool, and a ``ChatkeepHistoryProvider`` on ``store_url``: ``(agent, provider)``."""
    from agent_framework import Agent, tool
    from agent_framework.openai import OpenAIChatCompletionClient

    from chatkeep.agent_framework import ChatkeepHistoryProvider

    client = OpenAIChatCompletionClient("fake-model", base_url=base_url, api_key="test-key")
    provider = ChatkeepHistoryProvider(url=store_url)
    agent = Agent(
        client,
        "You are a weather assistant.",
        tools=[tool(weather, approval_mode="never_require")],
        context_providers=[provider],
    )
    return agent, provider


async def _resume(store_url: str, base_url: str, session_id: str, text: str) -> dict[str, Any]:
    agent, provider = make_agent(store_url, base_url)
    try:
        session = agent.create_session(session_id=session_id)
        reply = await agent.run(text, session=session)
        stored = await provider.get_messages(session_id)
        return {"reply": reply.text, "stored": [m.text for m in stored]}
    finally:
        await provider.aclose()


def main(argv: list[str]) -> int:
    """The second process of the resume test."""
    command, store_url, base_url, session_id, text = argv
    assert command == "resume", command
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        result = asyncio.run(_resume(store_url, base_url, session_id, text))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
