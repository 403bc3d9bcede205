"""Once on S3 (moto's server) and Azure Blob (Azurite): a conversation through the SDK's
runner, then the session operations, so the adapter is known to work on every in-repo
backend."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from chatkeep.openai_agents import ChatkeepSession


@function_tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("error")]


@pytest.mark.parametrize("backend", ["s3", "azure"])
async def test_conversation_and_operations(
    backend: str, request: pytest.FixtureRequest, sid: str
) -> None:
    url: str = request.getfixturevalue(f"{backend}_url")
    async with ChatkeepSession(sid, url=url) as session:
        model = ScriptedModel()
        agent = Agent(name="t", model=model, tools=[weather])
        model.enqueue([function_call("weather", {"city": "Oslo"}, call_id="call-1")])
        model.enqueue([assistant_message("Sunny.", item_id="1")])
        await Runner.run(agent, "Weather in Oslo?", session=session)
        model.enqueue([assistant_message("Oslo.", item_id="1")])
        await Runner.run(agent, "Which city?", session=session)
        items: list[Any] = await session.get_items()
        assert model.calls[-1].input == items[:-1]
        assert len(items) == 6
        assert await session.get_items(limit=2) == items[-2:]
        assert await session.pop_item() == items[-1]
        assert await session.get_items() == items[:-1]
        await session.clear_session()
        assert await session.get_items() == []
