"""chatkeep-pydantic-ai: any chatkeep store as a Pydantic AI ``ConversationStore``.

::

    from chatkeep.pydantic_ai import ChatkeepConversationStore

    store = ChatkeepConversationStore(url="sqlite:///chats.db")
    conversation = await store.load("c1") or Conversation(conversation_id="c1")
    result = await agent.run("Hello", conversation=conversation)
    await store.save(result)

Each conversation is a chatkeep session whose messages are its current history
(:mod:`.convert` has the mapping; :func:`to_chatkeep` makes the chatkeep message a
``ModelMessage`` is shown as).
"""

import sys

if __name__ != "chatkeep.pydantic_ai":  # pragma: no cover - only when sys.path is wrong
    raise ImportError(
        f"chatkeep's Pydantic AI adapter was imported as {__name__!r}: a folder named "
        "'chatkeep' (site-packages/chatkeep or a checkout's src/chatkeep) is on sys.path, so "
        "its 'pydantic_ai' package hides Pydantic AI's. Remove that folder from sys.path "
        "(with pytest: --import-mode=importlib) and import chatkeep.pydantic_ai instead."
    )
if sys.version_info < (3, 11):  # pragma: no cover - Pydantic AI itself needs 3.11
    raise ImportError("chatkeep-pydantic-ai needs Python 3.11 or later (as Pydantic AI does)")

from .convert import PAYLOAD_KEY, to_chatkeep
from .store import DEFAULT_PREFIX, ChatkeepConversationStore

__all__ = ["DEFAULT_PREFIX", "PAYLOAD_KEY", "ChatkeepConversationStore", "to_chatkeep"]
