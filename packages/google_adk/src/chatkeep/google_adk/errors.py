"""The errors :class:`~chatkeep.google_adk.ChatkeepSessionService` raises.

Each is the error ADK's own session services raise in the same case (so code written
against them catches it unchanged) and a :class:`~chatkeep.core.errors.ChatkeepError`.
"""

from __future__ import annotations

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError

from chatkeep.core.errors import ChatkeepError

__all__ = ["SessionAlreadyExists", "SharedStateBusy", "StaleSession", "UnknownSession"]


class SessionAlreadyExists(ChatkeepError, AlreadyExistsError):
    """``create_session`` with the id of a session that exists (ADK's
    ``AlreadyExistsError``)."""


class UnknownSession(ChatkeepError, SessionNotFoundError):
    """``append_event`` to a session that is not stored (never created, or deleted):
    ADK's ``SessionNotFoundError`` (a ``ValueError``)."""


class StaleSession(ChatkeepError, StaleSessionError):
    """``append_event`` with a session object another writer got ahead of: ADK's
    ``StaleSessionError`` (a ``ValueError``). Nothing was stored; reload the session with
    ``get_session`` and append again."""


class SharedStateBusy(ChatkeepError, RuntimeError):
    """An ``app:`` or ``user:`` state update kept losing to other writers; the event
    itself was stored."""

    def __init__(self, key: str, attempts: int) -> None:
        self.key = key
        super().__init__(
            f"the shared state {key!r} kept changing while {attempts} updates were tried; "
            "the event was stored, its app:/user: state change was not"
        )
