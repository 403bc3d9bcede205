"""``ResponsesClient``: the Responses API, either way its ``store`` flag sets.

- ``ResponsesClient(model)`` (``store=True``, the default) is **service-managed**: the
  service keeps every response; a call sends only the new input plus
  ``previous_response_id``, and returns the new response's id as the conversation id,
  which the agent keeps in the session. Continuing from *any* earlier response id forks
  the conversation there (:meth:`ResponsesClient.fork_from`).
- ``ResponsesClient(model, store=False)`` is **client-managed**: nothing is kept by the
  service, every call sends the whole history from the agent's history provider, and
  reasoning items come back with ``encrypted_content`` so they can be handed back.

::

    agent = Agent(ResponsesClient("gpt-5-mini"))            # service keeps the history
    session = agent.create_session()
    await agent.run("Three vacation spots?", session)
    spot = session.conversation_id                           # a response id
    await agent.run("Tell me about the first.", session)
    branch = agent.client.fork_from(spot)                    # a new session from there
    await agent.run("Tell me about the second.", branch)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, cast

import openai
from chatkeep.core import (
    AgentSession,
    ChatResponse,
    ChatResponseUpdate,
    HistoryConflict,
    Message,
    TextContent,
    Tool,
    new_id,
)

from ._base import OpenAIClientBase
from ._common import (
    dump,
    refuse_service_conversation,
    to_tools,
)
from .errors import ConversationNotFound, ResponseFailed
from .responses_format import from_items, split_instructions, to_items, to_response_tools

__all__ = ["ResponsesClient", "ResponsesClientBase"]

_ENCRYPTED_REASONING = "reasoning.encrypted_content"


class ResponsesClientBase(OpenAIClientBase):
    """What the Responses and Conversations clients share: building a request from core
    messages and reading a response (or its stream) back."""

    def _conversation_fields(self, conversation_id: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def _returned_id(self, response_id: str, conversation_id: str | None) -> str | None:
        raise NotImplementedError

    async def _prepare(self, conversation_id: str | None) -> str | None:
        """Check (or create) the conversation before a call; returns the id to use."""
        return conversation_id

    def _body(
        self,
        messages: list[Message],
        conversation_id: str | None,
        tools: Iterable[Tool | Callable[..., Any]] | None,
    ) -> dict[str, Any]:
        instructions, rest = split_instructions(messages)
        tool_list = to_tools(tools)
        return self._request(
            input=to_items(rest),
            instructions=instructions,
            tools=to_response_tools(tool_list) if tool_list else None,
            **self._conversation_fields(conversation_id),
        )

    def _check_missing(self, error: openai.APIStatusError, conversation_id: str | None) -> None:
        """Raise :class:`ConversationNotFound` when ``error`` says the session's
        conversation or response id is unknown (a 404 may also mean "no such model")."""
        if conversation_id is None:
            return
        code = getattr(error, "code", None)
        param = getattr(error, "param", None)
        if code == "previous_response_not_found" or (
            error.status_code == 404
            and (param in ("previous_response_id", "conversation") or conversation_id in str(error))
        ):
            raise ConversationNotFound(conversation_id, type(self).__name__) from error

    async def get_response(
        self,
        messages: list[Message],
        *,
        conversation_id: str | None = None,
        tools: Iterable[Tool | Callable[..., Any]] | None = None,
    ) -> ChatResponse:
        """Send ``messages`` (only what is new, when the service keeps the conversation)
        and return the model's turn as one assistant message (reasoning, text and tool
        calls in order)."""
        conversation_id = await self._prepare(conversation_id)
        body = self._body(messages, conversation_id, tools)
        sdk = await self.sdk()
        try:
            response = await sdk.responses.create(**body)
        except (openai.NotFoundError, openai.BadRequestError) as error:
            self._check_missing(error, conversation_id)
            raise
        if response.status == "failed":
            detail = response.error.message if response.error else "no detail given"
            raise ResponseFailed(f"the response failed: {detail}")
        details: dict[str, Any] = {"response_id": response.id, "model": response.model}
        if response.usage is not None:
            details["usage"] = dump(response.usage)
        if response.status and response.status != "completed":
            details["status"] = response.status
        return ChatResponse(
            from_items(response.output), self._returned_id(response.id, conversation_id), details
        )

    async def get_streaming_response(
        self,
        messages: list[Message],
        *,
        conversation_id: str | None = None,
        tools: Iterable[Tool | Callable[..., Any]] | None = None,
    ) -> AsyncIterator[ChatResponseUpdate]:
        """Stream the model's turn: text as it arrives; reasoning, tool calls and other
        items whole as each completes; the conversation id last."""
        conversation_id = await self._prepare(conversation_id)
        body = self._body(messages, conversation_id, tools)
        sdk = await self.sdk()
        try:
            stream = await sdk.responses.create(**body, stream=True)
        except (openai.NotFoundError, openai.BadRequestError) as error:
            self._check_missing(error, conversation_id)
            raise
        message_id = new_id()
        streamed: set[int] = set()  # output indexes whose text came as deltas
        done: set[int] = set()  # output indexes sent whole
        final: Any = None
        response_id: str | None = None

        def whole(index: int, item: dict[str, Any]) -> ChatResponseUpdate | None:
            if item.get("type") == "message" and index in streamed:
                # Its text was streamed; only what deltas do not carry (refusals) remains.
                item = {
                    **item,
                    "content": [p for p in item.get("content") or () if p.get("type") == "refusal"],
                }
            contents = [c for m in from_items([item]) for c in m.contents]
            done.add(index)
            return ChatResponseUpdate(contents, "assistant", message_id) if contents else None

        async for event in cast(Any, stream):
            kind = getattr(event, "type", "")
            if kind == "response.created":
                response_id = event.response.id
            elif kind == "response.output_text.delta":
                streamed.add(event.output_index)
                if event.delta:
                    yield ChatResponseUpdate([TextContent(event.delta)], "assistant", message_id)
            elif kind == "response.output_item.done":
                update = whole(event.output_index, dump(event.item))
                if update is not None:
                    yield update
            elif kind in ("response.completed", "response.incomplete"):
                final = event.response
            elif kind == "response.failed":
                failure = event.response.error
                raise ResponseFailed(
                    f"the response failed: {failure.message if failure else 'no detail given'}"
                )
            elif kind == "error":
                raise ResponseFailed(f"the response stream failed: {event.message}")
        if final is not None:
            response_id = final.id
            for index, item in enumerate(final.output):
                if index not in done:  # a server that sent no item events
                    update = whole(index, dump(item))
                    if update is not None:
                        yield update
        if response_id is None:
            raise ResponseFailed("the response stream ended before the response was created")
        yield ChatResponseUpdate(
            conversation_id=self._returned_id(response_id, conversation_id),
            additional_properties={"response_id": response_id},
        )


class ResponsesClient(ResponsesClientBase):
    """A chat client over ``POST /responses``.

    ``ResponsesClient(model, *, store=True, include_encrypted_reasoning=True, client=None,
    api_key=None, base_url=None, options=None, ...)``.

    With ``store=True`` the service keeps the conversation: the response id is returned
    as the conversation id, and a later call continues from it (or from any earlier
    response id, which forks). With ``store=False`` the client keeps it: every call sends
    the whole history and no conversation id is returned; reasoning items are requested
    with ``encrypted_content`` (``include_encrypted_reasoning``) so a reasoning model gets
    its earlier reasoning back.

    Leading system messages are sent as ``instructions``, which a stored response does not
    carry over, so they are sent with each call and never accumulate in the conversation.
    """

    def __init__(
        self,
        model: str,
        *,
        store: bool = True,
        include_encrypted_reasoning: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        self.store = store
        self.service_managed = store
        self.include_encrypted_reasoning = include_encrypted_reasoning

    def _conversation_fields(self, conversation_id: str | None) -> dict[str, Any]:
        if self.store:
            return {"store": True, "previous_response_id": conversation_id}
        fields: dict[str, Any] = {"store": False}
        if self.include_encrypted_reasoning:
            fields["include"] = [_ENCRYPTED_REASONING]
        return fields

    def _returned_id(self, response_id: str, conversation_id: str | None) -> str | None:
        return response_id if self.store else None

    async def _prepare(self, conversation_id: str | None) -> str | None:
        if not self.store:
            refuse_service_conversation(self, conversation_id)
        elif conversation_id is not None and conversation_id.startswith("conv_"):
            raise HistoryConflict(
                f"{conversation_id!r} is a Conversations API conversation, not a response id; "
                "continue this session with ConversationsClient"
            )
        return conversation_id

    def fork_from(self, response_id: str, session_id: str | None = None) -> AgentSession:
        """A new session that continues the conversation from ``response_id`` (any earlier
        response of it); the original session is unaffected. Needs ``store=True``."""
        if not self.store:
            raise HistoryConflict(
                "fork_from needs store=True: with store=False the service keeps no responses "
                "(fork the stored session with chatkeep.core.fork instead)"
            )
        return AgentSession(session_id, conversation_id=response_id)

    async def export_history(self, response_id: str) -> list[Message]:
        """The conversation that ends at ``response_id``, read back from the service
        (every input and output item along its chain of previous responses), as core
        messages; used to move a session to client-managed history. Instructions are not
        part of it (the service does not keep them)."""
        sdk = await self.sdk()
        chain: list[tuple[list[Any], list[Any]]] = []
        current: str | None = response_id
        while current is not None:
            try:
                response = await sdk.responses.retrieve(current)
            except openai.NotFoundError as error:
                raise ConversationNotFound(current, type(self).__name__) from error
            inputs = [item async for item in sdk.responses.input_items.list(current, order="asc")]
            chain.append((inputs, list(response.output)))
            current = response.previous_response_id
        items: list[Any] = []
        seen: set[str] = set()
        for inputs, outputs in reversed(chain):
            for item in [*inputs, *outputs]:
                item_id = getattr(item, "id", None)
                if isinstance(item_id, str):
                    # A service may list earlier turns among a response's inputs too.
                    if item_id in seen:
                        continue
                    seen.add(item_id)
                items.append(item)
        return from_items(items)

    def _describe(self) -> str:
        return f"{super()._describe()}, store={self.store}"
