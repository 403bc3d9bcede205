"""chatkeep-openai-agents: any chatkeep store as an OpenAI Agents SDK ``Session``.

::

    from agents import Agent, Runner
    from chatkeep.openai_agents import ChatkeepSession

    session = ChatkeepSession("conversation-1", url="sqlite:///chats.db")
    result = Runner.run_sync(agent, "Hello", session=session)

Items round-trip exactly and are stored as chatkeep messages (:mod:`.items` has the
mapping, :func:`item_to_message` / :func:`message_to_items` do it by hand).
"""

from .items import ITEM_KEY, UNKNOWN_TYPE, item_to_message, message_to_items
from .session import ChatkeepSession, SessionClosed

__all__ = [
    "ITEM_KEY",
    "UNKNOWN_TYPE",
    "ChatkeepSession",
    "SessionClosed",
    "item_to_message",
    "message_to_items",
]
