"""The errors of chatkeep-openai's clients (each a :class:`chatkeep.core.ChatkeepError`).

The SDK's own errors (``openai.APIError`` and its subclasses: authentication, rate limits,
connection failures) pass through unchanged; these are the ones chatkeep adds.
"""

from __future__ import annotations

from chatkeep.core import ChatkeepError

__all__ = ["ConversationNotFound", "ResponseFailed"]


class ConversationNotFound(ChatkeepError, LookupError):
    """The service does not know the conversation or response id the session holds (it
    expired, was deleted, or belongs to another vendor or protocol)."""

    def __init__(self, conversation_id: str, service: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(
            f"{service} does not know {conversation_id!r}: it may have expired or been "
            "deleted, or the session was created with another vendor or protocol. The "
            "history behind it cannot be read; start a new session (or fork a stored one)."
        )


class ResponseFailed(ChatkeepError, RuntimeError):
    """The service reported that it could not produce the response (``status: failed``
    or a stream ``error`` event); the message is the service's."""
