"""chatkeep-openai: chat clients for OpenAI-compatible APIs, on the official ``openai`` SDK.

One application, four ways to keep its history::

    from chatkeep.core import Agent, HistoryProvider
    from chatkeep.openai import ChatCompletionsClient, ConversationsClient, ResponsesClient
    from chatkeep.vendors import make_client

    Agent(ChatCompletionsClient("gpt-5-mini"), history_provider=HistoryProvider(url))  # client
    Agent(ResponsesClient("gpt-5-mini", store=False), history_provider=HistoryProvider(url))
    Agent(ResponsesClient("gpt-5-mini"))        # service-managed, forkable by response id
    Agent(ConversationsClient("gpt-5-mini"))    # service-managed, linear
    Agent(make_client("deepseek", "chat_completions", "deepseek-chat"))  # a vendor preset

The agent code (``agent.run(text, session)``) is the same for all of them.
"""

from ._base import OpenAIClientBase
from .chat_completions import ChatCompletionsClient
from .chat_format import from_chat_messages, to_chat_messages
from .conversations import ConversationsClient
from .errors import ConversationNotFound, ResponseFailed
from .migrate import migrate_to_client_managed
from .responses import ResponsesClient
from .responses_format import from_items, to_items

__all__ = [
    "ChatCompletionsClient",
    "ConversationNotFound",
    "ConversationsClient",
    "OpenAIClientBase",
    "ResponseFailed",
    "ResponsesClient",
    "from_chat_messages",
    "from_items",
    "migrate_to_client_managed",
    "to_chat_messages",
    "to_items",
]
