"""chatkeep-google-adk: any chatkeep store as a Google ADK session service.

::

    from google.adk.runners import Runner
    from chatkeep.google_adk import ChatkeepSessionService

    service = ChatkeepSessionService(url="sqlite:///sessions.db")  # or redis://, postgresql://, ...
    runner = Runner(agent=agent, app_name="my_app", session_service=service)

Sessions, events and ``app:``/``user:`` state behave as in ADK's ``DatabaseSessionService``;
every event is also a chatkeep message, so ``chatkeep sessions show`` reads the
conversation (see the README for the record layout).
"""

import sys

if sys.version_info < (3, 11):  # pragma: no cover - the oldest-Python CI session
    raise ImportError(
        "chatkeep.google_adk needs Python 3.11 or newer (google-adk, which it adapts, does)"
    )

from .errors import SessionAlreadyExists, SharedStateBusy, StaleSession, UnknownSession
from .service import ChatkeepSessionService

__all__ = [
    "ChatkeepSessionService",
    "SessionAlreadyExists",
    "SharedStateBusy",
    "StaleSession",
    "UnknownSession",
]
