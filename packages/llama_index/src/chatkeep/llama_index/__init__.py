"""chatkeep-llama-index: any chatkeep store as a LlamaIndex ``BaseChatStore``.

::

    from llama_index.core.memory import ChatMemoryBuffer
    from chatkeep.llama_index import ChatkeepChatStore

    chat_store = ChatkeepChatStore(url="sqlite:///chats.db")
    memory = ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key="user-42")

``ChatMessage`` objects round-trip exactly and are stored as chatkeep messages
(:mod:`.messages` has the mapping); in-place edits are view operations in the same log.
"""

from .messages import BLOCK_KEY, UNKNOWN_TYPE, chat_message_to_message, message_to_chat_message
from .store import ChatkeepChatStore

__all__ = [
    "BLOCK_KEY",
    "UNKNOWN_TYPE",
    "ChatkeepChatStore",
    "chat_message_to_message",
    "message_to_chat_message",
]
