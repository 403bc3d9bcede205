"""A Pydantic AI conversation is a chatkeep session like any other: ``chatkeep sessions
list`` and ``show`` read it, ``chatkeep export`` writes it, ``chatkeep migrate`` copies it
to another backend, and the adapter on the destination loads it exactly, forks included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart

from chatkeep.pydantic_ai import ChatkeepConversationStore

pytestmark = pytest.mark.anyio

CLI = Path(sys.executable).with_name("chatkeep")


def cli(*args: str) -> str:
    done = subprocess.run(
        [str(CLI), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_show_export_and_migrate(tmp_path: Path, postgres_url: str) -> None:
    source = f"sqlite:///{tmp_path / 'chats.db'}"
    messages = [
        ModelRequest(parts=[UserPromptPart("What's the weather in Oslo?")]),
        ModelResponse(parts=[ToolCallPart("weather", {"city": "Oslo"}, "call-1")]),
        ModelResponse(parts=[TextPart("Sunny and 21 °C.")]),
    ]
    async with ChatkeepConversationStore(url=source) as store:
        await store.save(Conversation(messages=messages, conversation_id="trip"), scope="ada")
        await store.fork("trip", at=1, new_conversation_id="trip-2")
        expected = await store.load("trip")
        expected_fork = await store.load("trip-2")
    listed = cli("sessions", "list", "--url", source)
    assert "pydantic-ai:trip" in listed and "pydantic-ai:trip-2" in listed
    shown = cli("sessions", "show", "pydantic-ai:trip", "--url", source)
    assert "What's the weather in Oslo?" in shown and "Sunny and 21 °C." in shown
    assert "weather" in shown  # the tool call
    # The export keeps a JSON record as JSON (format 2): the reply is greppable as text.
    lines = [json.loads(line) for line in cli("export", "--url", source).splitlines() if line]
    records = [line["json"] for line in lines if "json" in line]
    assert any("Sunny and 21 °C." in json.dumps(r, ensure_ascii=False) for r in records)
    cli("migrate", source, postgres_url)
    async with ChatkeepConversationStore(url=postgres_url) as copy:
        assert await copy.load("trip", scope="ada") == expected
        assert await copy.load("trip-2") == expected_fork
        record = await copy.read_record("trip-2")
        assert record is not None and record.forked_from == "trip"
