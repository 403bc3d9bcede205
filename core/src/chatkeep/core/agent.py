"""The agent loop: history, context providers, function tools and streaming.

``Agent.run`` works the same whether the model service keeps the history (it returns a
conversation id) or not (the history goes through a provider). One run may take several
model calls: while the model asks for function calls, the agent runs its tools and calls
the model again with the results, up to ``max_tool_iterations`` rounds. Everything the run
produced (tool calls, tool results, the final answer) is stored in order in one append
when the run completes, and nothing when it fails.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from ._loop import run_blocking
from .chat import (
    ChatClient,
    ChatResponse,
    ChatResponseUpdate,
    StreamingChatClient,
    get_response,
    stream_response,
)
from .codec import content_to_dict
from .context import Context, ContextProvider
from .errors import EncodeError, HistoryConflict, ToolLoopLimit
from .history import HistoryProvider, InMemoryHistoryProvider
from .ids import new_id
from .messages import (
    Content,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    MessageSource,
)
from .session import AgentSession
from .tools import Tool, ToolError

__all__ = [
    "Agent",
    "AgentResponse",
    "AgentResponseStream",
    # The chat-client protocol lives in chatkeep.core.chat; these names stay importable
    # from here for code written before that module existed.
    "ChatClient",
    "ChatResponse",
    "ChatResponseUpdate",
    "ConflictPolicy",
    "StreamingChatClient",
]

P = TypeVar("P")

#: What :class:`Agent` does when it has a history provider but the service keeps the
#: conversation itself: ``"warn"`` (default), ``"raise"`` or ``"clear"`` (silently stop
#: using the local provider for that session).
ConflictPolicy = Literal["warn", "raise", "clear"]
_POLICIES = ("warn", "raise", "clear")


@dataclass
class AgentResponse:
    """The result of :meth:`Agent.run`: every message the run produced (tool calls and
    results included) and the session used."""

    messages: list[Message]
    session: AgentSession

    @property
    def text(self) -> str:
        """The concatenated text of the response messages."""
        return "".join(message.text for message in self.messages)


class AgentResponseStream:
    """The updates of :meth:`Agent.run_stream`; iterate it once with ``async for``. After
    the last update, :attr:`response` holds the stored run."""

    def __init__(self, events: AsyncIterator[ChatResponseUpdate | AgentResponse]) -> None:
        # The run yields its updates and, once it is stored, the AgentResponse.
        self._events = events
        self._response: AgentResponse | None = None

    def __aiter__(self) -> AgentResponseStream:
        return self

    async def __anext__(self) -> ChatResponseUpdate:
        event = await self._events.__anext__()
        if isinstance(event, AgentResponse):
            self._response = event
            await self.aclose()  # the run is stored; nothing follows its response
            raise StopAsyncIteration
        return event

    async def aclose(self) -> None:
        """Stop early: nothing of the run is stored."""
        closer = getattr(self._events, "aclose", None)
        if closer is not None:
            await closer()

    @property
    def response(self) -> AgentResponse:
        """The completed run (``RuntimeError`` before the stream is exhausted)."""
        if self._response is None:
            raise RuntimeError("the stream has not completed yet")
        return self._response


@dataclass(frozen=True)
class _ModelTurns:
    """What the model loop produced: every message of the run in order (tool calls and
    results included) and the service's conversation id at its end."""

    messages: list[Message]
    conversation_id: str | None


def _as_messages(value: str | Message | Sequence[Message]) -> list[Message]:
    if isinstance(value, str):
        return [Message.user(value)]
    if isinstance(value, Message):
        return [value]
    wrong = f"run() input must be a str, a Message or a list of Messages, not {type(value)}"
    if not isinstance(value, Iterable):
        raise TypeError(wrong)
    messages = list(value)
    for item in messages:
        if not isinstance(item, Message):
            raise TypeError(f"run() input must be str, Message or messages, not {type(item)}")
    return messages


def _session(agent: Agent, session: AgentSession | None) -> AgentSession:
    """``session``, or a new one; a session id given where the session goes is refused with
    the way to resume it (it used to fail deep inside with an AttributeError)."""
    if session is None:
        return agent.create_session()
    if isinstance(session, str):
        raise TypeError(
            f"run()'s session must be an AgentSession, not the str {session!r}: resume a "
            f"stored session with AgentSession({session!r}) or agent.create_session({session!r})"
        )
    if not isinstance(session, AgentSession):
        raise TypeError(f"run()'s session must be an AgentSession, not {type(session).__name__}")
    return session


def _unanswered_calls(messages: Sequence[Message]) -> list[FunctionCallContent]:
    answered = {
        c.call_id for m in messages for c in m.contents if isinstance(c, FunctionResultContent)
    }
    return [
        c
        for m in messages
        for c in m.contents
        if isinstance(c, FunctionCallContent) and c.call_id not in answered
    ]


def _storable(value: Any) -> Any:
    """A tool's return value as something the codec stores losslessly (dataclasses and
    pydantic models become dicts; anything else unstorable becomes its ``str``)."""
    try:
        content_to_dict(FunctionResultContent("probe", value))
        return value
    except EncodeError:
        pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _storable(dataclasses.asdict(value))
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return _storable(dump(mode="json"))
        except TypeError:
            return _storable(dump())
    if isinstance(value, Mapping):
        return {str(k): _storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_storable(item) for item in value]
    return str(value)


class Agent:
    """Runs turns of a conversation against a :class:`ChatClient`.

    ::

        agent = Agent(
            OfflineChatClient(),
            history_provider=HistoryProvider("sqlite:///c.db"),
            tools=[get_weather],                    # plain functions, sync or async
            context_providers=[UserFacts()],
        )
        session = agent.create_session()
        await agent.run("Hello", session)
        async for update in agent.run_stream("Weather in Oslo?", session):
            print(update.text, end="")
        again = AgentSession(session.session_id)   # later, another process: resume by id
        await agent.run("What did I say?", again)

    ``max_tool_iterations`` bounds the rounds of tool calls in one run
    (:class:`~chatkeep.core.errors.ToolLoopLimit` beyond). ``conflict_policy`` says what
    happens when a history provider is configured but the service keeps the conversation
    itself: ``"warn"`` (default), ``"raise"`` (:class:`~chatkeep.core.errors.HistoryConflict`)
    or ``"clear"`` (drop the local provider for that session without a warning).
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        history_provider: HistoryProvider | None = None,
        instructions: str | None = None,
        name: str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        context_providers: Sequence[ContextProvider] = (),
        max_tool_iterations: int = 8,
        conflict_policy: ConflictPolicy = "warn",
    ) -> None:
        if type(max_tool_iterations) is not int or max_tool_iterations < 0:
            raise ValueError("max_tool_iterations must be a non-negative int")
        if conflict_policy not in _POLICIES:
            raise ValueError(f"conflict_policy must be one of {_POLICIES}, not {conflict_policy!r}")
        self.client = client
        self.history_provider = history_provider
        self.instructions = instructions
        self.name = name
        self.tools: list[Tool] = [Tool.from_function(t) for t in tools]
        names = [t.name for t in self.tools]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"two tools are named {', '.join(duplicated)}")
        self.context_providers = list(context_providers)
        self.max_tool_iterations = max_tool_iterations
        self.conflict_policy: ConflictPolicy = conflict_policy

    def create_session(self, session_id: str | None = None) -> AgentSession:
        """A new session (or a handle to resume ``session_id``)."""
        return AgentSession(session_id)

    def get_service(self, service_type: type[P], key: str | None = None) -> P | None:
        """The agent's component of ``service_type``: the agent itself, its history
        provider, its client or one of its context providers, in that order.

        :param service_type: the class (or protocol class) wanted.
        :param key: when given, only a provider whose ``source_id`` is ``key`` matches
            (several providers of one type are told apart by their source ids).
        :returns: the first match, or ``None``.
        """
        candidates = (self, self.history_provider, self.client, *self.context_providers)
        for candidate in candidates:
            if not isinstance(candidate, service_type):
                continue
            if key is None or getattr(candidate, "source_id", None) == key:
                return candidate
        return None

    def serialize_session(self, session: AgentSession) -> dict[str, Any]:
        """A JSON-ready dict of ``session`` (id, conversation id, state)."""
        return session.to_dict()

    def deserialize_session(self, data: Mapping[str, Any]) -> AgentSession:
        """The session :meth:`serialize_session` produced."""
        return AgentSession.from_dict(data)

    # -- tools ----------------------------------------------------------------------------

    async def _run_tools(
        self, calls: Sequence[FunctionCallContent], tools: Mapping[str, Tool]
    ) -> Message:
        results: list[Content] = []
        for call in calls:
            tool = tools.get(call.name)
            if tool is None:
                results.append(
                    FunctionResultContent(call.call_id, exception=f"unknown tool {call.name!r}")
                )
                continue
            try:
                value = await tool.invoke(call.arguments)
            except ToolError as exc:
                results.append(FunctionResultContent(call.call_id, exception=str(exc)))
            except Exception as exc:  # the model is told, and may recover
                results.append(
                    FunctionResultContent(call.call_id, exception=f"{type(exc).__name__}: {exc}")
                )
            else:
                results.append(FunctionResultContent(call.call_id, result=_storable(value)))
        return Message("tool", results, message_id=new_id())

    # -- runs -----------------------------------------------------------------------------

    async def _gather_context(
        self, session: AgentSession, request: list[Message]
    ) -> tuple[list[Message], list[str], list[Tool]]:
        messages: list[Message] = []
        instructions: list[str] = []
        tools: list[Tool] = []
        for provider in self.context_providers:
            context = await provider.invoking(session, list(request))
            if context is None:
                continue
            if not isinstance(context, Context):
                raise TypeError(
                    f"{provider!r}.invoking returned {type(context).__name__}, not Context"
                )
            messages.extend(
                m.tagged(MessageSource.CONTEXT_PROVIDER, provider.source_id)
                for m in self._with_ids(context.messages)
            )
            if context.instructions:
                instructions.append(context.instructions)
            tools.extend(Tool.from_function(t) for t in context.tools)
        return messages, instructions, tools

    async def _context_invoked(
        self,
        session: AgentSession,
        request: list[Message],
        response: list[Message],
        error: BaseException | None,
    ) -> None:
        for provider in self.context_providers:
            await provider.invoked(session, request, response, error=error)

    async def _model_loop(
        self,
        sent: list[Message],
        tools: Mapping[str, Tool],
        streaming: bool,
        conversation_id: str | None,
    ) -> AsyncIterator[ChatResponseUpdate | _ModelTurns]:
        """Call the model, run the tools it asks for, call it again with the results, ...

        Yields the model's updates as they arrive (when ``streaming``; plus one update per
        round of tool results) and, last, the :class:`_ModelTurns` of the whole loop.
        """
        produced: list[Message] = []
        outgoing = sent
        tool_list = list(tools.values())
        for round_number in range(self.max_tool_iterations + 1):
            if streaming:
                updates: list[ChatResponseUpdate] = []
                async for update in stream_response(
                    self.client, outgoing, conversation_id=conversation_id, tools=tool_list
                ):
                    updates.append(update)
                    yield update
                response = ChatResponse.from_updates(updates)
            else:
                response = await get_response(
                    self.client, outgoing, conversation_id=conversation_id, tools=tool_list
                )
            new = self._with_ids(response.messages)
            produced.extend(new)
            if response.conversation_id is not None:
                conversation_id = response.conversation_id
            calls = _unanswered_calls(new)
            if not calls or not tools:
                yield _ModelTurns(produced, conversation_id)
                return
            if round_number == self.max_tool_iterations:
                raise ToolLoopLimit(self.max_tool_iterations)
            results = await self._run_tools(calls, tools)
            produced.append(results)
            if streaming:
                yield ChatResponseUpdate(
                    list(results.contents), role="tool", message_id=results.message_id
                )
            # A service that keeps the conversation only needs what is new.
            outgoing = [results] if conversation_id is not None else [*sent, *produced]

    async def _record(
        self,
        session: AgentSession,
        *,
        provider: HistoryProvider | None,
        to_send: list[Message],
        request: list[Message],
        produced: list[Message],
        conversation_id: str | None,
    ) -> None:
        """Store the completed run (or not, when the service keeps the conversation)."""
        configured = provider is not None and provider is self.history_provider
        if conversation_id is not None and provider is not None:
            # The service keeps the history: nothing is stored locally.
            await provider.invoked(session, to_send, (), error=_ServiceKeepsHistory())
            if configured and self.conflict_policy == "raise":
                conflict = HistoryConflict(
                    f"{type(self.client).__name__} keeps the conversation itself, but the agent "
                    f"has a {type(provider).__name__}; remove one of them or use "
                    "conflict_policy='clear'"
                )
                await self._context_invoked(session, request, produced, conflict)
                raise conflict
            if configured and self.conflict_policy == "warn":
                warnings.warn(
                    f"{type(self.client).__name__} keeps the conversation itself, so the "
                    f"configured {type(provider).__name__} is not used for this session",
                    stacklevel=5,
                )
        elif provider is not None:
            if not configured:
                self.history_provider = provider
            await provider.invoked(session, to_send, produced)
        session.conversation_id = conversation_id
        await self._context_invoked(session, request, produced, None)

    async def _execute(
        self,
        input: str | Message | Sequence[Message],
        session: AgentSession,
        streaming: bool,
    ) -> AsyncIterator[ChatResponseUpdate | AgentResponse]:
        """One run: its updates as they arrive, then (once stored) its AgentResponse."""
        request = self._with_ids(_as_messages(input))
        if (
            session.conversation_id is not None
            and getattr(self.client, "service_managed", None) is False
        ):
            # The service holds this conversation; a client that keeps nothing there would
            # silently start over without it.
            raise HistoryConflict(
                f"session {session.session_id!r} is kept by the model service (conversation "
                f"{session.conversation_id!r}), but {type(self.client).__name__} keeps no "
                "history there. Move it first with chatkeep.openai.migrate_to_client_managed, "
                "or keep using a service-managed client."
            )
        added, extra_instructions, extra_tools = await self._gather_context(session, request)
        tools: dict[str, Tool] = {}
        for item in [*self.tools, *extra_tools]:
            tools.setdefault(item.name, item)
        instructions = "\n\n".join(
            text for text in [self.instructions or "", *extra_instructions] if text
        )
        preamble = [Message.system(instructions)] if instructions else []

        provider: HistoryProvider | None = None
        if session.conversation_id is None:
            # With no provider configured, an in-memory one reads the session's state (a
            # deserialized session may carry history) and is kept once the service shows
            # it keeps nothing.
            provider = self.history_provider or InMemoryHistoryProvider()
            to_send = await provider.invoking(session, [*added, *request])
        else:
            to_send = [*added, *request]  # the service keeps this conversation

        turns: _ModelTurns | None = None
        try:
            async for event in self._model_loop(
                [*preamble, *to_send], tools, streaming, session.conversation_id
            ):
                if isinstance(event, _ModelTurns):
                    turns = event
                else:
                    yield event
        except BaseException as error:
            if provider is not None:
                await provider.invoked(session, to_send, (), error=error)
            await self._context_invoked(session, request, [], error)
            raise
        assert turns is not None  # the loop ends with its result or raises
        await self._record(
            session,
            provider=provider,
            to_send=to_send,
            request=request,
            produced=turns.messages,
            conversation_id=turns.conversation_id,
        )
        yield AgentResponse(turns.messages, session)

    async def run(
        self,
        input: str | Message | Sequence[Message],
        session: AgentSession | None = None,
    ) -> AgentResponse:
        """Run one turn: send ``input`` (with the history, when the client keeps none),
        run requested tools, and record the turn. Returns every message the turn produced
        (tool calls and results included) and the session used."""
        session = _session(self, session)
        response: AgentResponse | None = None
        async for event in self._execute(input, session, False):
            if isinstance(event, AgentResponse):
                response = event
        assert response is not None  # a run ends with its AgentResponse or raises
        return response

    def run_stream(
        self,
        input: str | Message | Sequence[Message],
        session: AgentSession | None = None,
    ) -> AgentResponseStream:
        """Run one turn, streaming: ``async for update in agent.run_stream(...)``.

        Yields the model's updates as they arrive (and one update per round of tool
        results). The whole turn, tool calls included, is stored once the stream completes;
        nothing is stored if it fails or is abandoned. Clients without
        ``get_streaming_response`` are called with ``get_response``.
        """
        session = _session(self, session)
        return AgentResponseStream(self._execute(input, session, True))

    def run_sync(
        self,
        input: str | Message | Sequence[Message],
        session: AgentSession | None = None,
    ) -> AgentResponse:
        """Blocking :meth:`run` for code without an event loop.

        Each thread keeps one event loop for these calls and reuses it (no new loop per
        turn, as ``asyncio.run`` would make); calling it from a running loop raises
        ``RuntimeError`` (``await agent.run(...)`` there)."""
        return run_blocking(self.run(input, session))

    @staticmethod
    def _with_ids(messages: Sequence[Message]) -> list[Message]:
        return [m if m.message_id else replace(m, message_id=new_id()) for m in messages]


class _ServiceKeepsHistory(Exception):
    """Passed to ``invoked`` so a provider stores nothing for a service-managed turn."""
