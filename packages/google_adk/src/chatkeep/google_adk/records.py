"""The records of an ADK session's log, and what the adapter reads back from them.

A session's log (see :mod:`.layout`) is:

- position 0: a ``chatkeep.state`` record (owner ``"google_adk"``; a control record every
  view skips) with the session's ids, the time it was created and its initial
  session-scoped state;
- positions 1, 2, ...: one chatkeep *message record* per event, so every chatkeep reader
  sees the conversation: its role (``user``, ``assistant``, ``tool`` for function
  responses), its author, and the event's content parts as contents (see :mod:`.parts`).
  The rest of the event, in ADK's own JSON form (``Event.model_dump(mode="json",
  exclude_none=True)``, what ADK's database service stores), is in the message's
  ``additional_properties["google_adk"]`` beside what the adapter keeps per record:

  ==============  ===========================================================================
  ``event``       the event's JSON without its content parts (``parts``: they are in the
                  contents)
  ``n``           the record's position in the log
  ``state``       the session-scoped state after this event, when the event changed it
  ``state_at``    else ``[position, record id]`` of the record holding the current state
  ``ordered``     whether every event so far came in ``(timestamp, id)`` order (ADK's
                  database service returns events in that order; a log that is not in it
                  is sorted on reading)
  ``newest``      the greatest ``[timestamp, id]`` so far
  ==============  ===========================================================================

  The batch's running count (``chatkeep.count``) and the time it was stored
  (``chatkeep.stored_at``) are there too, so ``chatkeep sessions list`` counts and dates an
  ADK session in one small read.

A user's and an app's state logs hold one ``chatkeep.state`` record per change with the
whole state after it (``{"state": {...}}``), so reading either is a read of its last
record. The values in these records are tagged as the codec tags a message's (NaN, a dict
with the tag key), so they come back exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chatkeep.core import Message, Record, decode_message, encode_message
from chatkeep.core.codec import (
    MARKER,
    message_from_dict,
    message_to_dict,
    pack_value,
    parse_json,
    unpack_value,
)
from chatkeep.core.errors import CorruptRecord, EncodeError
from chatkeep.core.metadata import utc_stamp
from chatkeep.core.views._control import COUNT_KEY, STATE, STORED_AT_KEY, control_record

from .parts import content_of_part, part_of_content

__all__ = [
    "OWNER",
    "Entry",
    "Tail",
    "event_record",
    "header_record",
    "parse_record",
    "state_of",
    "state_record",
]

#: The owner of this adapter's ``chatkeep.state`` records, and its key in a message's
#: ``additional_properties``.
OWNER = "google_adk"
_MARKER_BYTES = json.dumps(MARKER).encode()
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


@dataclass(frozen=True, slots=True)
class Tail:
    """What the adapter knows of a session log's last record: enough to append the next
    event without reading (a session object carries it as its storage marker)."""

    record_id: str
    position: int
    updated: float  #: the session's ``last_update_time``
    state_at: int  #: position of the record holding the session-scoped state
    state_id: str  #: and its id
    ordered: bool  #: every event so far came in ``(timestamp, id)`` order
    #: The greatest ``(timestamp, id)`` of an event so far (``None``: no event yet): the
    #: event ADK's database service calls the session's latest.
    newest: tuple[float, str] | None

    def marker(self) -> str:
        """The opaque storage marker of a session object loaded or updated at this tail."""
        newest = None if self.newest is None else list(self.newest)
        fields = [self.record_id, self.position, self.updated, self.state_at, self.state_id]
        return _dumps([*fields, self.ordered, newest])

    @classmethod
    def from_marker(cls, marker: object) -> Tail | None:
        """The tail a :meth:`marker` came from; ``None`` for anything else (no marker, or
        one another session service wrote)."""
        if type(marker) is not str or not marker.startswith("["):
            return None
        try:
            fields = json.loads(marker)
            record_id, position, updated, state_at, state_id, ordered, newest = fields
            tail = cls(
                record_id,
                position,
                float(updated),
                state_at,
                state_id,
                ordered,
                None if newest is None else (float(newest[0]), newest[1]),
            )
        except (ValueError, TypeError, IndexError):
            return None
        return tail if tail.marker() == marker else None


@dataclass(frozen=True, slots=True)
class Entry:
    """One record of a session log, read: the creation record (``event is None``) or an
    event (its JSON, ready for ``Event.model_validate``)."""

    tail: Tail  #: the log as it ends at this record
    event: dict[str, Any] | None
    state: dict[str, Any] | None  #: the session-scoped state, if this record holds it
    ids: tuple[str, str, str] | None  #: app, user, session (the creation record only)


def header_record(
    app_name: str, user_id: str, session_id: str, created: float, state: dict[str, Any]
) -> tuple[Record, Tail]:
    """The creation record of a session, and the log's tail once it is stored."""
    data = {
        "session": {"app": app_name, "user": user_id, "id": session_id, "created": created},
        "state": state,
        "n": 0,
    }
    record = _state_record(data)
    return record, Tail(record.id, 0, created, 0, record.id, True, None)


def _state_record(data: dict[str, Any], record_id: str | None = None) -> Record:
    """A ``chatkeep.state`` record of this adapter holding ``data`` (tagged where plain
    JSON cannot hold a value): a fresh id and the time it is written, or ``record_id`` and
    no time (a retry encodes alike)."""
    return control_record(STATE, record_id, owner=OWNER, state=pack_value(data))


def state_record(record_id: str, state: dict[str, Any]) -> Record:
    """The record of a user's or an app's whole state after a change (``record_id`` comes
    from the change, so a retry of the same change encodes alike)."""
    return _state_record({"state": state}, record_id)


def state_of(record: Record | None) -> dict[str, Any]:
    """The state a state log's last record holds (``{}`` for an empty log)."""
    if record is None:
        return {}
    state = _own_data(record).get("state")
    if type(state) is not dict:
        raise ValueError("not a state record of chatkeep.google_adk")
    return state


def _role(event: Mapping[str, Any], parts: list[dict[str, Any]]) -> str:
    if parts and all("function_response" in part for part in parts):
        return "tool"
    content = event.get("content")
    role = content.get("role") if type(content) is dict else None
    if role == "model":
        return "assistant"
    if type(role) is str and role:
        return role
    return "user" if event.get("author") == "user" else "assistant"


def event_record(
    record_id: str,
    event: dict[str, Any],
    after: Tail,
    state: dict[str, Any] | None,
) -> tuple[Record, Tail]:
    """The message record of ``event`` (its JSON form) appended right after ``after``, and
    the log's tail once it is stored. ``state``: the session-scoped state after the event
    when the event changed it (``None``: unchanged).

    Raises :class:`~chatkeep.core.errors.EncodeError` for an event that cannot be stored
    (a lone surrogate in a string)."""
    position = after.position + 1
    key = (event["timestamp"], event["id"])
    ordered = after.ordered and (after.newest is None or key >= after.newest)
    newest = key if after.newest is None or key > after.newest else after.newest
    meta: dict[str, Any] = {"n": position}
    parts: list[dict[str, Any]] = []
    content = event.get("content")
    if type(content) is dict and type(content.get("parts")) is list:
        parts = content["parts"]
        event = {**event, "content": {k: v for k, v in content.items() if k != "parts"}}
        meta["parts"] = True
    meta["event"] = event
    if state is None:
        meta["state_at"] = [after.state_at, after.state_id]
        state_at, state_id = after.state_at, after.state_id
    else:
        meta["state"] = state
        state_at, state_id = position, record_id
    meta["ordered"] = ordered
    meta["newest"] = list(newest)
    message: dict[str, Any] = {
        "type": "message",
        "role": _role(event, parts),
        "contents": [content_of_part(part) for part in parts],
    }
    if event.get("author"):
        message["author_name"] = event["author"]
    message["message_id"] = record_id
    message["additional_properties"] = {
        OWNER: meta,
        COUNT_KEY: {"n": position, "after": after.record_id, "k": 1},
        STORED_AT_KEY: utc_stamp(),
    }
    tail = Tail(record_id, position, key[0], state_at, state_id, ordered, newest)
    return Record(record_id, _encode(message)), tail


def _encode(message: dict[str, Any]) -> bytes:
    """The record bytes of a message dict built above: plain JSON in the usual case; the
    codec's encoding (tags for NaN, a dict with the codec's tag key, ...) otherwise, so
    every chatkeep reader decodes it to the same values."""
    try:
        data = _dumps(message).encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        data = None
    if data is None or _MARKER_BYTES in data:
        try:
            data = encode_message(message_from_dict(message, tagged=False))
        except (ValueError, TypeError) as exc:
            raise EncodeError(f"the event cannot be stored: {exc}") from None
    return data


def _own_data(record: Record) -> dict[str, Any]:
    """The data of one of this adapter's ``chatkeep.state`` records (``ValueError`` for
    any other record)."""
    raw = parse_json(record.data)
    if type(raw) is not dict or raw.get("type") != STATE or raw.get("owner") != OWNER:
        raise ValueError("not a chatkeep.state record of chatkeep.google_adk")
    data = raw.get("state")
    if _MARKER_BYTES in record.data:
        data = unpack_value(data)
    if type(data) is not dict:
        raise ValueError("a chatkeep.state record without a state object")
    return data


def _message_dict(record: Record) -> dict[str, Any]:
    if _MARKER_BYTES in record.data:
        # Tagged values: the codec reads them back (to what was written: JSON data).
        message: Message = decode_message(record.data)
        return message_to_dict(message, tagged=False)
    raw = parse_json(record.data)
    if type(raw) is not dict:
        raise ValueError("not a JSON object")
    return raw


def parse_record(session_key: str, position: int | None, record: Record) -> Entry:
    """Read one record of a session log (``position``: where it was read, if known).

    Raises :class:`~chatkeep.core.errors.CorruptRecord` for a record this adapter did not
    write there (damage, or another writer's record: an undo or fork made with the
    chatkeep CLI on an ADK session, say)."""
    try:
        if record.data.startswith(b'{"type":"chatkeep.'):
            data = _own_data(record)
            session, state = data["session"], data["state"]
            created = float(session["created"])
            if type(state) is not dict or data["n"] != 0:
                raise ValueError("a malformed creation record")
            tail = Tail(record.id, 0, created, 0, record.id, True, None)
            ids = (session["app"], session["user"], session["id"])
            entry = Entry(tail, None, state, ids)
        else:
            entry = _event_entry(record)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        where = -1 if position is None else position
        raise CorruptRecord(
            session_key, where, f"not a record of chatkeep.google_adk ({exc})", record.id
        ) from None
    if position is not None and position >= 0 and entry.tail.position != position:
        raise CorruptRecord(
            session_key,
            position,
            f"the record says it is at position {entry.tail.position}: the log was "
            "written to by something other than chatkeep.google_adk",
            record.id,
        )
    return entry


def _event_entry(record: Record) -> Entry:
    raw = _message_dict(record)
    if raw.get("type") != "message" or raw.get("message_id") != record.id:
        raise ValueError("not an event message")
    meta = raw["additional_properties"][OWNER]
    event = meta["event"]
    if type(event) is not dict:
        raise ValueError("no event")
    if meta.get("parts"):
        parts = [part_of_content(content) for content in raw["contents"]]
        event = {**event, "content": {**event["content"], "parts": parts}}
    position = meta["n"]
    if "state" in meta:
        state = meta["state"]
        if type(state) is not dict:
            raise ValueError("a malformed state")
        state_at, state_id = position, record.id
    else:
        state = None
        state_at, state_id = meta["state_at"]
    newest = meta["newest"]
    tail = Tail(
        record.id,
        position,
        float(event["timestamp"]),
        state_at,
        state_id,
        meta["ordered"] is True,
        (float(newest[0]), newest[1]),
    )
    if type(position) is not int or type(state_at) is not int or type(state_id) is not str:
        raise ValueError("malformed positions")
    return Entry(tail, event, state, None)
