"""What the Runner tests share with the processes they spawn: a deterministic model, an
agent with a tool, and one turn through ADK's ``Runner``."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from pydantic import PrivateAttr

from chatkeep.google_adk import ChatkeepSessionService

APP = "weather_app"
USER = "ada"


def weather(city: str) -> dict[str, str]:
    """Today's weather in a city."""
    return {"city": city, "forecast": f"sunny in {city}"}


class ScriptedLlm(BaseLlm):
    """A model that answers from a script and records what it was asked.

    A user message starting with ``weather:`` gets a call of the ``weather`` tool; the
    tool's result gets a text answer quoting it; anything else gets ``"you said: ..."``
    and how many user messages the conversation held so far (what it saw of the history).
    """

    model: str = "scripted"
    _requests: list[LlmRequest] = PrivateAttr(default_factory=list)

    @property
    def requests(self) -> list[LlmRequest]:
        return self._requests

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._requests.append(llm_request)
        last = llm_request.contents[-1]
        part = last.parts[-1] if last.parts else types.Part()
        if part.function_response is not None:
            forecast = (part.function_response.response or {}).get("forecast")
            reply = types.Part(text=f"The forecast: {forecast}.")
        elif part.text and part.text.startswith("weather:"):
            city = part.text.split(":", 1)[1].strip()
            call = types.FunctionCall(name="weather", args={"city": city})
            reply = types.Part(function_call=call)
        else:
            said = sum(
                1
                for c in llm_request.contents
                if c.role == "user" and any(p.text for p in c.parts or [])
            )
            reply = types.Part(text=f"you said: {part.text} ({said} user messages so far)")
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=len(llm_request.contents),
            candidates_token_count=1,
            total_token_count=len(llm_request.contents) + 1,
        )
        yield LlmResponse(content=types.Content(role="model", parts=[reply]), usage_metadata=usage)


def make_runner(service: ChatkeepSessionService) -> tuple[Runner, ScriptedLlm]:
    model = ScriptedLlm()
    agent = LlmAgent(
        name="assistant",
        model=model,
        instruction="Answer briefly.",
        tools=[weather],
        output_key="last_answer",
    )
    return Runner(agent=agent, app_name=APP, session_service=service), model


async def turn(runner: Runner, session_id: str, text: str) -> list[Any]:
    """One user message through the runner; the events it produced."""
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [
        event
        async for event in runner.run_async(
            user_id=USER, session_id=session_id, new_message=message
        )
    ]


async def resume(url: str, session_id: str, text: str) -> dict[str, Any]:
    """In a new process: one more turn of an existing session, and what the model saw."""
    service = ChatkeepSessionService(url=url)
    try:
        runner, model = make_runner(service)
        events = await turn(runner, session_id, text)
        seen = [
            [part.text or "" for part in content.parts or []]
            for content in model.requests[-1].contents
        ]
        return {"answer": events[-1].content.parts[0].text, "seen": seen}
    finally:
        await service.close()


if __name__ == "__main__":  # python adk_support.py URL SESSION TEXT
    print(json.dumps(asyncio.run(resume(sys.argv[1], sys.argv[2], sys.argv[3]))))


# -- concurrent writers -----------------------------------------------------------------------


def share_state(urls: list[str], worker: int, count: int, start: Any) -> None:
    """A process of its own, for each store in ``urls``: a session of its own for user
    ``USER``, then ``count`` events each setting a ``user:`` and an ``app:`` key of this
    worker's, as fast as it can once every worker is ready (``start``: a barrier)."""
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions

    async def main(url: str) -> None:
        service = ChatkeepSessionService(url=url)
        session = await service.create_session(
            app_name=APP, user_id=USER, session_id=f"worker-{worker}"
        )
        start.wait()
        for step in range(count):
            state = {f"user:w{worker}-{step}": step, f"app:w{worker}-{step}": step}
            await service.append_event(
                session, Event(author="user", actions=EventActions(state_delta=state))
            )
        await service.close()

    for url in urls:
        asyncio.run(main(url))


# -- a store that counts what it is asked ---------------------------------------------------


class CountingBackend:
    """Forwards the store hooks to an open store and counts the calls and the records
    read (``hide``: capabilities to leave out, e.g. ``{"conditional"}``)."""

    def __init__(self, inner: Any, hide: frozenset[str] = frozenset()) -> None:
        self.inner = inner
        self.capabilities = inner.capabilities - hide
        self.calls: dict[str, int] = {}
        self.records_read = 0

    def _count(self, hook: str) -> None:
        self.calls[hook] = self.calls.get(hook, 0) + 1

    def reset(self) -> None:
        self.calls.clear()
        self.records_read = 0

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> Any:
        self._count("read")
        records = self.inner.read(session_id, start, stop)
        self.records_read += len(records)
        return records

    def append(self, session_id: str, records: Any) -> None:
        self._count("append")
        self.inner.append(session_id, records)

    def append_if(self, session_id: str, records: Any, after: str | None) -> None:
        self._count("append_if")
        self.inner.append_if(session_id, records, after=after)

    def delete(self, session_id: str) -> None:
        self._count("delete")
        self.inner.delete(session_id)

    def list_sessions(self, prefix: str | None = None) -> Any:
        self._count("list_sessions")
        return self.inner.list_sessions(prefix)


def counting(url: str, hide: frozenset[str] = frozenset()) -> tuple[Any, CountingBackend]:
    """A store over ``url`` that counts (and its counter)."""
    from chatkeep.core import Store, open_store

    backend = CountingBackend(open_store(url), hide)
    return Store(backend, name="counting", capabilities=backend.capabilities), backend
