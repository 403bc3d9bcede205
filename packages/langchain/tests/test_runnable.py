"""LangChain's own runner for chat histories, ``RunnableWithMessageHistory``, with a
deterministic chat model (langchain-core's ``FakeMessagesListChatModel``) and a tool call,
on chatkeep stores: sync, async and streaming; per-thread event loops; a second process
resuming the conversation. Adapted from langchain-core's ``tests/unit_tests/runnables/
test_history.py``, which runs it on an in-memory history.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool

from chatkeep.core import FunctionCallContent, FunctionResultContent, Store, read_view
from chatkeep.langchain import ChatkeepChatMessageHistory

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("error"),
    # RunnableWithMessageHistory itself is deprecated (since langchain-core 1.3.3).
    pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated"),
]
MODES = ["invoke", "ainvoke", "stream", "astream"]


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


CALL = AIMessage(
    content="", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "call-1"}]
)


@pytest.fixture(autouse=True)
def no_loop_errors(caplog: pytest.LogCaptureFixture) -> Any:
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        yield
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def chain(store: Store, responses: list[BaseMessage]) -> tuple[Any, list[list[BaseMessage]]]:
    model = FakeMessagesListChatModel(responses=responses)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are brief."), MessagesPlaceholder("history"), MessagesPlaceholder("input")]
    )
    seen: list[list[BaseMessage]] = []

    def record(value: Any) -> Any:
        seen.append(value.to_messages())
        return value

    runnable = prompt | RunnableLambda(record) | model
    with_history = RunnableWithMessageHistory(
        runnable,  # type: ignore[arg-type]
        lambda session_id: ChatkeepChatMessageHistory(session_id, store=store),
        input_messages_key="input",
        history_messages_key="history",
    )
    return with_history, seen


async def call(mode: str, runnable: Any, value: Any, config: Any) -> Any:
    if mode == "invoke":
        return await asyncio.to_thread(runnable.invoke, value, config)
    if mode == "ainvoke":
        return await runnable.ainvoke(value, config)
    if mode == "stream":
        chunks = await asyncio.to_thread(lambda: list(runnable.stream(value, config)))
    else:
        chunks = [chunk async for chunk in runnable.astream(value, config)]
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


@pytest.mark.parametrize("mode", MODES)
async def test_conversation_with_a_tool_call(mode: str, store: Store, sid: str) -> None:
    runnable, seen = chain(
        store, [CALL, AIMessage(content="It is sunny in Oslo."), AIMessage(content="Oslo.")]
    )
    config = {"configurable": {"session_id": sid}}
    first = await call(
        mode, runnable, {"input": [HumanMessage(content="Weather in Oslo?")]}, config
    )
    assert first.tool_calls[0]["args"] == {"city": "Oslo"}
    result = weather.invoke(first.tool_calls[0])  # the tool, run as LangChain runs it
    assert isinstance(result, ToolMessage)
    second = await call(mode, runnable, {"input": [result]}, config)
    assert second.content == "It is sunny in Oslo."
    third = await call(mode, runnable, {"input": [HumanMessage(content="Which city?")]}, config)
    assert third.content == "Oslo."

    history = ChatkeepChatMessageHistory(sid, store=store).messages
    assert [type(m).__name__ for m in history] == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "HumanMessage", "AIMessage",
    ]  # fmt: skip
    assert history[2] == result  # tool_call_id, status, name: all kept
    assert history[1].tool_calls == first.tool_calls  # type: ignore[attr-defined]
    # The model saw the stored history each time (after the system prompt).
    assert seen[-1][1:-1] == history[:-2]
    view = read_view(store, sid)
    assert isinstance(view[1].contents[-1], FunctionCallContent)
    assert isinstance(view[2].contents[0], FunctionResultContent)


def test_input_output_shapes(store: Store, sid: str) -> None:
    # langchain-core's own cases: messages in, a string key in, a message/dict out.
    echo = RunnableLambda(
        lambda messages: (
            "you said: "
            + "\n".join(str(m.content) for m in messages if isinstance(m, HumanMessage))
        )
    )
    factory: Callable[[str], ChatkeepChatMessageHistory] = lambda s: ChatkeepChatMessageHistory(  # noqa: E731
        s, store=store
    )
    plain = RunnableWithMessageHistory(echo, factory)  # type: ignore[arg-type]
    config: Any = {"configurable": {"session_id": sid}}
    assert plain.invoke([HumanMessage(content="hello")], config) == "you said: hello"
    assert plain.invoke([HumanMessage(content="good bye")], config) == "you said: hello\ngood bye"

    keyed = RunnableWithMessageHistory(
        RunnableLambda(
            lambda value: AIMessage(
                content="you said: "
                + "\n".join(
                    [str(m.content) for m in value["history"] if isinstance(m, HumanMessage)]
                    + [value["input"]]
                )
            )
        ),
        factory,  # type: ignore[arg-type]
        input_messages_key="input",
        history_messages_key="history",
    )
    other: Any = {"configurable": {"session_id": sid + "-keyed"}}
    assert keyed.invoke({"input": "hello"}, other) == AIMessage(content="you said: hello")
    assert keyed.invoke({"input": "good bye"}, other) == AIMessage(
        content="you said: hello\ngood bye"
    )
    assert ChatkeepChatMessageHistory(sid + "-keyed", store=store).messages == [
        HumanMessage(content="hello"),
        AIMessage(content="you said: hello"),
        HumanMessage(content="good bye"),
        AIMessage(content="you said: hello\ngood bye"),
    ]


def test_threads_with_their_own_loops(store: Store, sid: str) -> None:
    """ainvoke from threads that each run asyncio.run or a loop of their own: no loop
    errors or warnings from the store, whatever the backend."""
    failures: list[BaseException] = []

    def conversation(index: int) -> None:
        try:
            runnable, _ = chain(store, [AIMessage(content=f"reply {n}") for n in range(4)])
            config = {"configurable": {"session_id": f"{sid}-{index}"}}
            for n in range(2):
                asyncio.run(
                    runnable.ainvoke({"input": [HumanMessage(content=f"turn {n}")]}, config)
                )
            loop = asyncio.new_event_loop()
            try:
                for n in range(2, 4):
                    loop.run_until_complete(
                        runnable.ainvoke({"input": [HumanMessage(content=f"turn {n}")]}, config)
                    )
            finally:
                loop.close()
            assert len(ChatkeepChatMessageHistory(f"{sid}-{index}", store=store).messages) == 8
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
    import json, sys, warnings
    warnings.simplefilter("ignore")  # RunnableWithMessageHistory is deprecated
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables import RunnableLambda
    from langchain_core.runnables.history import RunnableWithMessageHistory
    from chatkeep.langchain import ChatkeepChatMessageHistory

    url, session_id = sys.argv[1], sys.argv[2]
    seen = []
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{q}")])
    model = FakeMessagesListChatModel(responses=[AIMessage(content="You asked about Oslo.")])
    runnable = RunnableWithMessageHistory(
        prompt | RunnableLambda(lambda v: seen.append(v.to_messages()) or v) | model,
        lambda s: ChatkeepChatMessageHistory(s, url=url),
        input_messages_key="q",
        history_messages_key="history",
    )
    out = runnable.invoke({"q": "Which city?"}, {"configurable": {"session_id": session_id}})
    print(json.dumps({"output": out.content, "seen": messages_to_dict(seen[-1])}))
    """
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_second_process_resumes(
    backend: str, request: pytest.FixtureRequest, sid: str, tmp_path: Path
) -> None:
    from langchain_core.messages import messages_from_dict

    url: str = request.getfixturevalue(f"{backend}_url")
    history = ChatkeepChatMessageHistory(sid, url=url)
    before = [
        HumanMessage(content="Weather in Oslo?"),
        CALL,
        ToolMessage("sunny", tool_call_id="call-1"),
        AIMessage("Sunny."),
    ]
    history.add_messages(before)
    history.close()
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
    assert messages_from_dict(answer["seen"])[:-1] == before
    again = ChatkeepChatMessageHistory(sid, url=url)
    assert len(again.messages) == 6
    again.close()
