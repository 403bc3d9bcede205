"""chatkeep-langchain: any chatkeep store as a LangChain ``BaseChatMessageHistory``.

::

    from chatkeep.langchain import ChatkeepChatMessageHistory

    history = ChatkeepChatMessageHistory("conversation-1", url="sqlite:///chats.db")

Messages round-trip under LangChain's own equality and are stored as chatkeep messages
(:mod:`.convert` has the mapping; :func:`to_chatkeep` / :func:`from_chatkeep` do it by hand).
"""

if __name__ != "chatkeep.langchain":  # pragma: no cover - only when sys.path is wrong
    raise ImportError(
        f"chatkeep's LangChain adapter was imported as {__name__!r}: a folder named "
        "'chatkeep' (site-packages/chatkeep or a checkout's src/chatkeep) is on sys.path, so "
        "its 'langchain' package hides LangChain's. Remove that folder from sys.path (with "
        "pytest: --import-mode=importlib) and import chatkeep.langchain instead."
    )

from .convert import MESSAGE_KEY, UNKNOWN_TYPE, from_chatkeep, to_chatkeep
from .history import ChatkeepChatMessageHistory

__all__ = [
    "MESSAGE_KEY",
    "UNKNOWN_TYPE",
    "ChatkeepChatMessageHistory",
    "from_chatkeep",
    "to_chatkeep",
]
