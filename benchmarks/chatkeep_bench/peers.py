"""Peer libraries doing the same turn on the same backend, through their public APIs.

Each peer is optional: :func:`optional` turns a missing package into an ``Unavailable``
row ("not installed") and a failure to set it up (a server feature it needs) into one that
says why, so the harness still runs.

What each peer's turn is (their documented way to load history before a model call and
store the exchange after it; ``[-50:]`` is applied by us where the API has no limit):

- OpenAI Agents SDK sessions: ``get_items(limit=50)`` + ``add_items([user, assistant])``
  (items are the SDK's input dicts, ``{"role": ..., "content": text}``; a tool exchange is
  a ``function_call`` item and its ``function_call_output``).
- LangChain message histories: ``history.messages[-50:]`` + ``add_messages([Human, AI])``.
- Microsoft Agent Framework history providers: ``get_messages(session_id)[-50:]`` +
  ``save_messages(session_id, [user, assistant])`` (what ``before_run``/``after_run`` call).

Every fifth exchange is a tool call and its result (:func:`.workload.exchange`), in each
framework's own form: an assistant message with one function call, a tool message with
its result.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Awaitable, Callable
from typing import Any

from chatkeep.core import new_id

from .variants import (
    AnyVariant,
    AsyncVariant,
    Kind,
    Level,
    Unavailable,
    Variant,
    batches,
    role_of,
)
from .workload import TOOL, WINDOW, arguments, call_id, exchange, message_dict, role, text

__all__ = [
    "AgentsSessions",
    "LangChainHistories",
    "MafProvider",
    "optional",
]


def optional(
    name: str, modules: list[str], package: str, build: Callable[[], AnyVariant | Unavailable]
) -> AnyVariant | Unavailable:
    """``build()`` when every module in ``modules`` is importable, else a "not installed"
    row naming ``package``."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        return Unavailable(name, "messages", "peer", f"not installed (pip install {package})")
    try:
        return build()
    except ImportError as exc:
        return Unavailable(name, "messages", "peer", f"not installed ({exc.name or exc})")


# -- OpenAI Agents SDK -----------------------------------------------------------------------


def agents_item(kind: str, number: int) -> dict[str, Any]:
    """An Agents SDK input item for a message of ``kind``."""
    if kind == "call":
        return {"type": "function_call", "call_id": call_id(number), "name": TOOL,
                "arguments": arguments(number)}  # fmt: skip
    if kind == "result":
        output = message_dict(kind, number, "")["contents"][0]["result"]
        return {"type": "function_call_output", "call_id": call_id(number), "output": output}
    return {"role": kind, "content": text(number)}


class AgentsSessions(AsyncVariant):
    """An OpenAI Agents SDK ``Session`` per conversation (the SDK's model: one session
    object per session id), all on one backend."""

    level: Level = "messages"
    kind: Kind = "peer"

    def __init__(
        self,
        name: str,
        make: Callable[[str], Any],
        *,
        before: Callable[[], Awaitable[None]] | None = None,
        after: Callable[[], Awaitable[None]] | None = None,
        note: str = "",
    ) -> None:
        self.name = name
        self.note = note
        self._make = make
        self._before = before
        self._after = after
        self._sessions: dict[str, Any] = {}

    def _session(self, session_id: str) -> Any:
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = self._make(session_id)
        return session

    async def open(self) -> None:
        if self._before is not None:
            await self._before()

    async def fill(self, session_id: str, count: int) -> None:
        session = self._session(session_id)
        for part in batches(count, 2000):
            await session.add_items([agents_item(role_of(n), n) for n in part])

    async def turn(self, session_id: str, number: int) -> None:
        session = self._session(session_id)
        await session.get_items(limit=WINDOW)
        await session.add_items([agents_item(kind, number) for kind in exchange(number)])

    async def load(self, session_id: str) -> object:
        return await self._session(session_id).get_items(limit=WINDOW)

    async def close(self) -> None:
        for session in self._sessions.values():
            closing = getattr(session, "close", None)
            if closing is not None:
                result = closing()
                if isinstance(result, Awaitable):
                    await result
        self._sessions.clear()
        if self._after is not None:
            await self._after()


# -- LangChain -------------------------------------------------------------------------------


class LangChainHistories(Variant):
    """A LangChain ``BaseChatMessageHistory`` per conversation (blocking API)."""

    level: Level = "messages"
    kind: Kind = "peer"

    def __init__(
        self,
        name: str,
        make: Callable[[str], Any],
        *,
        after: Callable[[], None] | None = None,
        note: str = "",
    ) -> None:
        self.name = name
        self.note = note
        self._make = make
        self._after = after
        self._histories: dict[str, Any] = {}

    def _history(self, session_id: str) -> Any:
        history = self._histories.get(session_id)
        if history is None:
            history = self._histories[session_id] = self._make(session_id)
        return history

    @staticmethod
    def _messages(kind: str, number: int) -> Any:
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        if kind == "call":
            call = {"name": TOOL, "args": json.loads(arguments(number)), "id": call_id(number)}
            return AIMessage(content="", tool_calls=[call])
        if kind == "result":
            output = message_dict(kind, number, "")["contents"][0]["result"]
            return ToolMessage(content=output, tool_call_id=call_id(number))
        return (HumanMessage if kind == "user" else AIMessage)(content=text(number))

    def fill(self, session_id: str, count: int) -> None:
        history = self._history(session_id)
        for part in batches(count, 2000):
            history.add_messages([self._messages(role_of(n), n) for n in part])

    def turn(self, session_id: str, number: int) -> None:
        history = self._history(session_id)
        history.messages[-WINDOW:]  # the load is the point
        history.add_messages([self._messages(kind, number) for kind in exchange(number)])

    def load(self, session_id: str) -> object:
        return self._history(session_id).messages[-WINDOW:]

    def close(self) -> None:
        self._histories.clear()
        if self._after is not None:
            self._after()


# -- Microsoft Agent Framework --------------------------------------------------------------


def maf_message(kind: str, number: int) -> Any:
    """A MAF ``Message`` of ``kind`` with an id (as a chat client's response has)."""
    from agent_framework import Content, Message

    if kind == "call":
        call = Content.from_function_call(call_id(number), TOOL, arguments=arguments(number))
        return Message("assistant", [call], message_id=new_id())
    if kind == "result":
        output = message_dict(kind, number, "")["contents"][0]["result"]
        result = Content.from_function_result(call_id(number), result=output)
        return Message("tool", [result], message_id=new_id())
    return Message(role(kind), [text(number)], message_id=new_id())


class MafProvider(AsyncVariant):
    """A MAF ``HistoryProvider``: one provider object serves every session; providers
    that keep history in the session's state get a state dict per session."""

    level: Level = "messages"
    kind: Kind = "peer"

    def __init__(
        self,
        name: str,
        make: Callable[[], Any],
        *,
        after: Callable[[Any], Awaitable[None]] | None = None,
        note: str = "",
        elsewhere: bool = False,
    ) -> None:
        self.name = name
        self.note = note
        self.elsewhere = elsewhere
        self._make = make
        self._after = after
        self._provider: Any = None
        self._states: dict[str, dict[str, Any]] = {}

    async def open(self) -> None:
        self._provider = self._make()

    def _state(self, session_id: str) -> dict[str, Any]:
        state = self._states.get(session_id)
        if state is None:
            state = self._states[session_id] = {}
        return state

    async def fill(self, session_id: str, count: int) -> None:
        state = self._state(session_id)
        for part in batches(count, 5000):
            await self._provider.save_messages(
                session_id, [maf_message(role_of(n), n) for n in part], state=state
            )

    async def turn(self, session_id: str, number: int) -> None:
        state = self._state(session_id)
        (await self._provider.get_messages(session_id, state=state))[-WINDOW:]
        await self._provider.save_messages(
            session_id, [maf_message(kind, number) for kind in exchange(number)], state=state
        )

    async def load(self, session_id: str) -> object:
        state = self._state(session_id)
        return (await self._provider.get_messages(session_id, state=state))[-WINDOW:]

    async def close(self) -> None:
        self._states.clear()
        if self._after is not None and self._provider is not None:
            await self._after(self._provider)
