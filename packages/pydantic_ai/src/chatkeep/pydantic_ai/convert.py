"""Pydantic AI's conversation data as chatkeep records, and back.

An entry (one ``ModelMessage`` and the entry before it) is one chatkeep *message record*
whose record id is the entry's id. The message is readable by every chatkeep reader (the
CLI, export, search, Microsoft Agent Framework readers):

==========================  ================================================================
``ModelMessage`` part       chatkeep content
==========================  ================================================================
system prompt               :class:`TextContent` (the message's role is ``system`` when the
                            request holds nothing else)
user prompt                 :class:`TextContent` for text; :class:`UriContent` for a file
                            URL; :class:`DataContent` for binary content (role ``user``)
tool return                 :class:`FunctionResultContent` (role ``tool`` when the request
                            holds no user prompt)
retry feedback              :class:`TextContent` (the retry text the model is sent)
retry prompt (deprecated)   :class:`FunctionResultContent` with the retry text as the
                            exception for a tool, else :class:`TextContent`
text                        :class:`TextContent` (role ``assistant``)
tool call                   :class:`FunctionCallContent` (arguments as the model gave them)
thinking                    :class:`ReasoningContent` (its signature as ``protected_data``)
anything else               nothing: it stays in the entry's own data only
==========================  ================================================================

The entry itself is kept whole under the message's ``additional_properties`` key
:data:`PAYLOAD_KEY`: ``{"parent": <entry id or null>, "message": <the message as
ModelMessagesTypeAdapter writes it>}``, and the last entry a save writes also carries the
conversation's record there (``"record"``). Reading takes the message from that JSON with
the adapter's own settings, so every message comes back equal to Pydantic AI's own JSON
round trip (``ModelMessagesTypeAdapter.validate_json(dump_json(...))``).

A conversation's record (``ConversationRecord``: head entry, usage, deferred tool requests,
scope, fork origin, branches, revision, time of the save) is its JSON as pydantic writes it
with the same settings, in the last entry of a save or, for a save that adds no entry, in
a ``chatkeep.state`` control record (a record the views skip).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pydantic
from pydantic_ai.conversation_store import ConversationEntry, ConversationRecord
from pydantic_ai.messages import (
    BinaryContent,
    FileUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.messages import TextContent as PromptText
from typing_extensions import NotRequired, TypedDict

from chatkeep.core import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    Record,
    TextContent,
    UriContent,
    encode_records,
)
from chatkeep.core.codec import MARKER, message_to_dict
from chatkeep.core.views._control import MESSAGE_HEAD, STATE, control_record, is_control_data

__all__ = [
    "OWNER",
    "PAYLOAD_KEY",
    "Corrupt",
    "State",
    "entries_of_records",
    "entry_of_message",
    "entry_of_record",
    "entry_records",
    "fresh_entries",
    "record_of_json",
    "record_to_json",
    "round_trip",
    "state_of_record",
    "state_record",
    "to_chatkeep",
]

#: The ``additional_properties`` key of a chatkeep message holding the entry it stores.
PAYLOAD_KEY = "pydantic_ai"
#: The ``owner`` of this adapter's ``chatkeep.state`` control records.
OWNER = "pydantic_ai"

# Pydantic AI's own settings for messages (ModelMessagesTypeAdapter's): bytes as base64.
_CONFIG = pydantic.ConfigDict(defer_build=True, ser_json_bytes="base64", val_json_bytes="base64")
_TAGGED = f'"{MARKER}"'.encode()
_PAYLOAD_BYTES = f'"{PAYLOAD_KEY}"'.encode()
_RECORD_BYTES = b'"record"'
_STATE_BYTES = f'"{STATE}"'.encode()


class Corrupt(ValueError):
    """A record of this adapter that cannot be read back (the caller names where)."""


# -- the shapes read straight from a record's JSON (one pass of pydantic's parser) ----------


@pydantic.with_config(_CONFIG)
class _Payload(TypedDict):
    parent: str | None
    message: ModelMessage
    record: NotRequired[ConversationRecord]


@pydantic.with_config(_CONFIG)
class _Properties(TypedDict):
    pydantic_ai: _Payload


@pydantic.with_config(_CONFIG)
class _Row(TypedDict):
    message_id: str
    additional_properties: _Properties


@pydantic.with_config(_CONFIG)
class _StateBody(TypedDict):
    record: NotRequired[ConversationRecord]
    deleted: NotRequired[bool]


@pydantic.with_config(_CONFIG)
class _StateRow(TypedDict):
    owner: str
    state: _StateBody


@pydantic.with_config(_CONFIG)
class _RecordPayload(TypedDict):
    record: NotRequired[ConversationRecord]


@pydantic.with_config(_CONFIG)
class _RecordProperties(TypedDict):
    pydantic_ai: _RecordPayload


@pydantic.with_config(_CONFIG)
class _RecordRow(TypedDict):
    additional_properties: _RecordProperties


@pydantic.with_config(_CONFIG)
class _RecordBox(TypedDict):
    record: ConversationRecord


_ROW: pydantic.TypeAdapter[_Row] = pydantic.TypeAdapter(_Row)
_PAYLOAD: pydantic.TypeAdapter[_Payload] = pydantic.TypeAdapter(_Payload)
_STATE_ROW: pydantic.TypeAdapter[_StateRow] = pydantic.TypeAdapter(_StateRow)
_RECORD_ROW: pydantic.TypeAdapter[_RecordRow] = pydantic.TypeAdapter(_RecordRow)
_RECORD: pydantic.TypeAdapter[_RecordBox] = pydantic.TypeAdapter(_RecordBox)
_ROWS: pydantic.TypeAdapter[list[_Row]] = pydantic.TypeAdapter(list[_Row])
_MESSAGES: pydantic.TypeAdapter[list[ModelMessage]] = pydantic.TypeAdapter(
    list[ModelMessage], config=_CONFIG
)
#: One message, written with ModelMessagesTypeAdapter's settings.
_MESSAGE: pydantic.TypeAdapter[ModelMessage] = pydantic.TypeAdapter(ModelMessage, config=_CONFIG)
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def _json_bytes(value: Any) -> bytes:
    return _dumps(value).encode("utf-8")


def record_to_json(record: ConversationRecord) -> bytes:
    """``record`` as JSON (pydantic's, bytes as base64)."""
    boxed = _RECORD.dump_json({"record": record})
    return boxed[len(b'{"record":') : -1]


def record_of_json(data: Mapping[str, Any]) -> ConversationRecord:
    """The record :func:`record_to_json` wrote (parsed)."""
    return _RECORD.validate_json(json.dumps({"record": data}))["record"]


# -- writing ------------------------------------------------------------------------------


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def _request_contents(message: ModelRequest) -> tuple[str, list[Content]]:
    contents: list[Content] = []
    kinds: set[str] = set()
    for part in message.parts:
        if isinstance(part, SystemPromptPart):
            kinds.add("system")
            contents.append(TextContent(part.content))
        elif isinstance(part, UserPromptPart):
            kinds.add("user")
            items = [part.content] if isinstance(part.content, str) else list(part.content)
            for item in items:
                if isinstance(item, str):
                    contents.append(TextContent(item))
                elif isinstance(item, FileUrl):
                    contents.append(UriContent(item.url, item.media_type))
                elif isinstance(item, BinaryContent):
                    contents.append(DataContent(bytes(item.data), item.media_type))
                elif isinstance(item, PromptText):
                    contents.append(TextContent(item.content))
        elif isinstance(part, ToolReturnPart):
            kinds.add("tool")
            contents.append(FunctionResultContent(part.tool_call_id, part.model_response_str()))
        elif isinstance(part, RetryFeedbackPart):
            kinds.add("user")
            contents.append(TextContent(part.model_response()))
        elif isinstance(part, RetryPromptPart):
            if part.tool_name is None:
                kinds.add("user")
                contents.append(TextContent(part.model_response()))
            else:
                kinds.add("tool")
                contents.append(
                    FunctionResultContent(part.tool_call_id, exception=part.model_response())
                )
    role = "user" if "user" in kinds or not kinds else "tool" if "tool" in kinds else "system"
    return role, contents


def _response_contents(message: ModelResponse) -> list[Content]:
    contents: list[Content] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            contents.append(TextContent(part.content))
        elif isinstance(part, ToolCallPart):
            args: Any = part.args
            if not (args is None or isinstance(args, (str, dict))):
                args = part.args_as_dict()  # a typed argument object of a special tool
            contents.append(FunctionCallContent(part.tool_call_id, part.tool_name, args))
        elif isinstance(part, ThinkingPart):
            contents.append(ReasoningContent(part.content, protected_data=part.signature))
    return contents


def to_chatkeep(message: ModelMessage) -> Message:
    """The chatkeep message a reader sees for ``message`` (roles, text, tool calls and
    results; see the module docstring). Lossy on its own: the entry record also keeps the
    message whole."""
    if isinstance(message, ModelResponse):
        return Message("assistant", _response_contents(message), author_name=message.model_name)
    role, contents = _request_contents(message)
    return Message(role, contents)


def entry_records(
    entries: Sequence[ConversationEntry],
    *,
    record: bytes | None,
    stored_at: str,
) -> list[Record]:
    """The message records of ``entries`` (record id = entry id); the last one carries
    ``record`` (a conversation record's JSON, see :func:`record_to_json`) when given.

    Each record is the codec's message JSON with Pydantic AI's own JSON of the message
    spliced in as it was written (no second walk over it); one whose JSON holds the
    codec's tag key goes the codec's long way, so it decodes the same either way."""
    records = []
    last = len(entries) - 1
    stamp = _json_bytes(stored_at)
    for index, entry in enumerate(entries):
        message_json = _MESSAGE.dump_json(entry.message)
        carried = record if index == last else None
        shown = to_chatkeep(entry.message)
        if _TAGGED in message_json or (carried is not None and _TAGGED in carried):
            records.append(_tagged_record(entry, shown, message_json, carried, stored_at))
            continue
        head = message_to_dict(shown)
        parts = [
            b'{"type":"message","role":',
            _json_bytes(head["role"]),
            b',"contents":',
            _json_bytes(head["contents"]),
        ]
        if "author_name" in head:
            parts += [b',"author_name":', _json_bytes(head["author_name"])]
        parts += [
            b',"message_id":',
            _json_bytes(entry.id),
            b',"additional_properties":{"pydantic_ai":{"parent":',
            _json_bytes(entry.parent_id),
            b',"message":',
            message_json,
        ]
        if carried is not None:
            parts += [b',"record":', carried]
        parts += [b'},"chatkeep.stored_at":', stamp, b"}}"]
        records.append(Record(entry.id, b"".join(parts)))
    return records


def _tagged_record(
    entry: ConversationEntry,
    shown: Message,
    message_json: bytes,
    record: bytes | None,
    stored_at: str,
) -> Record:
    payload: dict[str, Any] = {"parent": entry.parent_id, "message": json.loads(message_json)}
    if record is not None:
        payload["record"] = json.loads(record)
    shown.message_id = entry.id
    shown.additional_properties = {PAYLOAD_KEY: payload}
    (encoded,) = encode_records([shown], stored_at=stored_at)
    return encoded


def state_record(*, record: bytes | None) -> Record:
    """A ``chatkeep.state`` control record holding a conversation record's JSON, or saying
    the conversation was deleted (``record=None``)."""
    state: dict[str, Any] = {"deleted": True} if record is None else {"record": json.loads(record)}
    return control_record(STATE, owner=OWNER, state=state)


def copy_for_checkpoint(message: Message) -> Message:
    """``message`` (an entry read through a view) without the record its payload may carry:
    the copy a compaction checkpoint holds."""
    payload = message.additional_properties.get(PAYLOAD_KEY)
    if not isinstance(payload, dict) or "record" not in payload:
        return message
    kept = {key: value for key, value in payload.items() if key != "record"}
    return Message(
        message.role,
        list(message.contents),
        author_name=message.author_name,
        message_id=message.message_id,
        additional_properties={**message.additional_properties, PAYLOAD_KEY: kept},
    )


# -- reading ------------------------------------------------------------------------------


def _entry(record_id: str, payload: _Payload) -> ConversationEntry:
    return ConversationEntry(id=record_id, parent_id=payload["parent"], message=payload["message"])


def entry_of_record(record: Record) -> ConversationEntry | None:
    """The entry a plain message record of this adapter holds, read in one pass; ``None``
    when the record is not one (a control record, another writer's message) or needs the
    codec's tagged values (then read it through :func:`entry_of_message`).

    Raises :class:`Corrupt` for a record of this adapter that does not parse."""
    data = record.data
    if not data.startswith(MESSAGE_HEAD) or _TAGGED in data or _PAYLOAD_BYTES not in data:
        return None
    try:
        row = _ROW.validate_json(data)
    except pydantic.ValidationError as exc:
        raise Corrupt(f"not a Pydantic AI entry: {_first_error(exc)}") from None
    if row["message_id"] != record.id:
        raise Corrupt(f"entry id {row['message_id']!r} does not match its record")
    return _entry(record.id, row["additional_properties"]["pydantic_ai"])


def entries_of_records(records: Sequence[Record]) -> list[ConversationEntry] | None:
    """:func:`entry_of_record` of every record, in one pass of pydantic's parser; ``None``
    unless every record is a plain entry record of this adapter.

    Raises :class:`Corrupt` (with the record's index in ``args[1]``) if one does not parse."""
    for record in records:
        data = record.data
        if not data.startswith(MESSAGE_HEAD) or _TAGGED in data or _PAYLOAD_BYTES not in data:
            return None
    try:
        rows = _ROWS.validate_json(b"[" + b",".join(record.data for record in records) + b"]")
    except pydantic.ValidationError as exc:
        errors = exc.errors()
        index = errors[0]["loc"][0] if errors and errors[0].get("loc") else 0
        raise Corrupt(f"not a Pydantic AI entry: {_first_error(exc)}", index) from None
    entries = []
    for index, (record, row) in enumerate(zip(records, rows, strict=True)):
        if row["message_id"] != record.id:
            raise Corrupt(f"entry id {row['message_id']!r} does not match its record", index)
        entries.append(_entry(record.id, row["additional_properties"]["pydantic_ai"]))
    return entries


def round_trip(entries: Sequence[ConversationEntry]) -> list[ConversationEntry]:
    """``entries`` with each message replaced by its own JSON round trip (what a read of
    the stored entries returns), in one encode and one decode of them all."""
    messages = _MESSAGES.validate_json(_MESSAGES.dump_json([entry.message for entry in entries]))
    return [
        ConversationEntry(id=entry.id, parent_id=entry.parent_id, message=message)
        for entry, message in zip(entries, messages, strict=True)
    ]


# What a message's fields hold that no one can change in place (shared by a copy).
_IMMUTABLE = frozenset(
    {
        str,
        int,
        float,
        bool,
        type(None),
        bytes,
        datetime.datetime,
        datetime.date,
        datetime.time,
        datetime.timedelta,
        datetime.timezone,
    }
)
_new = object.__new__
# Per class: a dataclass whose state is its __dict__ (no slots, no __deepcopy__ of its own).
_PLAIN: dict[type, bool] = {}


def _fresh(value: Any) -> Any:
    """A deep copy of ``value`` (a decoded entry or what it holds: dataclasses, lists,
    dicts, JSON scalars), sharing only immutable values. ``copy.deepcopy``'s result for
    these types in a fraction of its time (no memo: a decoded message holds no cycles and
    no object twice); anything else goes through ``copy.deepcopy``."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is list:
        return [item if type(item) in _IMMUTABLE else _fresh(item) for item in value]
    if kind is dict:
        return {k: item if type(item) in _IMMUTABLE else _fresh(item) for k, item in value.items()}
    fields = getattr(value, "__dict__", None)
    plain = _PLAIN.get(kind)
    if plain is None:
        plain = _PLAIN[kind] = (
            dataclasses.is_dataclass(kind)
            and not hasattr(kind, "__slots__")
            and not hasattr(kind, "__deepcopy__")
        )
    if fields is None or not plain:
        return copy.deepcopy(value)
    copied = _new(kind)
    into = copied.__dict__
    into.update(fields)
    for name, item in fields.items():
        if type(item) not in _IMMUTABLE:
            into[name] = _fresh(item)
    return copied


def fresh_entries(entries: Sequence[ConversationEntry]) -> list[ConversationEntry]:
    """Copies of ``entries`` that share nothing a caller can change in place with them (as
    ``InMemoryConversationStore``'s ``deepcopy`` hands out)."""
    return [_fresh(entry) for entry in entries]


def entry_of_message(message: Message) -> ConversationEntry | None:
    """The entry a chatkeep message read through a view holds (``None`` if it holds none:
    a message another chatkeep writer added). Raises :class:`Corrupt` if it does not parse."""
    payload = message.additional_properties.get(PAYLOAD_KEY)
    if payload is None or message.message_id is None:
        return None
    try:
        parsed = _PAYLOAD.validate_json(json.dumps(payload))
    except (pydantic.ValidationError, TypeError, ValueError) as exc:
        detail = _first_error(exc) if isinstance(exc, pydantic.ValidationError) else str(exc)
        raise Corrupt(f"not a Pydantic AI entry: {detail}") from None
    return _entry(message.message_id, parsed)


#: What the end of a log says about the conversation: its record, or that it was deleted.
State = tuple[Literal["record"], ConversationRecord] | tuple[Literal["deleted"], None]


def state_of_record(record: Record) -> State | None:
    """The conversation state ``record`` carries (a message record with the record of a
    save, or a ``chatkeep.state`` record of this adapter), else ``None``.

    Raises :class:`Corrupt` when it is one of this adapter's and does not parse."""
    data = record.data
    try:
        if data.startswith(MESSAGE_HEAD):
            if _PAYLOAD_BYTES not in data or _RECORD_BYTES not in data:
                return None
            if _TAGGED in data:
                from chatkeep.core.codec import decode_message

                payload = decode_message(data).additional_properties.get(PAYLOAD_KEY)
                if not isinstance(payload, dict) or "record" not in payload:
                    return None
                return ("record", record_of_json(payload["record"]))
            row = _RECORD_ROW.validate_json(data)
            found = row["additional_properties"]["pydantic_ai"].get("record")
            return None if found is None else ("record", found)
        if is_control_data(data) and _STATE_BYTES in data:
            state = _STATE_ROW.validate_json(data)
            if state["owner"] != OWNER:
                return None
            body = state["state"]
            if body.get("deleted"):
                return ("deleted", None)
            if "record" not in body:
                raise Corrupt("a chatkeep.state record with neither a record nor 'deleted'")
            return ("record", body["record"])
    except pydantic.ValidationError as exc:
        if _PAYLOAD_BYTES in data or f'"{OWNER}"'.encode() in data:
            raise Corrupt(f"not a Pydantic AI conversation record: {_first_error(exc)}") from None
        return None
    return None


def _first_error(exc: pydantic.ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {first.get('msg', '')}" if where else str(first.get("msg", ""))
