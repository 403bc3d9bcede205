"""A minimal agent whose ``run`` works the same whether the model service keeps the history
(it returns a conversation id) or not (the history goes through a provider).
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

from .history import HistoryProvider, InMemoryHistoryProvider
from .ids import new_id
from .messages import Message
from .session import AgentSession

__all__ = ["Agent", "AgentResponse", "ChatClient", "ChatResponse"]

P = TypeVar("P")


@dataclass
class ChatResponse:
    """What a chat client returns for one call.

    ``conversation_id`` is set by a service that keeps the conversation itself (OpenAI
    Responses with ``store=True``, Conversations, ...): the agent then stores it in the
    session and sends only new input next time.
    """

    messages: list[Message]
    conversation_id: str | None = None
    additional_properties: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text of the response's messages."""
        return "".join(message.text for message in self.messages)


@runtime_checkable
class ChatClient(Protocol):
    """A model service. ``get_response`` may be sync or ``async def``.

    ``messages`` is everything the model should see for this call; ``conversation_id``
    is the service-side conversation to continue (``None`` for a new or client-managed one).
    """

    def get_response(
        self, messages: list[Message], *, conversation_id: str | None = None
    ) -> ChatResponse | Awaitable[ChatResponse]: ...


@dataclass
class AgentResponse:
    """The result of :meth:`Agent.run`."""

    messages: list[Message]
    session: AgentSession

    @property
    def text(self) -> str:
        """The concatenated text of the response messages."""
        return "".join(message.text for message in self.messages)


def _as_messages(value: str | Message | Sequence[Message]) -> list[Message]:
    if isinstance(value, str):
        return [Message.user(value)]
    if isinstance(value, Message):
        return [value]
    messages = list(value)
    for item in messages:
        if not isinstance(item, Message):
            raise TypeError(f"run() input must be str, Message or messages, not {type(item)}")
    return messages


class Agent:
    """Runs turns of a conversation against a :class:`ChatClient`.

    ::

        agent = Agent(OfflineChatClient(), history_provider=HistoryProvider("sqlite:///c.db"))
        session = agent.create_session()
        await agent.run("Hello", session)
        again = AgentSession(session.session_id)   # later, another process: resume by id
        await agent.run("What did I say?", again)
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        history_provider: HistoryProvider | None = None,
        instructions: str | None = None,
        name: str | None = None,
    ) -> None:
        self.client = client
        self.history_provider = history_provider
        self.instructions = instructions
        self.name = name

    def create_session(self, session_id: str | None = None) -> AgentSession:
        """A new session (or a handle to resume ``session_id``)."""
        return AgentSession(session_id)

    def get_service(self, service_type: type[P]) -> P | None:
        """The agent's component of ``service_type`` (e.g. its :class:`HistoryProvider`)."""
        for candidate in (self.history_provider, self.client):
            if isinstance(candidate, service_type):
                return candidate
        return None

    def serialize_session(self, session: AgentSession) -> dict[str, Any]:
        """A JSON-ready dict of ``session`` (id, conversation id, state)."""
        return session.to_dict()

    def deserialize_session(self, data: Mapping[str, Any]) -> AgentSession:
        """The session :meth:`serialize_session` produced."""
        return AgentSession.from_dict(data)

    async def _call_client(
        self, messages: list[Message], conversation_id: str | None
    ) -> ChatResponse:
        result = self.client.get_response(messages, conversation_id=conversation_id)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, ChatResponse):
            raise TypeError(f"chat client returned {type(result).__name__}, not ChatResponse")
        return result

    async def run(
        self,
        input: str | Message | Sequence[Message],
        session: AgentSession | None = None,
    ) -> AgentResponse:
        """Run one turn: send ``input`` (with the history, when the client keeps none) and
        record the turn. Returns the response messages and the session used."""
        session = session or self.create_session()
        request = self._with_ids(_as_messages(input))
        preamble = [Message.system(self.instructions)] if self.instructions else []
        provider = self.history_provider

        if session.conversation_id is not None:
            # The service keeps this conversation: send only what is new.
            response = await self._call_client(preamble + request, session.conversation_id)
            self._adopt_conversation(session, response)
            return AgentResponse(self._with_ids(response.messages), session)

        # With no provider configured, an in-memory one reads the session's state (a
        # deserialized session may carry history) and is kept once the service shows it
        # keeps nothing.
        configured = provider is not None
        if provider is None:
            provider = InMemoryHistoryProvider()
        to_send = await provider.invoking(session, request)
        try:
            response = await self._call_client(preamble + to_send, None)
        except BaseException as error:
            await provider.invoked(session, to_send, (), error=error)
            raise
        messages = self._with_ids(response.messages)
        if response.conversation_id is not None:
            await provider.invoked(session, to_send, (), error=_ServiceKeepsHistory())
            if configured:
                warnings.warn(
                    f"{type(self.client).__name__} keeps the conversation itself, so the "
                    f"configured {type(provider).__name__} is not used for this session",
                    stacklevel=2,
                )
            self._adopt_conversation(session, response)
            return AgentResponse(messages, session)
        if not configured:
            self.history_provider = provider
        await provider.invoked(session, to_send, messages)
        return AgentResponse(messages, session)

    def run_sync(
        self,
        input: str | Message | Sequence[Message],
        session: AgentSession | None = None,
    ) -> AgentResponse:
        """Blocking :meth:`run` for code without an event loop."""
        return asyncio.run(self.run(input, session))

    @staticmethod
    def _with_ids(messages: Sequence[Message]) -> list[Message]:
        return [m if m.message_id else replace(m, message_id=new_id()) for m in messages]

    @staticmethod
    def _adopt_conversation(session: AgentSession, response: ChatResponse) -> None:
        session.conversation_id = response.conversation_id or session.conversation_id


class _ServiceKeepsHistory(Exception):
    """Passed to ``invoked`` so a provider stores nothing for a service-managed turn."""
