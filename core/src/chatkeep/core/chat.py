"""The chat-client protocol: what a model service looks like to chatkeep.

A chat client is any object with ``get_response(messages, *, conversation_id=None)``
(sync or ``async def``) returning a :class:`ChatResponse`; a streaming one also has
``get_streaming_response`` yielding :class:`ChatResponseUpdate` pieces. The agent loop
(:class:`~chatkeep.core.agent.Agent`), the summarizing reducer and anything else that calls
a model go through :func:`get_response` and :func:`stream_response`, which await what needs
awaiting and check that the client returned what the protocol promises::

    from chatkeep.core import Message, OfflineChatClient
    from chatkeep.core.chat import get_response

    response = await get_response(OfflineChatClient(), [Message.user("Hello!")])
    response.text      # "[seen 1] first: 'Hello!' | latest: 'Hello!'"
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from .messages import (
    Content,
    FunctionCallContent,
    Message,
    ReasoningContent,
    TextContent,
)
from .tools import Tool

__all__ = [
    "ChatClient",
    "ChatResponse",
    "ChatResponseUpdate",
    "StreamingChatClient",
    "get_response",
    "stream_response",
]


@dataclass
class ChatResponseUpdate:
    """One piece of a streamed response: contents to add to the message ``message_id``
    (a new message starts when the id or the role changes)."""

    contents: list[Content] = field(default_factory=list)
    role: str | None = None
    message_id: str | None = None
    author_name: str | None = None
    conversation_id: str | None = None
    additional_properties: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The text of this update's text contents."""
        return "".join(c.text for c in self.contents if isinstance(c, TextContent))


def _add_content(contents: list[Content], piece: Content) -> None:
    """Add a streamed piece to a message's contents, joining it to the previous piece of
    the same kind (text to text, a function call's argument chunks to the call)."""
    last = contents[-1] if contents else None
    if (
        isinstance(piece, TextContent)
        and isinstance(last, TextContent)
        and not piece.additional_properties
    ):
        contents[-1] = replace(last, text=last.text + piece.text)
        return
    if (
        isinstance(piece, ReasoningContent)
        and isinstance(last, ReasoningContent)
        and not piece.additional_properties
    ):
        text = (last.text or "") + (piece.text or "") if (last.text or piece.text) else None
        contents[-1] = replace(
            last, text=text, protected_data=piece.protected_data or last.protected_data
        )
        return
    if isinstance(piece, FunctionCallContent):
        for index, existing in enumerate(contents):
            if not isinstance(existing, FunctionCallContent):
                continue
            if existing.call_id != piece.call_id and not (
                piece.call_id == "" and index == len(contents) - 1
            ):
                continue
            arguments: Any = piece.arguments
            if isinstance(existing.arguments, str) and isinstance(piece.arguments, str):
                arguments = existing.arguments + piece.arguments
            elif piece.arguments is None:
                arguments = existing.arguments
            contents[index] = replace(
                existing, name=existing.name or piece.name, arguments=arguments
            )
            return
    contents.append(piece)


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

    @classmethod
    def from_updates(cls, updates: Sequence[ChatResponseUpdate]) -> ChatResponse:
        """The response a stream of updates adds up to."""
        messages: list[Message] = []
        conversation_id: str | None = None
        for update in updates:
            if update.conversation_id is not None:
                conversation_id = update.conversation_id
            if not update.contents and update.message_id is None and update.role is None:
                continue
            current = messages[-1] if messages else None
            starts_new = (
                current is None
                or (
                    update.message_id is not None
                    and current.message_id is not None
                    and update.message_id != current.message_id
                )
                or (update.role is not None and update.role != current.role)
            )
            if current is None or starts_new:
                current = Message(
                    update.role or "assistant",
                    [],
                    update.author_name,
                    update.message_id,
                    dict(update.additional_properties),
                )
                messages.append(current)
            else:
                current.message_id = current.message_id or update.message_id
                current.author_name = current.author_name or update.author_name
                current.additional_properties.update(update.additional_properties)
            for piece in update.contents:
                _add_content(current.contents, piece)
        return cls(messages, conversation_id)


@runtime_checkable
class ChatClient(Protocol):
    """A model service. ``get_response`` may be sync or ``async def``.

    ``messages`` is everything the model should see for this call; ``conversation_id``
    is the service-side conversation to continue (``None`` for a new or client-managed one).
    When the agent has tools it also passes ``tools=[Tool, ...]``.

    Optional attribute ``service_managed: bool``: ``False`` declares that the client keeps
    nothing on the service, so the agent refuses (``HistoryConflict``) to continue a session
    whose history the service holds instead of silently starting it over.
    """

    def get_response(
        self, messages: list[Message], *, conversation_id: str | None = None
    ) -> ChatResponse | Awaitable[ChatResponse]:
        """The model's response to ``messages`` (continuing ``conversation_id`` when the
        service keeps the conversation); sync or ``async def``."""
        ...


@runtime_checkable
class StreamingChatClient(ChatClient, Protocol):
    """A chat client that can also stream: ``get_streaming_response`` returns an async
    (or plain) iterator of :class:`ChatResponseUpdate`. Optional: :meth:`Agent.run_stream`
    falls back to ``get_response`` for clients without it."""

    def get_streaming_response(
        self, messages: list[Message], *, conversation_id: str | None = None
    ) -> Any:
        """The response as an async (or plain) iterator of :class:`ChatResponseUpdate`."""
        ...


def _options(conversation_id: str | None, tools: Sequence[Tool]) -> dict[str, Any]:
    options: dict[str, Any] = {"conversation_id": conversation_id}
    if tools:  # clients written before tools existed need not accept the keyword
        options["tools"] = list(tools)
    return options


async def get_response(
    client: ChatClient,
    messages: list[Message],
    *,
    conversation_id: str | None = None,
    tools: Sequence[Tool] = (),
) -> ChatResponse:
    """Call ``client.get_response`` (awaiting it if it is async) and check the result.

    :param client: the chat client to call.
    :param messages: everything the model should see for this call.
    :param conversation_id: the service-side conversation to continue, if any.
    :param tools: the tools the model may call (passed only when there are some).
    :returns: the client's :class:`ChatResponse`.
    :raises TypeError: when the client returned something else.
    """
    result = client.get_response(messages, **_options(conversation_id, tools))
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, ChatResponse):
        raise TypeError(f"chat client returned {type(result).__name__}, not ChatResponse")
    return result


def _check_update(update: object) -> ChatResponseUpdate:
    if not isinstance(update, ChatResponseUpdate):
        raise TypeError(
            f"streaming chat client yielded {type(update).__name__}, not ChatResponseUpdate"
        )
    return update


async def stream_response(
    client: ChatClient,
    messages: list[Message],
    *,
    conversation_id: str | None = None,
    tools: Sequence[Tool] = (),
) -> AsyncIterator[ChatResponseUpdate]:
    """The updates of one streamed call, checked one by one.

    A client without ``get_streaming_response`` is called with :func:`get_response` and
    its response comes as one update per message (the last one carrying the
    conversation id). Parameters as for :func:`get_response`.

    :returns: an async iterator of :class:`ChatResponseUpdate`.
    :raises TypeError: when the client yields something else.
    """
    method = getattr(client, "get_streaming_response", None)
    if method is None:  # not a streaming client: one update per message
        response = await get_response(
            client, messages, conversation_id=conversation_id, tools=tools
        )
        for index, message in enumerate(response.messages):
            last = index == len(response.messages) - 1
            yield ChatResponseUpdate(
                list(message.contents),
                message.role,
                message.message_id,
                message.author_name,
                response.conversation_id if last else None,
                dict(message.additional_properties),
            )
        if not response.messages and response.conversation_id is not None:
            yield ChatResponseUpdate(conversation_id=response.conversation_id)
        return
    stream = method(messages, **_options(conversation_id, tools))
    if inspect.isawaitable(stream):
        stream = await stream
    if hasattr(stream, "__aiter__"):
        async for update in stream:
            yield _check_update(update)
    else:
        for update in stream:
            yield _check_update(update)
