"""Test helpers importable by name (tests and the processes they spawn): a deterministic
chat model, a real LangGraph agent graph, and a store wrapper that counts requests."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from chatkeep.core import Record, Store

# -- a deterministic chat model ---------------------------------------------------------


class ScriptedModel(BaseChatModel):
    """Asks for the ``weather`` tool when the user says "weather in <city>", reports the
    tool's answer, and otherwise replies with what it saw (so a resumed conversation shows
    that the earlier turns were loaded)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        last = messages[-1]
        humans = [m for m in messages if isinstance(m, HumanMessage)]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=f"The forecast: {last.content}")
        elif isinstance(last, HumanMessage) and "weather in " in str(last.content):
            city = str(last.content).split("weather in ", 1)[1].strip(" ?.")
            reply = AIMessage(
                content="",
                tool_calls=[
                    {"name": "weather", "args": {"city": city}, "id": f"call-{len(messages)}"}
                ],
            )
        else:
            first = humans[0].content if humans else ""
            reply = AIMessage(
                content=f"turn {len(humans)}: you said {last.content!r}; first was {first!r}"
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def weather(city: str) -> str:
    """The weather in a city (deterministic)."""
    return f"sunny in {city}, {len(city) + 10} degrees"


def build_graph(checkpointer: Any) -> Any:
    """A tool-calling agent: StateGraph over MessagesState with a ToolNode."""
    model = ScriptedModel()

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def run_turns(url: str, prefix: str, thread_id: str, texts: list[str]) -> list[str]:
    """Run ``texts`` as turns of one thread on a fresh saver; return the replies.

    Used in a spawned process to show a conversation continuing across processes.
    """
    from chatkeep.langgraph import ChatkeepSaver

    with ChatkeepSaver(url=url, prefix=prefix) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": thread_id}}
        replies = []
        for text in texts:
            state = graph.invoke({"messages": [HumanMessage(text)]}, config)
            replies.append(str(state["messages"][-1].content))
        return replies


# -- a store that counts what it is asked ------------------------------------------------


class Counting:
    """A backend forwarding to a :class:`Store`, counting requests and bytes appended.

    ``hide`` drops capabilities (``{"conditional"}`` runs the saver's fallback path).
    """

    def __init__(self, inner: Store, hide: frozenset[str] = frozenset()) -> None:
        self.inner = inner
        self.capabilities = inner.capabilities - hide
        self.calls: Counter[str] = Counter()
        self.appended_bytes = 0
        self.read_records = 0
        self.lock = threading.Lock()

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.appended_bytes = 0
            self.read_records = 0

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        records = self.inner.read(session_id, start, stop)
        with self.lock:
            self.calls["read"] += 1
            self.read_records += len(records)
        return records

    def append(self, session_id: str, records: list[Record]) -> None:
        with self.lock:
            self.calls["append"] += 1
            self.appended_bytes += sum(len(r.data) for r in records)
        self.inner.append(session_id, records)

    def append_if(self, session_id: str, records: list[Record], after: str | None) -> None:
        with self.lock:
            self.calls["append"] += 1
            self.appended_bytes += sum(len(r.data) for r in records)
        self.inner.append_if(session_id, records, after=after)

    def delete(self, session_id: str) -> None:
        with self.lock:
            self.calls["delete"] += 1
        self.inner.delete(session_id)

    def list_sessions(self, prefix: str | None = None) -> Iterator[str]:
        with self.lock:
            self.calls["list_sessions"] += 1
        return self.inner.list_sessions(prefix)

    def close(self) -> None:
        self.inner.close()


def counting_store(inner: Store, hide: frozenset[str] = frozenset()) -> tuple[Store, Counting]:
    """A :class:`Store` over ``inner`` that counts, and its counter."""
    counter = Counting(inner, hide)
    return Store(counter, name=f"counting-{inner.name}", capabilities=counter.capabilities), counter


# -- concurrent writers ---------------------------------------------------------------------


def hammer(
    url: str,
    prefix: str,
    thread_id: str,
    worker: int,
    count: int,
    hide_conditional: bool,
    start: Any = None,
) -> list[str]:
    """Put ``count`` chained checkpoints (each with one pending write) on one thread, as
    fast as possible; return the checkpoint ids acknowledged."""
    from langgraph.checkpoint.base import empty_checkpoint

    from chatkeep.core import open_store
    from chatkeep.langgraph import ChatkeepSaver

    inner = open_store(url)
    store = counting_store(inner, frozenset({"conditional"}))[0] if hide_conditional else inner
    saver = ChatkeepSaver(store=store, prefix=prefix)
    config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    version: str | None = None
    done = []
    saver.get_tuple(config)  # connected and warm before the race starts
    if start is not None:
        start()
    try:
        for step in range(count):
            checkpoint = empty_checkpoint()
            version = saver.get_next_version(version)
            checkpoint["channel_values"] = {f"w{worker}": step}
            checkpoint["channel_versions"] = {f"w{worker}": version}
            config = saver.put(
                config, checkpoint, {"step": step, "worker": worker}, {f"w{worker}": version}
            )
            saver.put_writes(config, [("note", f"{worker}:{step}")], f"task-{worker}-{step}")
            done.append(checkpoint["id"])
    finally:
        inner.close()
    return done


def hammer_in_process(
    queue: Any, start: Any, url: str, prefix: str, thread_id: str, worker: int, count: int,
    hide_conditional: bool,
) -> None:  # fmt: skip
    """:func:`hammer` in a spawned process, started together with its siblings."""

    def ready_then_wait() -> None:
        queue.put(("ready", None))
        start.wait(60)

    try:
        queue.put(
            (
                "done",
                hammer(url, prefix, thread_id, worker, count, hide_conditional, ready_then_wait),
            )
        )
    except BaseException as exc:
        queue.put(("error", f"{type(exc).__name__}: {exc}"))
