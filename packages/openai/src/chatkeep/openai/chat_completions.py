"""``ChatCompletionsClient``: the Chat Completions API, history kept by the client.

Every call sends the whole history (the agent's history provider supplies it), so any
store works and any vendor speaking Chat Completions works (see
``chatkeep.vendors``)::

    from chatkeep.core import Agent, HistoryProvider
    from chatkeep.openai import ChatCompletionsClient

    agent = Agent(
        ChatCompletionsClient("gpt-4o-mini"),
        history_provider=HistoryProvider("sqlite:///chats.db"),
    )
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, cast

from chatkeep.core import (
    ChatResponse,
    ChatResponseUpdate,
    FunctionCallContent,
    Message,
    ReasoningContent,
    TextContent,
    Tool,
    new_id,
)

from ._base import OpenAIClientBase
from ._common import dump, refuse_service_conversation, to_tools
from .chat_format import from_chat_message, to_chat_messages, to_chat_tools

__all__ = ["ChatCompletionsClient"]


class ChatCompletionsClient(OpenAIClientBase):
    """A client-managed chat client over ``POST /chat/completions``.

    ``ChatCompletionsClient(model, *, client=None, api_key=None, base_url=None,
    options=None, reasoning_field=None, ...)``; see :class:`OpenAIClientBase` for the SDK
    arguments. ``reasoning_field="reasoning_content"`` sends earlier reasoning text back
    for vendors that want it (DeepSeek's thinking mode during tool calls).

    A session whose history the service keeps (it holds a conversation id from a
    Responses or Conversations client) is refused with
    :class:`~chatkeep.core.HistoryConflict` rather than answered without its history.
    """

    service_managed = False

    def __init__(self, model: str, *, reasoning_field: str | None = None, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.reasoning_field = reasoning_field

    def _body(
        self, messages: list[Message], tools: Iterable[Tool | Callable[..., Any]] | None
    ) -> dict[str, Any]:
        tool_list = to_tools(tools)
        return self._request(
            messages=to_chat_messages(messages, reasoning_field=self.reasoning_field),
            tools=to_chat_tools(tool_list) if tool_list else None,
        )

    async def get_response(
        self,
        messages: list[Message],
        *,
        conversation_id: str | None = None,
        tools: Iterable[Tool | Callable[..., Any]] | None = None,
    ) -> ChatResponse:
        """Send ``messages`` (the whole history) and return the model's message."""
        refuse_service_conversation(self, conversation_id)
        sdk = await self.sdk()
        completion = await sdk.chat.completions.create(**self._body(messages, tools))
        replies = [from_chat_message(choice.message) for choice in completion.choices[:1]]
        details: dict[str, Any] = {"response_id": completion.id, "model": completion.model}
        if completion.usage is not None:
            details["usage"] = dump(completion.usage)
        if completion.choices and completion.choices[0].finish_reason:
            details["finish_reason"] = completion.choices[0].finish_reason
        return ChatResponse(replies, None, details)

    async def get_streaming_response(
        self,
        messages: list[Message],
        *,
        conversation_id: str | None = None,
        tools: Iterable[Tool | Callable[..., Any]] | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """Stream the model's message: text and reasoning as they arrive; a tool call's
        name and id first, then its argument text in pieces (``ChatResponse.from_updates``
        joins them)."""
        refuse_service_conversation(self, conversation_id)
        body = self._body(messages, tools)
        sdk = await self.sdk()
        stream = await sdk.chat.completions.create(**body, stream=True)
        message_id = new_id()
        call_ids: dict[int, str] = {}
        async for chunk in cast(Any, stream):
            if not chunk.choices:
                continue
            delta: dict[str, Any] = dump(chunk.choices[0].delta)
            pieces: list[Any] = []
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                pieces.append(ReasoningContent(reasoning))
            if isinstance(delta.get("content"), str) and delta["content"]:
                pieces.append(TextContent(delta["content"]))
            if delta.get("refusal"):
                pieces.append(TextContent(str(delta["refusal"]), {"refusal": True}))
            for call in delta.get("tool_calls") or ():
                index = int(call.get("index", 0))
                if call.get("id"):
                    call_ids[index] = str(call["id"])
                function = call.get("function") or {}
                pieces.append(
                    FunctionCallContent(
                        call_ids.get(index, ""),
                        str(function.get("name") or ""),
                        str(function.get("arguments") or ""),
                    )
                )
            if pieces:
                yield ChatResponseUpdate(pieces, "assistant", message_id)
