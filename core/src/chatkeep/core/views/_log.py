"""The raw log as the core reads it, and the conversations a user sees.

A session's log holds message records and control records (see :mod:`._control`); a store
also holds the core's own temporary sessions (``chatkeep.tmp.*``, used while a parent of
forks is erased). Tools that show stored data (the CLI, an admin page) need both facts but
should not have to know how the core encodes them: :func:`read_log` says what each record
is, and :func:`list_conversations` leaves the internal sessions out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..codec import message_to_dict
from ..messages import Message
from ..records import Record
from ..store import Store
from ._control import Control, parse_stamped
from ._erase import TEMP_PREFIX
from ._program import Program, Read

__all__ = [
    "CORRUPT",
    "MESSAGE",
    "LogEntry",
    "alist_conversations",
    "decode_log",
    "is_internal_session",
    "list_conversations",
    "log_program",
    "parse_time",
]

#: :attr:`LogEntry.kind` of a message record.
MESSAGE = "message"
#: :attr:`LogEntry.kind` of a record that cannot be decoded.
CORRUPT = "corrupt"


@dataclass(frozen=True)
class LogEntry:
    """One record of a session's own log, as the core reads it.

    ``kind`` is :data:`MESSAGE`, a control record's kind (``"chatkeep.retract"``,
    ``"chatkeep.checkpoint"``, ``"chatkeep.fork"``, ...) or :data:`CORRUPT`. ``position``
    is the record's position in the log (negative, counting from the end, when the log
    was read from a negative ``start``). ``message`` is the decoded message of a message
    record, ``error`` why a corrupt one could not be decoded.
    """

    position: int
    record_id: str
    kind: str
    message: Message | None = None
    control: Mapping[str, Any] | None = None
    error: str | None = None
    stored_at: datetime | None = None

    @property
    def is_message(self) -> bool:
        """Whether this is a message record."""
        return self.kind == MESSAGE

    @property
    def is_control(self) -> bool:
        """Whether this is a control record (undo, checkpoint, fork link, ...)."""
        return self.kind not in (MESSAGE, CORRUPT)

    @property
    def data(self) -> Mapping[str, Any] | None:
        """The record's JSON form: a message as :func:`~chatkeep.core.message_to_dict`
        writes it, a control record as stored; ``None`` for a corrupt record."""
        if self.message is not None:
            return message_to_dict(self.message)
        return self.control


def parse_time(stamp: str | None) -> datetime | None:
    """The UTC time an ISO 8601 storage stamp says; ``None`` for none or a bad one."""
    if stamp is None:
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def _entry(position: int, record: Record) -> LogEntry:
    try:
        parsed, stamp = parse_stamped(record.data)
    except ValueError as exc:
        return LogEntry(position, record.id, CORRUPT, error=str(exc))
    at = parse_time(stamp)
    if isinstance(parsed, Control):
        control = json.loads(record.data)
        return LogEntry(position, record.id, parsed.kind, control=control, stored_at=at)
    return LogEntry(position, record.id, MESSAGE, message=parsed, stored_at=at)


def decode_log(records: Sequence[Record], first_position: int = 0) -> list[LogEntry]:
    """Say what each record is (no I/O): the :class:`LogEntry` of each, in order.

    ``first_position`` is the position of ``records[0]`` in its log. A record that cannot
    be decoded is a :data:`CORRUPT` entry, not an error, so a damaged log can be shown.
    """
    return [_entry(first_position + offset, record) for offset, record in enumerate(records)]


def log_program(
    session_id: str, start: int = 0, stop: int | None = None
) -> Program[list[LogEntry]]:
    """Read ``store.read(session_id, start, stop)`` and decode it (see :func:`decode_log`)."""
    records: list[Record] = yield Read(session_id, start, stop)
    return decode_log(records, start)


def is_internal_session(session_id: str) -> bool:
    """Whether ``session_id`` is one of the core's own sessions (a temporary copy made
    while erasing a session with forks), which is never a user's conversation."""
    return session_id.startswith(TEMP_PREFIX)


def list_conversations(store: Store, prefix: str | None = None) -> Iterator[str]:
    """The ids of the store's conversations (those starting with ``prefix``), fetched
    lazily: ``store.list_sessions`` without the core's internal sessions.

    Needs the ``list_sessions`` capability; errors (a missing capability, a bad prefix)
    raise at the call, as for ``store.list_sessions``.
    """
    sessions = store.list_sessions(prefix)
    return (session_id for session_id in sessions if not is_internal_session(session_id))


def alist_conversations(store: Store, prefix: str | None = None) -> AsyncIterator[str]:
    """Async :func:`list_conversations` (``async for session_id in ...``)."""
    return _user_sessions(store.alist_sessions(prefix))


async def _user_sessions(sessions: AsyncIterator[str]) -> AsyncIterator[str]:
    async for session_id in sessions:
        if not is_internal_session(session_id):
            yield session_id
