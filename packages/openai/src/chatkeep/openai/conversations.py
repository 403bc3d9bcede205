"""``ConversationsClient``: a linear conversation kept by the service (Conversations API).

The first call creates a conversation (``POST /conversations``) and every call sends only
the new input with ``conversation=<id>`` to ``POST /responses``; the service appends
input and output to the conversation. The conversation id is returned as the
conversation id, so the agent keeps it in the session. Unlike ``ResponsesClient``
(``store=True``), a conversation is linear: it cannot be continued from an earlier point.

::

    client = ConversationsClient("gpt-5-mini")
    agent = Agent(client)
    session = await client.create_session()     # or let the first run create it
    await agent.run("What is the capital of France?", session)
    await agent.run("And of Germany?", session)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import openai
from chatkeep.core import AgentSession, HistoryConflict, Message

from .errors import ConversationNotFound
from .responses import ResponsesClientBase
from .responses_format import from_items

__all__ = ["ConversationsClient"]


class ConversationsClient(ResponsesClientBase):
    """A service-managed, linear chat client over the Conversations API.

    ``ConversationsClient(model, *, metadata=None, client=None, api_key=None,
    base_url=None, options=None, ...)``; ``metadata`` is attached to each conversation it
    creates.
    """

    service_managed = True

    def __init__(
        self, model: str, *, metadata: Mapping[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(model, **kwargs)
        self.metadata = dict(metadata or {})

    async def create_conversation(self) -> str:
        """Create an empty conversation on the service and return its id."""
        sdk = await self.sdk()
        if self.metadata:
            conversation = await sdk.conversations.create(metadata=self.metadata)
        else:
            conversation = await sdk.conversations.create()
        return conversation.id

    async def create_session(self, session_id: str | None = None) -> AgentSession:
        """A new session bound to a new conversation on the service."""
        return AgentSession(session_id, conversation_id=await self.create_conversation())

    async def _prepare(self, conversation_id: str | None) -> str | None:
        if conversation_id is None:
            return await self.create_conversation()
        if conversation_id.startswith("resp_"):
            raise HistoryConflict(
                f"{conversation_id!r} is a Responses API response id, not a conversation; "
                "continue this session with ResponsesClient(store=True)"
            )
        return conversation_id

    def _conversation_fields(self, conversation_id: str | None) -> dict[str, Any]:
        return {"conversation": conversation_id}

    def _returned_id(self, response_id: str, conversation_id: str | None) -> str | None:
        return conversation_id

    async def export_history(self, conversation_id: str) -> list[Message]:
        """Every item of the conversation, oldest first, as core messages (used to move a
        session to client-managed history)."""
        sdk = await self.sdk()
        try:
            listing = sdk.conversations.items.list(conversation_id, order="asc")
            items = [item async for item in listing]
        except openai.NotFoundError as error:
            raise ConversationNotFound(conversation_id, type(self).__name__) from error
        return from_items(items)
