"""A deterministic, offline chat client for demos and tests.

Its replies prove which history it was sent: each reply names how many messages it saw,
the first and the latest user text. With ``service_managed=True`` it behaves like a
service that keeps conversations itself (it returns a conversation id and remembers the
history server-side), so the same agent code can be run both ways.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .agent import ChatResponse
from .ids import new_id
from .messages import Message

__all__ = ["OfflineChatClient"]


@dataclass
class OfflineChatClient:
    """Replies ``"[seen N] first: '...' | latest: '...'"`` from the messages it receives.

    ``requests`` records every list of messages received, for tests. ``fail_next`` makes
    the next call raise ``RuntimeError`` (to show nothing is stored for a failed call).
    """

    service_managed: bool = False
    requests: list[list[Message]] = field(default_factory=list)
    fail_next: bool = False
    _conversations: dict[str, list[Message]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get_response(
        self, messages: list[Message], *, conversation_id: str | None = None
    ) -> ChatResponse:
        """Answer from ``messages`` (plus the server-side history of ``conversation_id``)."""
        with self._lock:
            self.requests.append(list(messages))
            if self.fail_next:
                self.fail_next = False
                raise RuntimeError("offline client: simulated model failure")
            history: list[Message] = []
            if self.service_managed:
                if conversation_id is None:
                    conversation_id = "conv_" + new_id()
                history = self._conversations.setdefault(conversation_id, [])
            elif conversation_id is not None:
                raise ValueError("this client keeps no conversations (service_managed=False)")
            seen = [m for m in history + list(messages) if m.role != "system"]
            users = [m.text for m in seen if m.role == "user"]
            first = users[0] if users else ""
            latest = users[-1] if users else ""
            reply = Message.assistant(f"[seen {len(seen)}] first: {first!r} | latest: {latest!r}")
            if self.service_managed:
                history.extend(m for m in messages if m.role != "system")
                history.append(reply)
            return ChatResponse([reply], conversation_id if self.service_managed else None)
