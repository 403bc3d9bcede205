"""chatkeep-agent-framework: Microsoft Agent Framework's ``HistoryProvider`` on any chatkeep
store.

    from chatkeep.agent_framework import ChatkeepHistoryProvider

    agent = Agent(client, context_providers=[ChatkeepHistoryProvider(url="sqlite:///chats.db")])

See :class:`ChatkeepHistoryProvider` and :mod:`chatkeep.agent_framework.convert`.
"""

from .convert import FRAMEWORK_MESSAGE_ID, from_maf, to_maf
from .provider import ChatkeepHistoryProvider

__all__ = ["FRAMEWORK_MESSAGE_ID", "ChatkeepHistoryProvider", "from_maf", "to_maf"]
