"""Where ADK sessions and their shared state live in a chatkeep store: session ids.

Per app ``A``, user ``U`` and session ``S`` (each an :func:`~chatkeep.core.adapters.id_component`:
percent-encoded, or hashed when long, so no two ids meet and none holds ``/``):

=====================  ==============================================================
``adk:<A>/<U>/<S>``    the session's log: its creation record, then one message record
                       per event (see :mod:`.records`)
``adk:<A>/<U>``        the user's ``user:`` state, one ``chatkeep.state`` record per change
``adk:<A>``            the app's ``app:`` state, one ``chatkeep.state`` record per change
=====================  ==============================================================

Listing the sessions that start with ``adk:<A>/<U>/`` finds a user's sessions and nothing
else; ``adk:<A>/`` finds an app's sessions and its users' state logs (one part fewer).
"""

from __future__ import annotations

from dataclasses import dataclass

from chatkeep.core.adapters import id_component, id_from_component
from chatkeep.core.errors import InvalidOption

__all__ = [
    "PREFIX",
    "SessionKeys",
    "app_prefix",
    "app_state_key",
    "parse",
    "session_keys",
    "user_prefix",
    "user_state_key",
]

#: What every session id this adapter writes starts with.
PREFIX = "adk:"


def _part(name: str, value: object) -> str:
    if type(value) is not str:
        raise InvalidOption(f"{name} must be a str, not {type(value).__name__}")
    return id_component(value)


@dataclass(frozen=True, slots=True)
class SessionKeys:
    """The chatkeep session ids one ADK session reads and writes."""

    session: str  #: the session's own log
    user_state: str  #: its user's ``user:`` state
    app_state: str  #: its app's ``app:`` state


def session_keys(app_name: str, user_id: str, session_id: str) -> SessionKeys:
    """The keys of session ``session_id`` of ``user_id`` in ``app_name``."""
    user = user_state_key(app_name, user_id)
    return SessionKeys(f"{user}/{_part('session_id', session_id)}", user, app_state_key(app_name))


def app_state_key(app_name: str) -> str:
    """The log of an app's ``app:`` state."""
    return PREFIX + _part("app_name", app_name)


def user_state_key(app_name: str, user_id: str) -> str:
    """The log of a user's ``user:`` state in an app."""
    return f"{app_state_key(app_name)}/{_part('user_id', user_id)}"


def user_prefix(app_name: str, user_id: str) -> str:
    """What the ids of a user's session logs start with (and nothing else's)."""
    return user_state_key(app_name, user_id) + "/"


def app_prefix(app_name: str) -> str:
    """What the ids of an app's session logs and user state logs start with."""
    return app_state_key(app_name) + "/"


def parse(app_key_prefix: str, key: str) -> tuple[str | None, str | None] | None:
    """``(user_id, session_id)`` of a session log listed under ``app_key_prefix`` (either is
    ``None`` where the key holds only a digest: the session's creation record has it), or
    ``None`` for any other key (a user's state log, another layout's session)."""
    if not key.startswith(app_key_prefix):
        return None
    parts = key[len(app_key_prefix) :].split("/")
    if len(parts) != 2:
        return None
    return id_from_component(parts[0]), id_from_component(parts[1])
