"""Lossless JSON encoding of messages (DESIGN section 2).

The JSON is the shape Microsoft Agent Framework's ``Message.to_dict()`` writes::

    {"type": "message", "role": "user",
     "contents": [{"type": "text", "text": "hi"}],
     "message_id": "...", "additional_properties": {}}

Unlike plain JSON, values inside ``additional_properties``, tool ``arguments`` and tool
``result`` may be ``bytes`` and ``datetime``/``date``/``time`` and still come back equal: they
are written as ``{"__chatkeep__": "<kind>", "value": ...}``. A user dict that itself has a
``"__chatkeep__"`` key is wrapped the same way, so it cannot be mistaken for one. JSON arrays
decode as lists (a tuple comes back as a list); dict keys must be strings; NaN and infinities
are refused, so every record is strict JSON that a database can index.

``decode_message(encode_message(m)) == m`` for every message.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
from collections.abc import Mapping
from typing import Any

from .errors import EncodeError
from .messages import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    TextContent,
    UnknownContent,
    UriContent,
)

__all__ = [
    "MARKER",
    "EncodeError",
    "content_from_dict",
    "content_to_dict",
    "decode_message",
    "encode_message",
    "message_from_dict",
    "message_to_dict",
]

MARKER = "__chatkeep__"
_MARKER_BYTES = b'"__chatkeep__"'
_dumps = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=True
).encode
_loads = json.loads


# -- extended JSON values ------------------------------------------------------------------


def _pack(value: Any) -> Any:
    """Turn a value with bytes/datetimes into plain JSON data (tagged where needed)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EncodeError(f"{value!r} is not valid JSON; store it as a string")
        return value
    if isinstance(value, Mapping):
        packed: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise EncodeError(f"dict keys must be str to round-trip, not {key!r}")
            packed[key] = _pack(item)
        if MARKER in packed:
            return {MARKER: "dict", "value": packed}
        return packed
    if isinstance(value, (list, tuple)):
        return [_pack(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {MARKER: "bytes", "value": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dt.datetime):
        tagged: dict[str, Any] = {MARKER: "datetime", "value": value.isoformat()}
        key = getattr(value.tzinfo, "key", None)  # zoneinfo.ZoneInfo keeps its name
        if isinstance(key, str):
            tagged["zone"] = key
        if value.fold:
            tagged["fold"] = 1
        return tagged
    if isinstance(value, dt.date):
        return {MARKER: "date", "value": value.isoformat()}
    if isinstance(value, dt.time):
        tagged = {MARKER: "time", "value": value.isoformat()}
        if value.fold:
            tagged["fold"] = 1
        return tagged
    raise EncodeError(
        f"cannot store a {type(value).__name__} losslessly; use JSON values, bytes or datetimes"
    )


def _check_plain_json(value: Any) -> None:
    """Refuse what would not come back unchanged as plain JSON (unknown contents are
    stored verbatim, without tagging)."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EncodeError(f"{value!r} is not valid JSON")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise EncodeError(f"dict keys must be str to round-trip, not {key!r}")
            _check_plain_json(item)
        return
    if isinstance(value, list):
        for item in value:
            _check_plain_json(item)
        return
    raise EncodeError(f"an unknown content may hold only JSON values, not {type(value).__name__}")


def _unpack(value: Any) -> Any:
    if isinstance(value, list):
        return [_unpack(item) for item in value]
    if not isinstance(value, dict):
        return value
    kind = value.get(MARKER)
    if kind is None:
        return {key: _unpack(item) for key, item in value.items()}
    raw: Any = value.get("value")
    if kind == "dict":
        return {key: _unpack(item) for key, item in raw.items()}
    if kind == "bytes":
        return base64.b64decode(raw, validate=True)
    if kind == "datetime":
        parsed = dt.datetime.fromisoformat(raw)
        zone = value.get("zone")
        if zone is not None:
            import zoneinfo

            parsed = parsed.replace(tzinfo=zoneinfo.ZoneInfo(zone))
        return parsed.replace(fold=1) if value.get("fold") else parsed
    if kind == "date":
        return dt.date.fromisoformat(raw)
    if kind == "time":
        parsed_time = dt.time.fromisoformat(raw)
        return parsed_time.replace(fold=1) if value.get("fold") else parsed_time
    raise ValueError(f"unknown tagged value kind {kind!r}")


def _properties_out(target: dict[str, Any], properties: dict[str, Any]) -> None:
    target["additional_properties"] = _pack(properties) if properties else {}


# -- contents -------------------------------------------------------------------------------


def content_to_dict(content: Content) -> dict[str, Any]:
    """The MAF-shaped dict of one content."""
    if isinstance(content, UnknownContent):
        _check_plain_json(content.raw)
        return dict(content.raw)
    if isinstance(content, TextContent):
        out: dict[str, Any] = {"type": "text", "text": content.text}
    elif isinstance(content, FunctionCallContent):
        out = {"type": "function_call", "call_id": content.call_id, "name": content.name}
        if content.arguments is not None:
            out["arguments"] = _pack(content.arguments)
    elif isinstance(content, FunctionResultContent):
        out = {"type": "function_result", "call_id": content.call_id}
        if content.result is not None:
            out["result"] = _pack(content.result)
        if content.exception is not None:
            out["exception"] = content.exception
    elif isinstance(content, DataContent):
        encoded = base64.b64encode(content.data).decode("ascii")
        out = {
            "type": "data",
            "uri": f"data:{content.media_type};base64,{encoded}",
            "media_type": content.media_type,
        }
    elif isinstance(content, UriContent):
        out = {"type": "uri", "uri": content.uri}
        if content.media_type is not None:
            out["media_type"] = content.media_type
    elif isinstance(content, ReasoningContent):
        out = {"type": "text_reasoning"}
        if content.text is not None:
            out["text"] = content.text
        if content.protected_data is not None:
            out["protected_data"] = content.protected_data
    else:
        raise EncodeError(f"not a chatkeep content: {type(content).__name__}")
    if content.additional_properties:
        out["additional_properties"] = _pack(content.additional_properties)
    return out


def _properties_in(raw: Mapping[str, Any]) -> dict[str, Any]:
    properties = raw.get("additional_properties")
    if not properties:
        return {}
    if not isinstance(properties, dict):
        raise ValueError("additional_properties must be an object")
    result: dict[str, Any] = _unpack(properties)
    return result


def content_from_dict(raw: Mapping[str, Any]) -> Content:
    """Rebuild a content from its dict; unknown ``type`` values become UnknownContent."""
    kind = raw.get("type")
    if kind == "text":
        return TextContent(_str(raw, "text"), _properties_in(raw))
    if kind == "function_call":
        return FunctionCallContent(
            _str(raw, "call_id"),
            _str(raw, "name"),
            _unpack(raw.get("arguments")),
            _properties_in(raw),
        )
    if kind == "function_result":
        return FunctionResultContent(
            _str(raw, "call_id"),
            _unpack(raw.get("result")),
            raw.get("exception"),
            _properties_in(raw),
        )
    if kind == "data":
        uri = _str(raw, "uri")
        header, sep, payload = uri.rpartition(",")  # base64 never contains a comma
        if not sep or not header.startswith("data:") or not header.endswith(";base64"):
            raise ValueError("data content needs a base64 data URI")
        try:
            data = base64.b64decode(payload, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"data content has invalid base64: {exc}") from None
        media_type = raw.get("media_type")
        if not isinstance(media_type, str):
            media_type = header[5:-7] or "application/octet-stream"
        return DataContent(data, media_type, _properties_in(raw))
    if kind == "uri":
        return UriContent(_str(raw, "uri"), raw.get("media_type"), _properties_in(raw))
    if kind == "text_reasoning":
        return ReasoningContent(raw.get("text"), raw.get("protected_data"), _properties_in(raw))
    return UnknownContent(dict(raw))


def _str(raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{raw.get('type')} content needs a string {key!r}")
    return value


# -- messages -------------------------------------------------------------------------------


def message_to_dict(message: Message) -> dict[str, Any]:
    """The MAF-shaped dict of a message (``{"type": "message", ...}``)."""
    out: dict[str, Any] = {
        "type": "message",
        "role": message.role,
        "contents": [content_to_dict(content) for content in message.contents],
    }
    if message.author_name is not None:
        out["author_name"] = message.author_name
    if message.message_id is not None:
        out["message_id"] = message.message_id
    _properties_out(out, message.additional_properties)
    return out


def message_from_dict(raw: Mapping[str, Any]) -> Message:
    """Rebuild a message from :func:`message_to_dict` output (or MAF's ``to_dict()``)."""
    if raw.get("type", "message") not in ("message", "chat_message"):
        raise ValueError(f"not a message: type {raw.get('type')!r}")
    role = raw.get("role")
    if isinstance(role, Mapping):  # older MAF wrote {"type": "role", "value": "user"}
        role = role.get("value")
    if not isinstance(role, str) or not role:
        raise ValueError("message needs a non-empty string role")
    contents = raw.get("contents", [])
    if not isinstance(contents, list):
        raise ValueError("message contents must be a list")
    author_name = raw.get("author_name")
    message_id = raw.get("message_id")
    for key, value in (("author_name", author_name), ("message_id", message_id)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"message {key} must be a string, not {type(value).__name__}")
    return Message(
        role,
        [content_from_dict(item) for item in contents],
        author_name,
        message_id,
        _properties_in(raw),
    )


def encode_message(message: Message) -> bytes:
    """Encode ``message`` as compact UTF-8 JSON. Raises :class:`EncodeError` for values that
    would not round-trip."""
    try:
        return _dumps(message_to_dict(message)).encode("utf-8")
    except (TypeError, ValueError) as exc:
        if isinstance(exc, EncodeError):
            raise
        raise EncodeError(f"message cannot be encoded: {exc}") from exc


def decode_message(data: bytes) -> Message:
    """Decode bytes written by :func:`encode_message`. Raises ``ValueError`` on bad input
    (callers reading a store turn it into ``CorruptRecord`` with the record's position)."""
    try:
        raw = _loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(raw, dict):
        raise ValueError("a message record must be a JSON object")
    try:
        return message_from_dict(raw)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed message: {exc}") from None
    except RecursionError:
        raise ValueError("message nested too deeply") from None
