"""LlamaIndex itself over ``ChatkeepChatStore``: a ``SimpleChatEngine`` and a
``FunctionAgent`` with a tool, each with a ``ChatMemoryBuffer`` and a mock LLM, run a
multi-turn conversation on SQLite and PostgreSQL, and a second process resumes it; two
processes deleting the last message at once remove two different messages (SQLite,
PostgreSQL, Redis)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockFunctionCallingLLM, MockLLMWithChatMemoryOfLastCall
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.tools import FunctionTool

from chatkeep.core import read_view
from chatkeep.llama_index import ChatkeepChatStore

pytestmark = pytest.mark.anyio

# The agent's helpers, shared with the resuming process (the script below pastes them in).
AGENT_HELPERS = '''
def weather(city: str = "Oslo") -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def respond(messages, **kwargs):
    last = messages[-1]
    if last.role == MessageRole.TOOL:
        return ChatMessage(role="assistant", content=f"Answer: {last.content}")
    if kwargs.get("tools") and "weather" in (last.content or ""):
        call = ToolCallBlock(
            tool_call_id=f"call-{len(messages)}", tool_name="weather", tool_kwargs={"city": "Oslo"}
        )
        return ChatMessage(role="assistant", blocks=[call])
    return ChatMessage(role="assistant", content=f"seen {len(messages)}")
'''
namespace: dict[str, Any] = {
    "ChatMessage": ChatMessage,
    "MessageRole": MessageRole,
    "ToolCallBlock": ToolCallBlock,
}
exec(AGENT_HELPERS, namespace)  # our own helper source, run in both processes


def _run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


ENGINE_TURN = """
import json, sys
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockLLMWithChatMemoryOfLastCall
from llama_index.core.memory import ChatMemoryBuffer
from chatkeep.llama_index import ChatkeepChatStore

chat_store = ChatkeepChatStore(url=sys.argv[1])
llm = MockLLMWithChatMemoryOfLastCall()
memory = ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key=sys.argv[2])
engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
engine.chat(sys.argv[3])
print(json.dumps([m.content for m in llm.last_chat_messages]))
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_chat_engine_conversation_resumed_by_another_process(
    backend: str, request: pytest.FixtureRequest, sid: str
) -> None:
    url: str = request.getfixturevalue(f"{backend}_url")
    chat_store = ChatkeepChatStore(url=url)
    llm = MockLLMWithChatMemoryOfLastCall()
    memory = ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key=sid)
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    first = engine.chat("first question")
    engine.chat("second question")
    assert llm.last_chat_messages is not None
    assert [m.content for m in llm.last_chat_messages] == [
        "first question",
        str(first),
        "second question",
    ]
    seen = json.loads(_run(ENGINE_TURN, url, sid, "third question"))
    assert seen[:3] == ["first question", str(first), "second question"]
    assert seen[-1] == "third question" and len(seen) == 5
    stored = chat_store.get_messages(sid)
    assert [m.role for m in stored] == ["user", "assistant"] * 3
    assert len(read_view(chat_store.store, sid)) == 6, "chatkeep reads the same conversation"
    engine.reset()
    assert chat_store.get_messages(sid) == []
    chat_store.close()


AGENT_TURN = (
    """
import asyncio, json, sys
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.tools import FunctionTool
from chatkeep.llama_index import ChatkeepChatStore
"""
    + AGENT_HELPERS
    + """
async def main():
    chat_store = ChatkeepChatStore(url=sys.argv[1])
    memory = ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key=sys.argv[2])
    llm = MockFunctionCallingLLM(response_generator=respond, is_chat_model=True)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(weather)], llm=llm)
    print(json.dumps(str(await agent.run(user_msg=sys.argv[3], memory=memory))))

asyncio.run(main())
"""
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_function_agent_with_a_tool_resumed_by_another_process(
    backend: str, request: pytest.FixtureRequest, sid: str
) -> None:
    url: str = request.getfixturevalue(f"{backend}_url")
    chat_store = ChatkeepChatStore(url=url)
    memory = ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key=sid)
    llm = MockFunctionCallingLLM(response_generator=namespace["respond"], is_chat_model=True)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(namespace["weather"])], llm=llm)
    assert str(await agent.run(user_msg="weather please", memory=memory)) == (
        "Answer: sunny in Oslo"
    )
    stored = await chat_store.aget_messages(sid)
    assert [m.role.value for m in stored] == ["user", "assistant", "tool", "assistant"]
    call = stored[1].blocks[0]
    assert isinstance(call, ToolCallBlock) and call.tool_name == "weather"
    assert stored[2].additional_kwargs["tool_call_id"] == call.tool_call_id
    # Another process goes on with the same memory: the model sees the whole history.
    assert json.loads(_run(AGENT_TURN, url, sid, "thanks")) == "seen 5"
    again = await chat_store.aget_messages(sid)
    assert again[:4] == stored and [m.content for m in again[4:]] == ["thanks", "seen 5"]
    chat_store.close()


DELETER = """
import json, sys
from chatkeep.llama_index import ChatkeepChatStore

jobs = json.loads(sys.argv[1])
stores = [ChatkeepChatStore(url=url) for url, _ in jobs]
print("ready", flush=True)
for (url, sid), chat_store in zip(jobs, stores):
    sys.stdin.readline()  # go
    got = [chat_store.delete_last_message(sid) for _ in range(8)]
    print(json.dumps([None if m is None else m.content for m in got]), flush=True)
"""

RACE_BACKENDS = ("sqlite", "postgres", "redis")


def test_two_processes_deleting_the_last_message_remove_different_ones(
    request: pytest.FixtureRequest, sid: str
) -> None:
    """On each backend this process and another delete the last message 8 times each,
    at once, from 16: each message is removed once (``conditional`` appends)."""
    urls = [request.getfixturevalue(f"{backend}_url") for backend in RACE_BACKENDS]
    stores = [ChatkeepChatStore(url=url) for url in urls]
    for chat_store in stores:
        chat_store.set_messages(sid, [ChatMessage(role="user", content=f"m{i}") for i in range(16)])
    jobs = json.dumps([[url, sid] for url in urls])
    child = subprocess.Popen(
        [sys.executable, "-c", DELETER, jobs],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "ready"
        for backend, chat_store in zip(RACE_BACKENDS, stores, strict=True):
            child.stdin.write("go\n")
            child.stdin.flush()
            mine = [chat_store.delete_last_message(sid) for _ in range(8)]
            theirs = json.loads(child.stdout.readline())
            removed = [m.content for m in mine if m is not None] + theirs
            assert sorted(removed) == sorted(f"m{i}" for i in range(16)), backend
            assert chat_store.get_messages(sid) == [], backend
    finally:
        child.stdin.close()
        child.wait(timeout=120)
        for chat_store in stores:
            chat_store.close()
    assert child.returncode == 0, child.stderr.read() if child.stderr else ""
