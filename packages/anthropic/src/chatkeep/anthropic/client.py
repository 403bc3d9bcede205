"""``AnthropicChatClient``: a chatkeep chat client over the official ``anthropic`` SDK."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from chatkeep.core import (
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionCallContent,
    HistoryConflict,
    InvalidOption,
    Message,
    ReasoningContent,
    TextContent,
    UnknownContent,
    redact_url,
)

from .convert import content_from_block, message_from_response, to_anthropic, tool_to_anthropic

__all__ = ["AnthropicChatClient"]

#: Where the API key is read from when ``api_key`` is not given.
API_KEY_ENV = "ANTHROPIC_API_KEY"


class AnthropicChatClient:
    """A :class:`chatkeep.core.ChatClient` (and streaming client) for the Anthropic
    Messages API, or any service speaking it (DeepSeek, MiniMax, GLM, MiMo ... via
    ``base_url``).

    The history is client-managed: every call sends the whole history it is given, so
    use it with a :class:`chatkeep.core.HistoryProvider`. ::

        client = AnthropicChatClient(model="claude-sonnet-4-5")   # key from ANTHROPIC_API_KEY
        agent = Agent(client, history_provider=HistoryProvider("sqlite:///chats.db"))

    ``max_tokens`` (required by the API) defaults to 1024. ``options`` are sent with every
    request (``temperature``, ``thinking={"type": "enabled", "budget_tokens": 2048}``,
    ``metadata`` ...). ``timeout``, ``max_retries`` and ``default_headers`` configure the
    SDK client. ``client`` is an ``anthropic.AsyncAnthropic`` to use instead of building
    one (then ``api_key``, ``base_url`` and those settings are ignored).
    """

    #: Messages keeps no conversation on the service: the agent sends the whole history.
    service_managed = False

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 1024,
        client: Any = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        default_headers: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidOption(
                "AnthropicChatClient needs a model name, e.g. model='claude-sonnet-4-5'"
            )
        if type(max_tokens) is not int or max_tokens < 1:
            raise InvalidOption(f"max_tokens must be a positive int, not {max_tokens!r}")
        self.model = model
        self.max_tokens = max_tokens
        self.options: dict[str, Any] = dict(options or {})
        import anthropic  # imported here so importing chatkeep.anthropic stays cheap

        self._given = client
        self._sdk_loop: asyncio.AbstractEventLoop | None = None
        if client is not None:
            if isinstance(client, anthropic.Anthropic) or not hasattr(client, "messages"):
                raise InvalidOption(
                    "client must be an anthropic.AsyncAnthropic (or a compatible async client)"
                )
            self._sdk_client = client
            self.__settings: dict[str, Any] = {}
            return
        key = api_key or os.environ.get(API_KEY_ENV)
        if not key:
            raise InvalidOption(f"no Anthropic API key: pass api_key=... or set {API_KEY_ENV}")
        settings: dict[str, Any] = {"api_key": key, "base_url": base_url}
        if timeout is not None:
            settings["timeout"] = timeout
        if max_retries is not None:
            settings["max_retries"] = max_retries
        if default_headers is not None:
            settings["default_headers"] = dict(default_headers)
        self.__settings = settings  # holds the API key: never shown (see __repr__)
        self._sdk_client = anthropic.AsyncAnthropic(**settings)

    def sdk(self) -> Any:
        """The ``anthropic.AsyncAnthropic`` client for the running event loop.

        A connection pool belongs to the event loop that opened it, and one object may serve
        several loops (``asyncio.run`` per call; ``Agent.run_sync`` keeps one loop per
        thread): a client this object built is rebuilt when the loop changes (a client
        passed in is always used as is).
        """
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        if self._sdk_loop is not None and self._sdk_loop is not loop:
            import anthropic

            self._sdk_client = anthropic.AsyncAnthropic(**self.__settings)
        self._sdk_loop = loop
        return self._sdk_client

    async def aclose(self) -> None:
        """Close the HTTP connections of a client this object built."""
        if self._given is None:
            await self._sdk_client.close()

    @property
    def base_url(self) -> str:
        """The service's base URL (any secret in it redacted)."""
        return redact_url(str(self._sdk_client.base_url))

    def __repr__(self) -> str:
        # Never the key: only what identifies the endpoint.
        return f"AnthropicChatClient(model={self.model!r}, base_url={self.base_url!r})"

    def _request(
        self,
        messages: list[Message],
        conversation_id: str | None,
        tools: Iterable[Any] | None,
    ) -> dict[str, Any]:
        if conversation_id is not None:
            # The history of that session lives in another service; sending only the new
            # messages here would silently drop it.
            raise HistoryConflict(
                f"this session's history is kept by a service (conversation {conversation_id!r}), "
                "but the Anthropic Messages API keeps none: continue it with the client that "
                "created it, or migrate its history into a history provider and clear the "
                "session's conversation_id first"
            )
        wire = to_anthropic(messages)
        request: dict[str, Any] = {"max_tokens": self.max_tokens}
        extra_body: dict[str, Any] = dict(self.options.get("extra_body") or {})
        accepted = self._accepted_parameters()
        for name, value in self.options.items():
            if name == "extra_body":
                continue
            # SDK versions differ in the parameters they name (some drop `temperature`);
            # whatever this one does not know still reaches the API through extra_body.
            if accepted is None or name in accepted:
                request[name] = value
            else:
                extra_body[name] = value
        if extra_body:
            request["extra_body"] = extra_body
        request["model"] = self.model
        request["messages"] = wire.messages
        if wire.system is not None:
            request["system"] = wire.system
        offered = [tool_to_anthropic(tool) for tool in tools or ()]
        if offered:
            request["tools"] = [*request.get("tools", []), *offered]
        return request

    def _accepted_parameters(self) -> frozenset[str] | None:
        try:
            signature = inspect.signature(self._sdk_client.messages.create)
        except (TypeError, ValueError):
            return None
        if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
            return None
        return frozenset(signature.parameters)

    async def get_response(
        self,
        messages: list[Message],
        *,
        conversation_id: str | None = None,
        tools: Iterable[Any] | None = None,
    ) -> ChatResponse:
        """Send ``messages`` (the whole history) and return the assistant's message.

        ``ChatResponse.additional_properties`` has the ``stop_reason``, ``model`` and
        ``usage`` the API reported.
        """
        request = self._request(messages, conversation_id, tools)
        response = await self.sdk().messages.create(**request)
        usage = response.usage.model_dump(mode="json", exclude_none=True) if response.usage else {}
        return ChatResponse(
            [message_from_response(response)],
            None,
            {"stop_reason": response.stop_reason, "model": response.model, "usage": usage},
        )

    async def get_streaming_response(
        self,
        messages: list[Message],
        *,
        conversation_id: str | None = None,
        tools: Iterable[Any] | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """Stream the reply: text and thinking as they arrive; a tool call (or any other
        block) in one update when its block is complete, with the same contents
        :meth:`get_response` would have returned."""
        request = self._request(messages, conversation_id, tools)
        stream = await self.sdk().messages.create(**request, stream=True)
        message_id: str | None = None
        blocks: dict[int, dict[str, Any]] = {}
        partial_json: dict[int, str] = {}
        try:
            async for event in stream:
                kind = event.type
                if kind == "message_start":
                    message_id = event.message.id
                    continue
                if kind == "content_block_start":
                    block = event.content_block.model_dump(mode="json", exclude_none=True)
                    blocks[event.index] = block
                    if block["type"] == "text" and block.get("text"):
                        yield self._update(message_id, TextContent(block["text"]))
                    continue
                if kind == "content_block_delta":
                    piece = self._delta(event.index, event.delta, blocks, partial_json)
                    if piece is not None:
                        yield self._update(message_id, piece)
                    continue
                if kind == "content_block_stop":
                    final = self._finished_block(event.index, blocks, partial_json)
                    if final is not None:
                        yield self._update(message_id, final)
        finally:
            await stream.close()

    @staticmethod
    def _update(message_id: str | None, content: Content) -> ChatResponseUpdate:
        return ChatResponseUpdate([content], "assistant", message_id)

    @staticmethod
    def _delta(
        index: int, delta: Any, blocks: dict[int, dict[str, Any]], partial_json: dict[int, str]
    ) -> Content | None:
        block = blocks.get(index, {})
        if delta.type == "text_delta":
            block["text"] = block.get("text", "") + delta.text
            return TextContent(delta.text)
        if delta.type == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
            return ReasoningContent(delta.thinking)
        if delta.type == "signature_delta":
            block["signature"] = delta.signature
            return ReasoningContent(None, delta.signature)
        if delta.type == "input_json_delta":
            partial_json[index] = partial_json.get(index, "") + delta.partial_json
            return None
        if delta.type == "citations_delta":
            block.setdefault("citations", []).append(
                delta.citation.model_dump(mode="json", exclude_none=True)
            )
        return None

    @staticmethod
    def _finished_block(
        index: int, blocks: dict[int, dict[str, Any]], partial_json: dict[int, str]
    ) -> Content | None:
        block = blocks.get(index)
        if block is None or block["type"] in ("text", "thinking"):
            return None  # already streamed piece by piece
        if block["type"] == "tool_use":
            text = partial_json.get(index, "")
            block["input"] = json.loads(text) if text.strip() else {}
            content = content_from_block(block)
            assert isinstance(content, FunctionCallContent)
            return content
        content = content_from_block(block)
        return content if not isinstance(content, UnknownContent) or content.raw else None
