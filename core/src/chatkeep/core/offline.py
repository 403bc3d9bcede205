"""A deterministic, offline chat client for demos and tests.

Its replies prove which history it was sent: each reply names how many messages it saw,
the first and the latest user text (and the results of the latest tool calls, after a
round of tools). With ``service_managed=True`` it behaves like a service that keeps
conversations itself (it returns a conversation id and remembers the history
server-side), so the same agent code can be run both ways.

Scripted mode makes it call tools: each call takes the next entry of ``script``::

    client = OfflineChatClient(script=[
        [FunctionCallContent("call-1", "weather", {"city": "Oslo"})],   # first call: a tool call
    ])                                                                  # then: the usual reply
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .chat import ChatResponse, ChatResponseUpdate
from .ids import new_id
from .messages import Content, FunctionResultContent, Message, TextContent

__all__ = ["OfflineChatClient", "ScriptEntry"]

#: One scripted response: a message, a list of contents (an assistant message), a whole
#: :class:`ChatResponse`, or an exception to raise.
ScriptEntry = Message | Sequence[Content] | ChatResponse | BaseException


@dataclass
class OfflineChatClient:
    """Replies ``"[seen N] first: '...' | latest: '...'"`` from the messages it receives.

    ``requests`` records the lists of messages received and ``tool_names`` the names of the
    tools offered with each call, for tests: the last ``keep_requests`` calls (32 by
    default; ``None`` keeps every one, ``0`` none), so a long session's memory stays
    bounded (every request holds the whole history sent). ``fail_next`` makes the next call raise
    ``RuntimeError`` (to show nothing is stored for a failed call); ``fail_stream_after=N``
    makes the next streamed reply raise after N updates. ``script`` holds scripted
    responses used one per call, before the default reply (see :data:`ScriptEntry`).
    """

    service_managed: bool = False
    requests: list[list[Message]] = field(default_factory=list)
    fail_next: bool = False
    script: Sequence[ScriptEntry] = field(default_factory=list)
    fail_stream_after: int | None = None
    tool_names: list[list[str]] = field(default_factory=list)
    keep_requests: int | None = 32
    _conversations: dict[str, list[Message]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _queue: deque[ScriptEntry] = field(default_factory=deque, repr=False)

    def __post_init__(self) -> None:
        self._queue.extend(self.script)

    def add_script(self, *entries: ScriptEntry) -> None:
        """Queue more scripted responses."""
        with self._lock:
            self._queue.extend(entries)

    def _reply(self, seen: list[Message]) -> Message:
        users = [m.text for m in seen if m.role == "user"]
        first = users[0] if users else ""
        latest = users[-1] if users else ""
        text = f"[seen {len(seen)}] first: {first!r} | latest: {latest!r}"
        if seen and seen[-1].role == "tool":
            results = [
                c.exception if c.exception is not None else c.result
                for c in seen[-1].contents
                if isinstance(c, FunctionResultContent)
            ]
            text += f" | tool results: {', '.join(repr(r) for r in results)}"
        return Message.assistant(text, message_id=new_id())

    def get_response(
        self,
        messages: list[Message],
        *,
        conversation_id: str | None = None,
        tools: Iterable[Any] | None = None,
    ) -> ChatResponse:
        """Answer from ``messages`` (plus the server-side history of ``conversation_id``)."""
        with self._lock:
            self.requests.append(list(messages))
            self.tool_names.append([getattr(t, "name", str(t)) for t in tools or ()])
            if self.keep_requests is not None:
                # The oldest go first: a list (tests compare it with lists), a short one.
                for kept in (self.requests, self.tool_names):
                    del kept[: max(0, len(kept) - self.keep_requests)]
            if self.fail_next:
                self.fail_next = False
                raise RuntimeError("offline client: simulated model failure")
            history: list[Message] = []
            if self.service_managed:
                if conversation_id is None:
                    conversation_id = "conv_" + new_id()
                history = self._conversations.setdefault(conversation_id, [])
            elif conversation_id is not None:
                raise ValueError("this client keeps no conversations (service_managed=False)")
            seen = [m for m in history + list(messages) if m.role != "system"]
            scripted = self._queue.popleft() if self._queue else None
            if isinstance(scripted, BaseException):
                raise scripted
            if isinstance(scripted, ChatResponse):
                replies = list(scripted.messages)
            elif isinstance(scripted, Message):
                replies = [scripted]
            elif scripted is not None:
                replies = [Message("assistant", list(scripted), message_id=new_id())]
            else:
                replies = [self._reply(seen)]
            if self.service_managed:
                history.extend(m for m in messages if m.role != "system")
                history.extend(replies)
            return ChatResponse(replies, conversation_id if self.service_managed else None)

    async def get_streaming_response(
        self,
        messages: list[Message],
        *,
        conversation_id: str | None = None,
        tools: Iterable[Any] | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """The same reply as :meth:`get_response`, streamed word by word (a tool call is
        one update)."""
        response = self.get_response(messages, conversation_id=conversation_id, tools=tools)
        fail_after, self.fail_stream_after = self.fail_stream_after, None
        sent = 0
        for message in response.messages:
            for content in message.contents:
                pieces: list[Content]
                if isinstance(content, TextContent) and not content.additional_properties:
                    words = content.text.split(" ")
                    pieces = [
                        TextContent(word if i == 0 else " " + word) for i, word in enumerate(words)
                    ]
                else:
                    pieces = [content]
                for piece in pieces:
                    if fail_after is not None and sent >= fail_after:
                        raise RuntimeError("offline client: simulated failure mid-stream")
                    yield ChatResponseUpdate([piece], message.role, message.message_id)
                    sent += 1
        if response.conversation_id is not None:
            yield ChatResponseUpdate(conversation_id=response.conversation_id)
