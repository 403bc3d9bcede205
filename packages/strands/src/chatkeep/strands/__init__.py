"""chatkeep-strands: Strands Agents sessions on any chatkeep store.

::

    from strands import Agent
    from chatkeep.strands import ChatkeepSessionManager

    agent = Agent(session_manager=ChatkeepSessionManager("s1", url="sqlite:///chats.db"))

:class:`ChatkeepSessionRepository` is the ``SessionRepository``; a redaction of a message
is an in-place edit of the conversation's view (the log keeps the original).
"""

from .messages import STRANDS_KEY, UNKNOWN_TYPE, from_session_message, to_session_message
from .repository import (
    PREFIX,
    ChatkeepSessionManager,
    ChatkeepSessionRepository,
    agent_key,
    session_key,
)

__all__ = [
    "PREFIX",
    "STRANDS_KEY",
    "UNKNOWN_TYPE",
    "ChatkeepSessionManager",
    "ChatkeepSessionRepository",
    "agent_key",
    "from_session_message",
    "session_key",
    "to_session_message",
]
