"""A real LangGraph agent (StateGraph + MessagesState + ToolNode, a deterministic model)
on the saver: several turns, a restart in another process, time travel."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from lg_support import build_graph, run_turns

from chatkeep.langgraph import ChatkeepSaver


def _texts(state: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in state["messages"]]


def test_agent_turns_with_tools(open_saver: Any) -> None:
    saver = open_saver()
    graph = build_graph(saver)
    config = {"configurable": {"thread_id": "chat-1"}}

    first = graph.invoke({"messages": [HumanMessage("hello")]}, config)
    assert _texts(first)[-1] == "turn 1: you said 'hello'; first was 'hello'"
    second = graph.invoke({"messages": [HumanMessage("weather in Oslo?")]}, config)
    kinds = [type(m) for m in second["messages"]]
    assert kinds == [HumanMessage, AIMessage, HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert second["messages"][-1].content == "The forecast: sunny in Oslo, 14 degrees"
    third = graph.invoke({"messages": [HumanMessage("thanks")]}, config)
    assert _texts(third)[-1] == "turn 3: you said 'thanks'; first was 'hello'"

    # A fresh saver (another handle, no cache) sees the same state.
    reopened = build_graph(open_saver())
    state = reopened.get_state(config)
    assert [m.id for m in state.values["messages"]] == [m.id for m in third["messages"]]
    assert state.values["messages"] == third["messages"]
    assert state.next == ()


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"], indirect=True)
def test_conversation_continues_in_another_process(url: str, prefix: str) -> None:
    thread_id = f"restart-{uuid.uuid4().hex[:8]}"
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        before = pool.apply(
            run_turns, (url, prefix, thread_id, ["hi, I am Ada", "weather in Rome"])
        )
    assert before == [
        "turn 1: you said 'hi, I am Ada'; first was 'hi, I am Ada'",
        "The forecast: sunny in Rome, 14 degrees",
    ]
    with context.Pool(1) as pool:  # a new process: nothing but the store carries over
        after = pool.apply(run_turns, (url, prefix, thread_id, ["who am I?"]))
    assert after == ["turn 3: you said 'who am I?'; first was 'hi, I am Ada'"]

    with ChatkeepSaver(url=url, prefix=prefix) as saver:
        state = build_graph(saver).get_state({"configurable": {"thread_id": thread_id}})
        assert len(state.values["messages"]) == 8  # 3 turns, one with a tool round trip


def test_time_travel(open_saver: Any) -> None:
    saver = open_saver()
    graph = build_graph(saver)
    config = {"configurable": {"thread_id": "travel"}}
    for text in ["one", "two", "three"]:
        graph.invoke({"messages": [HumanMessage(text)]}, config)

    history = list(graph.get_state_history(config))
    assert [s.metadata["step"] for s in history] == list(range(len(history) - 2, -2, -1))
    # The checkpoint right after turn one's answer: two messages, nothing left to run.
    after_one = next(s for s in history if len(s.values.get("messages", [])) == 2 and s.next == ())
    assert after_one.metadata["source"] == "loop"

    # Continue from there: the new turn sees turn one only, and forks the history.
    forked = graph.invoke({"messages": [HumanMessage("again")]}, after_one.config)
    assert _texts(forked) == [
        "one",
        "turn 1: you said 'one'; first was 'one'",
        "again",
        "turn 2: you said 'again'; first was 'one'",
    ]
    latest = graph.get_state(config)
    assert _texts(latest.values) == _texts(forked)
    assert latest.parent_config is not None
    # The old branch is still there, untouched.
    old = graph.get_state(history[0].config)
    assert len(old.values["messages"]) == 6
    # Replaying an older checkpoint with no input re-runs what was next from it.
    before_answer = next(s for s in history if s.next == ("agent",) and s.metadata["step"] == 0)
    replayed = graph.invoke(None, before_answer.config)
    assert _texts(replayed)[-1] == "turn 1: you said 'one'; first was 'one'"


def _history(graph: Any, config: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (
            _texts(s.values) if s.values else [],
            s.next,
            s.metadata["source"],
            s.metadata["step"],
            [t.name for t in s.tasks],
            s.parent_config is None,
        )
        for s in graph.get_state_history(config)
    ]


def test_same_history_as_langgraphs_in_memory_saver(open_saver: Any) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    histories = []
    for saver in (InMemorySaver(), open_saver()):
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": "parity"}}
        for text in ["hi", "weather in Bergen", "bye"]:
            graph.invoke({"messages": [HumanMessage(text)]}, config)
        past = list(graph.get_state_history(config))[4].config
        graph.invoke({"messages": [HumanMessage("branch")]}, past)
        histories.append(_history(graph, config))
    assert histories[0] == histories[1]
    assert len(histories[0]) == 14


def test_async_graph(open_saver: Any) -> None:
    saver = open_saver()
    graph = build_graph(saver)
    config = {"configurable": {"thread_id": "async-1"}}

    async def main() -> list[str]:
        await graph.ainvoke({"messages": [HumanMessage("weather in Lima")]}, config)
        state = await graph.ainvoke({"messages": [HumanMessage("ok")]}, config)
        history = [s async for s in graph.aget_state_history(config, limit=2)]
        assert len(history) == 2
        return _texts(state)

    texts = asyncio.run(main())
    assert texts[-1] == "turn 2: you said 'ok'; first was 'weather in Lima'"
    assert texts[3] == "The forecast: sunny in Lima, 14 degrees"


def test_interrupt_and_resume(open_saver: Any) -> None:
    """A human-in-the-loop interrupt is a special pending write; resuming uses it."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.types import Command, interrupt

    def ask(state: MessagesState) -> dict[str, Any]:
        answer = interrupt("approve?")
        return {"messages": [AIMessage(f"approved: {answer}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    graph = builder.compile(checkpointer=open_saver())
    config = {"configurable": {"thread_id": "hitl"}}
    paused = graph.invoke({"messages": [HumanMessage("deploy")]}, config)
    assert paused["__interrupt__"][0].value == "approve?"
    # Another saver handle (as after a restart) resumes it.
    resumed_graph = builder.compile(checkpointer=open_saver())
    done = resumed_graph.invoke(Command(resume="yes"), config)
    assert _texts(done) == ["deploy", "approved: yes"]
