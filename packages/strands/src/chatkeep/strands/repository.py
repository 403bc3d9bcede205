"""``ChatkeepSessionRepository`` and ``ChatkeepSessionManager``: Strands Agents sessions on
any chatkeep store.

Where a Strands session lives (``<s>``, ``<a>``, ``<m>``: the ids percent-encoded, so no
``/`` is left in them and two distinct ids never meet):

==============================  ==========================================================
``strands:<s>/``                the ``Session`` (its first record)
``strands:<s>/agent:<a>``       agent ``<a>``'s conversation: one chatkeep message per
                                Strands message; a redaction is an in-place edit
``strands:<s>/agent:<a>/state`` the ``SessionAgent`` (state, conversation-manager state),
                                one record per update: the last one is the agent
``strands:<s>/multi:<m>``       a multi-agent state, one record per update
==============================  ==========================================================

The session, agent and multi-agent records are the core's ``chatkeep.state`` control
records (owner ``"strands"``, the Strands object under ``state[<kind>]``, its values tagged
by :func:`chatkeep.core.codec.pack_value`, so NaN, bytes and tag-keyed dicts come back
exactly): views skip them, so no chatkeep reader mistakes them for messages. Sessions
written before, whose state records were messages of role ``strands`` with the object under
``additional_properties["strands"]``, are still read.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from strands.session.repository_session_manager import RepositorySessionManager
from strands.session.session_repository import SessionRepository
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

from chatkeep.core import (
    AppendConflict,
    EditOutOfRange,
    Message,
    Record,
    Store,
    encode_records,
    new_id,
)
from chatkeep.core.adapters import adapter_store, id_component, session_lock
from chatkeep.core.codec import MARKER, pack_value, parse_json, unpack_value
from chatkeep.core.metadata import RunningCount, read_view_counted, running_count, utc_stamp
from chatkeep.core.views import delete_session, edit_replace, list_conversations, read_view
from chatkeep.core.views._control import STATE, control_record, is_control_data

from .messages import STRANDS_KEY, from_session_message, to_session_message

if TYPE_CHECKING:
    from strands.multiagent.base import MultiAgentBase

__all__ = [
    "PREFIX",
    "ChatkeepSessionManager",
    "ChatkeepSessionRepository",
    "agent_key",
    "session_key",
]

#: Every Strands session id starts with this.
PREFIX = "strands:"
#: The ``owner`` of this adapter's ``chatkeep.state`` records.
OWNER = "strands"
_MARKER_BYTES = f'"{MARKER}"'.encode()
# Windows read from the end of a conversation while looking for a message id.
_FIRST_WINDOW = 8
# The most agents whose last state record a repository remembers.
_AGENTS_KEPT = 4096


def _component(value: str) -> str:
    """``value`` as one part of a session id (:func:`chatkeep.core.adapters.id_component`)."""
    if not isinstance(value, str) or not value:
        raise SessionException(f"a Strands id must be a non-empty str, not {value!r}")
    return id_component(value)


def session_key(session_id: str) -> str:
    """The chatkeep session holding the Strands ``Session`` (and the prefix of the rest)."""
    return f"{PREFIX}{_component(session_id)}/"


def agent_key(session_id: str, agent_id: str) -> str:
    """The chatkeep session holding an agent's conversation."""
    return f"{session_key(session_id)}agent:{_component(agent_id)}"


def _state(kind: str, data: dict[str, Any]) -> Record:
    """A ``chatkeep.state`` record of this adapter holding the Strands object ``data``."""
    return control_record(STATE, owner=OWNER, state={kind: pack_value(data)})


class _Legacy(Exception):
    """The record is a state record of the old form (a message of role ``strands``)."""


def _state_of_record(record: Record, kind: str) -> dict[str, Any] | None:
    """The Strands object of ``kind`` a ``chatkeep.state`` record of this adapter holds;
    ``None`` for any other control record. Raises :class:`_Legacy` for a message record
    (how state was stored before: read it through the view)."""
    if not is_control_data(record.data):
        raise _Legacy
    raw = parse_json(record.data)
    if type(raw) is not dict or raw.get("type") != STATE or raw.get("owner") != OWNER:
        return None
    state = raw.get("state")
    value = state.get(kind) if type(state) is dict else None
    if value is not None and _MARKER_BYTES in record.data:
        value = unpack_value(value)
    return value if type(value) is dict else None


def _state_of(message: Message, kind: str) -> dict[str, Any] | None:
    """The Strands object of ``kind`` an old-form state message holds."""
    kept = message.additional_properties.get(STRANDS_KEY)
    value = kept.get(kind) if isinstance(kept, dict) else None
    return value if isinstance(value, dict) else None


class ChatkeepSessionRepository(SessionRepository):
    """A Strands ``SessionRepository`` kept in a chatkeep store (see the module docstring
    for the layout)::

        from strands import Agent
        from strands.session.repository_session_manager import RepositorySessionManager
        from chatkeep.strands import ChatkeepSessionRepository

        repository = ChatkeepSessionRepository(url="postgresql://app@db/app")
        agent = Agent(session_manager=RepositorySessionManager("s1", repository))

    ``url``: a chatkeep store URL, opened here (closed by :meth:`close`); ``store``: an open
    :class:`~chatkeep.core.Store` to share (left open); neither: ``$CHATKEEP_URL``, else the
    embedded SQLite file. Errors the Strands contract names are ``SessionException``s, as the
    file session manager raises them.
    """

    def __init__(self, *, url: str | None = None, store: Store | None = None) -> None:
        self._store, self._owns_store = adapter_store(url, store, owner="ChatkeepSessionRepository")
        # Per conversation: (the last Strands message id appended, the running count after
        # it), as this process last wrote or read them; checked against the log on use.
        self._tails: dict[str, tuple[int, RunningCount | None]] = {}
        # Per agent state log: (the id of the last record this process read or wrote, the
        # agent's created_at), so an update whose log still ends there decodes nothing.
        self._agents: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    @property
    def store(self) -> Store:
        """The chatkeep store holding the sessions."""
        return self._store

    def __repr__(self) -> str:
        return f"ChatkeepSessionRepository(store={self._store!r})"

    def close(self) -> None:
        """Close the chatkeep store if this repository opened it (``url=``). Idempotent."""
        if self._owns_store:
            self._owns_store = False
            self._store.close()

    # -- records of state (session, agent, multi-agent) ------------------------------------

    def _append_state(self, key: str, kind: str, data: dict[str, Any]) -> None:
        self._store.append(key, [_state(kind, data)])

    def _state_at(self, key: str, kind: str, start: int) -> dict[str, Any] | None:
        """The object of ``kind`` in the record at ``start`` (``0``: first, ``-1``: last)
        of a state log: one read of one record."""
        records = self._store.read(key, start, start + 1 or None)
        return self._state_in(key, kind, records[0]) if records else None

    def _state_in(self, key: str, kind: str, record: Record) -> dict[str, Any] | None:
        """The object of ``kind`` in ``record``, the only or the last record of a log."""
        try:
            return _state_of_record(record, kind)
        except _Legacy:  # written before state records were chatkeep.state records
            last = read_view(self._store, key, limit=1)
            return _state_of(last[0], kind) if last else None

    def _last_state(self, key: str, kind: str) -> dict[str, Any] | None:
        return self._state_at(key, kind, -1)

    # -- sessions ----------------------------------------------------------------------------

    def create_session(self, session: Session, **kwargs: Any) -> Session:
        """Store a new session; ``SessionException`` if it exists already."""
        key = session_key(session.session_id)
        record = [_state("session", session.to_dict())]
        if self._store.supports("conditional"):
            try:
                self._store.append_if(key, record, after=None)
            except AppendConflict:
                raise SessionException(f"Session {session.session_id} already exists") from None
            return session
        if self._store.read(key, 0, 1):
            raise SessionException(f"Session {session.session_id} already exists")
        self._store.append(key, record)
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Session | None:
        """The session, or ``None``."""
        data = self._state_at(session_key(session_id), "session", 0)
        if data is None:
            return None
        session = Session.from_dict(data)
        session.session_type = SessionType(session.session_type)
        return session

    def delete_session(self, session_id: str, **kwargs: Any) -> None:
        """Erase the session, its agents and their conversations (needs the store's
        ``delete`` and ``list_sessions``); ``SessionException`` if there is none."""
        key = session_key(session_id)
        if not self._store.read(key, 0, 1):
            raise SessionException(f"Session {session_id} does not exist")
        for member in list(list_conversations(self._store, key)):
            delete_session(self._store, member)
            self._tails.pop(member, None)

    # -- agents ------------------------------------------------------------------------------

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Store a new agent of the session."""
        key = agent_key(session_id, session_agent.agent_id) + "/state"
        record = _state("agent", session_agent.to_dict())
        self._store.append(key, [record])
        self._created(key, record.id, session_agent.created_at)

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> SessionAgent | None:
        """The agent (its latest update), or ``None``: one read of one record."""
        data = self._last_state(agent_key(session_id, agent_id) + "/state", "agent")
        return None if data is None else SessionAgent.from_dict(data)

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        """Store the agent's new state (its ``created_at`` kept); ``SessionException`` if
        the agent does not exist."""
        key = agent_key(session_id, session_agent.agent_id) + "/state"
        last = self._store.read(key, -1)
        kept = self._agents.get(key)
        if last and kept is not None and kept[0] == last[0].id:
            created = kept[1]  # the log still ends with the record this object knows
        else:
            data = self._state_in(key, "agent", last[0]) if last else None
            if data is None:
                raise SessionException(
                    f"Agent {session_agent.agent_id} in session {session_id} does not exist"
                )
            created = SessionAgent.from_dict(data).created_at
        session_agent.created_at = created
        record = _state("agent", session_agent.to_dict())
        self._store.append(key, [record])
        self._created(key, record.id, created)

    # -- messages ----------------------------------------------------------------------------

    def create_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        """Append a message to the agent's conversation: one record (the running count on
        it, so listings and ``list_messages`` know the length in two small reads). A
        ``message_id`` already stored replaces that message (as the file manager
        overwrites its file)."""
        key = agent_key(session_id, agent_id)
        with session_lock(self._store, key):
            newest, count = self._tail(key)
            if session_message.message_id <= newest and self._replace(
                key, session_message, keep_created=False
            ):
                return
            message = from_session_message(session_message, message_id=new_id())
            if count is not None:
                (message,) = count.mark([message])
            records = encode_records([message], stored_at=utc_stamp())
            self._store.append(key, records)
            newest = max(newest, session_message.message_id)
            self._tails[key] = (newest, None if count is None else count.extended(records))

    def read_message(
        self, session_id: str, agent_id: str, message_id: int, **kwargs: Any
    ) -> SessionMessage | None:
        """The message with ``message_id``, or ``None`` (read from the end of the
        conversation, in windows growing eightfold)."""
        found = self._find(agent_key(session_id, agent_id), message_id)
        return None if found is None else found[1]

    def update_message(
        self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any
    ) -> None:
        """Replace the message with the same ``message_id`` (a redaction): an in-place edit
        of the conversation's view, the log keeping the original. Its ``created_at`` is
        kept. ``SessionException`` if there is no such message."""
        key = agent_key(session_id, agent_id)
        with session_lock(self._store, key):
            if not self._replace(key, session_message, keep_created=True):
                raise SessionException(f"Message {session_message.message_id} does not exist")

    def list_messages(
        self,
        session_id: str,
        agent_id: str,
        limit: int | None = None,
        offset: int = 0,
        **kwargs: Any,
    ) -> list[SessionMessage]:
        """The conversation's messages in order, from ``offset`` on, at most ``limit``.
        Read from the end of the log: the length comes from the running count (two small
        reads), then only the messages from ``offset`` on are read."""
        key = agent_key(session_id, agent_id)
        count = running_count(self._store, key)
        window = None if count is None else max(count.n - offset, 0)
        if window == 0:
            return []
        messages = read_view(self._store, key, limit=window)
        if window is None:
            messages = messages[offset:]
        out = []
        for message in messages:
            session_message = to_session_message(message)
            if session_message is not None:
                out.append(session_message)
        return out if limit is None else out[:limit]

    # -- multi-agent state -------------------------------------------------------------------

    def create_multi_agent(
        self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any
    ) -> None:
        """Store a multi-agent's state."""
        key = f"{session_key(session_id)}multi:{_component(multi_agent.id)}"
        self._append_state(key, "multi_agent", multi_agent.serialize_state())

    def read_multi_agent(
        self, session_id: str, multi_agent_id: str, **kwargs: Any
    ) -> dict[str, Any] | None:
        """A multi-agent's latest state, or ``None``."""
        key = f"{session_key(session_id)}multi:{_component(multi_agent_id)}"
        return self._last_state(key, "multi_agent")

    def update_multi_agent(
        self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any
    ) -> None:
        """Store a multi-agent's new state; ``SessionException`` if it has none yet."""
        if self.read_multi_agent(session_id, multi_agent.id) is None:
            raise SessionException(
                f"MultiAgent state {multi_agent.id} in session {session_id} does not exist"
            )
        self.create_multi_agent(session_id, multi_agent)

    # -- helpers ---------------------------------------------------------------------------

    def _created(self, key: str, record_id: str, created_at: str) -> None:
        if len(self._agents) >= _AGENTS_KEPT:
            self._agents.clear()
        self._agents[key] = (record_id, created_at)

    def _tail(self, key: str) -> tuple[int, RunningCount | None]:
        """(the last message id, the running count) of a conversation: what this process
        last wrote, when the log still ends there; else read from the end of the log."""
        kept = self._tails.get(key)
        if kept is not None:
            # Trusted without a read: a count another writer made stale is written into
            # a mark that names the wrong record before it, which every reader ignores.
            return kept
        messages, count = read_view_counted(self._store, key, limit=1)
        if not messages:
            if not self._store.read(key, 0, 1):
                return (-1, RunningCount(0, None))
            return (-1, count)
        session_message = to_session_message(messages[-1])
        newest = -1 if session_message is None else session_message.message_id
        if count is None:
            count = running_count(self._store, key)
        self._tails[key] = (newest, count)
        return self._tails[key]

    def _find(self, key: str, message_id: int) -> tuple[int, SessionMessage] | None:
        """(its position from the end, negative; the message) of ``message_id``."""
        window = _FIRST_WINDOW
        while True:
            messages = read_view(self._store, key, limit=window)
            for back in range(1, len(messages) + 1):
                session_message = to_session_message(messages[-back])
                if session_message is not None and session_message.message_id == message_id:
                    return -back, session_message
            if len(messages) < window:
                return None
            window *= 8

    def _replace(self, key: str, session_message: SessionMessage, *, keep_created: bool) -> bool:
        found = self._find(key, session_message.message_id)
        if found is None:
            return False
        index, previous = found
        if keep_created:
            session_message.created_at = previous.created_at
        message = from_session_message(session_message, message_id=new_id())
        try:
            edit_replace(self._store, key, index, message)
        except EditOutOfRange:
            return False
        self._tails.pop(key, None)
        return True


class ChatkeepSessionManager(RepositorySessionManager):
    """A Strands session manager over :class:`ChatkeepSessionRepository`::

        from strands import Agent
        from chatkeep.strands import ChatkeepSessionManager

        agent = Agent(session_manager=ChatkeepSessionManager("s1", url="sqlite:///chats.db"))

    ``url`` / ``store`` as for the repository; the session is created on first use and
    restored after (agent state, conversation-manager state and messages).
    """

    def __init__(
        self,
        session_id: str,
        *,
        url: str | None = None,
        store: Store | None = None,
        **kwargs: Any,
    ) -> None:
        self.repository = ChatkeepSessionRepository(url=url, store=store)
        super().__init__(session_id=session_id, session_repository=self.repository, **kwargs)

    def close(self) -> None:
        """Close the store if this manager opened it (``url=``)."""
        self.repository.close()
