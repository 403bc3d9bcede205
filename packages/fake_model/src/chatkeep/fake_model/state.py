"""Server-side state of the fake model server and the types its handlers share."""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ApiError",
    "Conversation",
    "JsonReply",
    "ServerState",
    "StoredResponse",
    "StreamReply",
    "approximate_tokens",
    "word_pieces",
]


class ApiError(Exception):
    """An HTTP error answer; the server formats it as the protocol's error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code


@dataclass
class JsonReply:
    """A JSON answer."""

    body: Any
    status: int = 200


@dataclass
class StreamReply:
    """A server-sent-events answer: ``(event name or None, data text)`` pairs."""

    events: list[tuple[str | None, str]]


@dataclass
class StoredResponse:
    """A Responses API response kept server-side (``store=True``)."""

    body: dict[str, Any]
    #: The whole effective history after this response: earlier items, input, output.
    history: list[dict[str, Any]]
    input_items: list[dict[str, Any]]


@dataclass
class Conversation:
    """A Conversations API conversation: a linear list of items."""

    conversation_id: str
    created_at: int
    metadata: dict[str, Any] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        """The conversation object the API returns."""
        return {
            "id": self.conversation_id,
            "object": "conversation",
            "created_at": self.created_at,
            "metadata": dict(self.metadata),
        }


class ServerState:
    """Everything the fake server remembers; handlers hold :attr:`lock` while using it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        #: Signs thinking blocks and encrypted reasoning so tampering is detected.
        self.secret = secrets.token_bytes(16)
        self.responses: dict[str, StoredResponse] = {}
        self.conversations: dict[str, Conversation] = {}

    def reset(self) -> None:
        """Forget every response and conversation."""
        with self.lock:
            self.responses.clear()
            self.conversations.clear()

    @staticmethod
    def new_id(prefix: str) -> str:
        """A fresh id such as ``resp_3f2a...`` (random, so ids never repeat after a reset)."""
        return f"{prefix}_{secrets.token_hex(12)}"

    @staticmethod
    def now() -> int:
        """Seconds since the epoch."""
        return int(time.time())


def approximate_tokens(*texts: str) -> int:
    """A deterministic stand-in for a token count: words plus a little per text."""
    return sum(len(text.split()) + 1 for text in texts)


def word_pieces(text: str) -> list[str]:
    """``text`` split as a model streams it: the first word, then ``" word"`` pieces."""
    words = text.split(" ")
    return [word if index == 0 else " " + word for index, word in enumerate(words)]
