"""Control records: the records of a session log that the core interprets.

A session log holds two kinds of records, and a backend sees no difference between them:

- *message records*: a message's JSON (``{"type": "message", ...}``), id = its message id;
- *control records*: JSON whose ``type`` starts with ``"chatkeep."``, id from ``new_id()``.

=========================  ==================================================================
``chatkeep.retract``       ``target``: undo. Everything from the record ``target`` up to this
                           record is no longer part of the view (it stays in the log).
``chatkeep.checkpoint``    ``covers``, ``keep``, ``messages``: compaction. The view at this
                           point is ``messages`` followed by the last ``keep`` messages of the
                           view before it. Honoured only when the record right before it is
                           ``covers`` (a checkpoint that lost a race with another writer is
                           ignored, never trusted).
``chatkeep.splice``        ``covers``, ``keep``, ``drop``, ``messages``: an in-place edit. The
                           view at this point is the view before it with ``drop`` messages
                           replaced by ``messages``, right before its last ``keep`` messages
                           (``view[:n-keep-drop] + messages + view[n-keep:]``). Honoured only
                           when the record right before it is ``covers``, like a checkpoint.
``chatkeep.fork``          ``parent``, ``position``, ``anchor``: first record of a fork. The
                           view continues into ``parent``'s log before ``position``, whose
                           last record is ``anchor``.
``chatkeep.forked``        ``child``, ``position``: written to a parent when it is forked, so
                           deleting it can find its forks. Not part of any view.
``chatkeep.base``          ``shift``, ``length``, ``last``: first record of a fork made
                           self-contained; positions in the old log moved by ``shift``.
``chatkeep.rebased``       keeps the id of the fork record it replaced (so positions line up).
``chatkeep.rebuild``       ``child``, ``temp``: written to a parent being deleted before a fork
                           is rewritten, so an interrupted delete can be completed.
``chatkeep.state``         ``owner``, ``state``: what a framework adapter keeps about the
                           session besides its messages (``owner`` names the adapter,
                           ``state`` is a JSON object only it reads). Not part of any view.
=========================  ==================================================================

Every record the core writes with a fresh id carries the time it was stored (UTC, ISO 8601):
a control record in its ``stored_at`` field, a message record that
:class:`~chatkeep.core.HistoryProvider` stores under the reserved key ``"chatkeep.stored_at"``
of its ``additional_properties`` (the room MAF's message shape has for such data). Reading a
message takes the key out again (:func:`parse_entry`), so no view, log entry or framework
adapter ever sees it in a message; :mod:`chatkeep.core.metadata` reads it.

An unknown ``chatkeep.*`` kind is an error (:class:`~chatkeep.core.errors.CorruptRecord`),
never silently skipped: a newer writer's control record changes what the view is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..codec import decode_message, message_from_dict, message_to_dict
from ..ids import new_id
from ..messages import Message
from ..records import Record

__all__ = [
    "BASE",
    "CHECKPOINT",
    "CONTROL_PREFIX",
    "COUNT_KEY",
    "FORK",
    "FORKED",
    "KINDS",
    "REBASED",
    "REBUILD",
    "RETRACT",
    "SPLICE",
    "STATE",
    "STORED_AT_KEY",
    "Control",
    "CountMark",
    "control_record",
    "count_mark",
    "is_control_data",
    "parse_entry",
    "parse_stamped",
    "utc_stamp",
]

CONTROL_PREFIX = "chatkeep."
RETRACT = "chatkeep.retract"
CHECKPOINT = "chatkeep.checkpoint"
SPLICE = "chatkeep.splice"
FORK = "chatkeep.fork"
FORKED = "chatkeep.forked"
BASE = "chatkeep.base"
REBASED = "chatkeep.rebased"
REBUILD = "chatkeep.rebuild"
#: An adapter's own state for the session (see the table above): views skip it, the
#: adapter that wrote it (``owner``) reads the newest one it finds at the end of the log.
STATE = "chatkeep.state"
KINDS: frozenset[str] = frozenset(
    {RETRACT, CHECKPOINT, SPLICE, FORK, FORKED, BASE, REBASED, REBUILD, STATE}
)
#: The key of a message's ``additional_properties`` under which the core stores the time the
#: message was stored; reserved: reading a message removes it.
STORED_AT_KEY = "chatkeep.stored_at"
#: The key of a message's ``additional_properties`` under which
#: :class:`~chatkeep.core.HistoryProvider` stores, in the last message of a batch, the view's
#: running message count (see :class:`CountMark`); reserved: reading a message removes it.
COUNT_KEY = "chatkeep.count"
# The core's own keys, taken out of every message read.
_RESERVED = (STORED_AT_KEY, COUNT_KEY)

#: How the codec's message records begin (what the fast paths test for).
MESSAGE_HEAD = b'{"type":"message"'
_CONTROL_HEAD = b'{"type":"chatkeep.'
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode

# The fields each kind must have, with their types (checked when a record is read).
_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    RETRACT: {"target": str},
    CHECKPOINT: {"covers": str, "keep": int, "messages": list},
    SPLICE: {"covers": str, "keep": int, "drop": int, "messages": list},
    FORK: {"parent": str, "position": int, "anchor": (str, type(None))},
    FORKED: {"child": str, "position": int},
    BASE: {"shift": int, "length": int, "last": str},
    REBASED: {},
    REBUILD: {"child": str, "temp": str},
    STATE: {"owner": str, "state": dict},
}


@dataclass(frozen=True, slots=True)
class Control:
    """A parsed control record: its ``kind`` and its fields (``messages`` of a checkpoint
    already decoded into :class:`Message` objects)."""

    kind: str
    fields: Mapping[str, Any]
    #: When the record was written (ISO 8601), if the writer recorded it.
    stored_at: str | None = None

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]


def utc_stamp() -> str:
    """The current time as the core stores it: UTC, ISO 8601 with microseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def control_record(kind: str, record_id: str | None = None, **fields: Any) -> Record:
    """Encode a control record: a fresh id and the time it is written (``stored_at``),
    unless ``record_id`` is given (a rewrite that must encode the same way when repeated,
    so it carries no time)."""
    if kind not in KINDS:
        raise ValueError(f"unknown control record kind {kind!r}")
    body: dict[str, Any] = {"type": kind}
    for key, value in fields.items():
        if key == "messages":
            value = [message_to_dict(message) for message in value]
        body[key] = value
    if record_id is None:
        record_id = new_id()
        body.setdefault("stored_at", utc_stamp())
    return Record(record_id, _dumps(body).encode("utf-8"))


def is_control_data(data: bytes) -> bool:
    """Cheap test: does this record's data look like a control record (no full parse)?"""
    return data.startswith(_CONTROL_HEAD)


def _control(raw: Mapping[str, Any], kind: str) -> Control:
    expected = _FIELDS.get(kind)
    if expected is None:
        raise ValueError(
            f"unknown control record kind {kind!r}: written by a newer chatkeep? "
            "Upgrade chatkeep-core to read this session"
        )
    fields: dict[str, Any] = {}
    for key, kinds in expected.items():
        value = raw.get(key)
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise ValueError(f"{kind} record needs {key!r} of type {_names(kinds)}")
        fields[key] = value
    for key in ("keep", "drop", "position", "shift", "length"):
        if key in fields and fields[key] < 0:
            raise ValueError(f"{kind} record has a negative {key!r}")
    if kind in (CHECKPOINT, SPLICE):
        messages: Sequence[Any] = fields["messages"]
        decoded = []
        for item in messages:
            if not isinstance(item, dict):
                raise ValueError(f"{kind} messages must be objects")
            message = message_from_dict(item)
            _take_stamp(message)
            decoded.append(message)
        fields["messages"] = decoded
    stamp = raw.get("stored_at")
    return Control(kind, fields, stamp if isinstance(stamp, str) else None)


def _take_stamp(message: Message) -> str | None:
    """Remove the core's reserved keys (storage time, running count) from ``message``
    (decoded just now) and return the storage time."""
    properties = message.additional_properties
    if STORED_AT_KEY not in properties and COUNT_KEY not in properties:
        return None
    stamp = properties.get(STORED_AT_KEY)
    # A new dict, not pop(): the decoder may share dicts with what it was given.
    message.additional_properties = {
        key: value for key, value in properties.items() if key not in _RESERVED
    }
    return stamp if isinstance(stamp, str) else None


@dataclass(frozen=True, slots=True)
class CountMark:
    """A running count, as stored in a batch's last message under :data:`COUNT_KEY`.

    ``n``: the view's message count once the batch was appended; ``after``: the id of the
    log's last record before the batch (``None``: the log was empty); ``k``: how many
    records the batch has (a control record written alone: 1). It is a claim, not a fact:
    it holds only if the record ``k + 1`` back from the one carrying it is ``after`` (or,
    for ``after=None``, the batch starts the log). Anyone appending in between, or a
    forged mark, breaks that chain, and then the mark must not be used.
    """

    n: int
    after: str | None
    k: int

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored under :data:`COUNT_KEY`."""
        return {"n": self.n, "after": self.after, "k": self.k}


def count_mark(data: bytes | Mapping[str, Any]) -> CountMark | None:
    """The :class:`CountMark` a record carries, or ``None`` (no mark, damaged data, or a
    mark with fields of the wrong type or range).

    A message record carries it under :data:`COUNT_KEY` of its ``additional_properties``;
    a control record of a known kind in its ``count`` field (an undo, fork or checkpoint
    record that knew the view's count after it)."""
    if isinstance(data, (bytes, bytearray)):
        if data.startswith(MESSAGE_HEAD):
            if COUNT_KEY.encode() not in data:
                return None
        elif not data.startswith(_CONTROL_HEAD) or b'"count"' not in data:
            return None
        try:
            raw: Any = json.loads(data)
        except (ValueError, RecursionError):
            return None
    else:
        raw = data
    if not isinstance(raw, dict):
        return None
    kind = raw.get("type")
    if kind == "message":
        properties = raw.get("additional_properties")
        mark = properties.get(COUNT_KEY) if isinstance(properties, dict) else None
    elif kind in KINDS:
        mark = raw.get("count")
    else:
        return None
    if not isinstance(mark, dict):
        return None
    n, after, k = mark.get("n"), mark.get("after"), mark.get("k")
    if type(n) is not int or type(k) is not int or n < 0 or k < 1:
        return None
    if after is not None and not isinstance(after, str):
        return None
    return CountMark(n, after, k)


def _names(kinds: type | tuple[type, ...]) -> str:
    if isinstance(kinds, tuple):
        return " or ".join(k.__name__ for k in kinds)
    return kinds.__name__


def parse_entry(data: bytes | Mapping[str, Any]) -> Message | Control:
    """Decode one record's data (bytes from a store, or an already parsed dict) into a
    :class:`Message` or a :class:`Control`. Raises ``ValueError`` on bad input.

    A message comes back without the core's storage time (see :func:`parse_stamped`)."""
    if type(data) is bytes and data.startswith(MESSAGE_HEAD):
        message = decode_message(data)  # the codec's own output: the fast path
        properties = message.additional_properties
        if STORED_AT_KEY in properties or COUNT_KEY in properties:
            _take_stamp(message)
        return message
    return parse_stamped(data)[0]


def parse_stamped(data: bytes | Mapping[str, Any]) -> tuple[Message | Control, str | None]:
    """:func:`parse_entry`, and the time the record was stored (ISO 8601) if it says."""
    if isinstance(data, (bytes, bytearray)):
        if data.startswith(MESSAGE_HEAD):  # the codec's own output: the fast path
            message = decode_message(data if type(data) is bytes else bytes(data))
            return message, _take_stamp(message)
        try:
            raw: Any = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not JSON: {exc}") from None
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None
    else:
        raw = data
    if not isinstance(raw, dict):
        raise ValueError("a record must be a JSON object")
    kind = raw.get("type")
    try:
        if isinstance(kind, str) and kind.startswith(CONTROL_PREFIX):
            control = _control(raw, kind)
            return control, control.stored_at
        message = message_from_dict(raw)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed record: {exc}") from None
    except RecursionError:
        raise ValueError("record nested too deeply") from None
    return message, _take_stamp(message)
