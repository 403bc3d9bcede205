"""Moving a session from service-managed to client-managed history.

A session that a service-managed client ran (Responses with ``store=True``,
Conversations) holds only a conversation id; its history is on the service. A
client-managed client (Chat Completions, Responses with ``store=False``, Anthropic
Messages) cannot read it, so it refuses such a session with
:class:`~chatkeep.core.HistoryConflict` instead of answering without the history.
:func:`migrate_to_client_managed` reads the history back from the service, stores it
through a history provider and clears the conversation id; the session then continues
with any client::

    moved = await migrate_to_client_managed(
        session, source=ResponsesClient("gpt-5-mini"), history_provider=provider
    )
    agent = Agent(ChatCompletionsClient("gpt-5-mini"), history_provider=provider)
    await agent.run("Where were we?", session)      # the model sees the whole history
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from chatkeep.core import (
    AgentSession,
    FunctionCallContent,
    HistoryConflict,
    HistoryProvider,
    InMemoryHistoryProvider,
    Message,
    new_id,
)

__all__ = ["migrate_to_client_managed"]


def _signature(message: Message) -> tuple[str, str, tuple[str, ...]]:
    calls = tuple(c.call_id for c in message.contents if isinstance(c, FunctionCallContent))
    return message.role, message.text, calls


async def migrate_to_client_managed(
    session: AgentSession,
    *,
    source: Any,
    history_provider: HistoryProvider | None = None,
) -> list[Message]:
    """Copy the service-kept history of ``session`` into ``history_provider`` and make
    the session client-managed (``conversation_id = None``). Returns the messages stored.

    ``source`` is the service-managed client the session was run with (anything with
    ``export_history(conversation_id)``). ``history_provider`` defaults to an
    :class:`~chatkeep.core.InMemoryHistoryProvider`, which keeps the history in the
    session's state (what an agent without a provider uses).

    When the provider already holds history for the session (it was client-managed before
    it moved to the service), only what the service added since is stored; if the two
    disagree, :class:`~chatkeep.core.HistoryConflict` is raised and nothing is changed.
    Instructions are not part of a service's history; pass them to the agent as before.
    """
    conversation_id = session.conversation_id
    if conversation_id is None:
        return []
    export: Callable[[str], Awaitable[list[Message]]] | None = getattr(
        source, "export_history", None
    )
    if export is None:
        raise HistoryConflict(
            f"{type(source).__name__} cannot read a conversation back from its service; "
            "pass the service-managed client the session was run with as source="
        )
    provider = history_provider if history_provider is not None else InMemoryHistoryProvider()
    remote = list(await export(conversation_id))
    local = await provider.load(session)
    prefix = [_signature(m) for m in local]
    if prefix and [_signature(m) for m in remote[: len(prefix)]] != prefix:
        raise HistoryConflict(
            f"the session's local history ({len(local)} messages) is not the start of the "
            f"history the service keeps for {conversation_id!r}; nothing was migrated"
        )
    added = [m if m.message_id else replace(m, message_id=new_id()) for m in remote[len(local) :]]
    if added:
        await provider.save(session, added)
    session.conversation_id = None
    return added
