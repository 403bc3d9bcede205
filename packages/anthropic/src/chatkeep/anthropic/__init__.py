"""chatkeep-anthropic: a chatkeep chat client for the Anthropic Messages API.

::

    from chatkeep.anthropic import AnthropicChatClient
    from chatkeep.core import Agent, HistoryProvider

    agent = Agent(
        AnthropicChatClient(model="claude-sonnet-4-5"),  # key from ANTHROPIC_API_KEY
        history_provider=HistoryProvider("sqlite:///chats.db"),
    )

The Messages API keeps no history, so a history provider sends the whole conversation
each turn. :mod:`chatkeep.anthropic.convert` maps chatkeep messages to the wire format and
back (system as a top-level field, tool results as user ``tool_result`` blocks, thinking
blocks with their signatures).
"""

from __future__ import annotations

from .client import API_KEY_ENV, AnthropicChatClient
from .convert import AnthropicRequest, from_anthropic, message_from_response, to_anthropic

__all__ = [
    "API_KEY_ENV",
    "AnthropicChatClient",
    "AnthropicRequest",
    "from_anthropic",
    "message_from_response",
    "to_anthropic",
]
