"""Lossless JSON encoding of messages (DESIGN section 2).

The JSON is the shape Microsoft Agent Framework's ``Message.to_dict()`` writes::

    {"type": "message", "role": "user",
     "contents": [{"type": "text", "text": "hi"}],
     "message_id": "...", "additional_properties": {}}

Nothing is lost on the way through:

- Fields chatkeep does not model are kept: a known content's or a message's other fields
  go to its ``extra`` and are written back verbatim (MAF's ``annotations``, ``hosted``,
  ``items``, ``status``, ``id``, ``name``, ...); a content type chatkeep does not know is an
  :class:`~chatkeep.core.messages.UnknownContent` holding its whole dict.
- Values that plain JSON cannot hold are written as tagged objects,
  ``{"__chatkeep__": "<kind>", "value": ...}``, anywhere below a field (in
  ``additional_properties``, tool ``arguments`` and ``result``, ``extra`` fields and unknown
  contents): ``bytes`` (base64), ``datetime``/``date``/``time`` (ISO 8601, with the zone
  name and ``fold``), and NaN and the infinities (``"float"``: ``"NaN"``, ``"Infinity"``,
  ``"-Infinity"``). A user dict that itself has a ``"__chatkeep__"`` key is wrapped the same
  way (``"dict"``), so it cannot be mistaken for one. Every record is therefore strict JSON
  (RFC 8259) that any reader, ``jq`` or a database's JSON type accepts; MAF's own file store
  instead writes the non-standard ``NaN``/``Infinity`` tokens, which this decoder also reads.
- JSON arrays decode as lists (a tuple comes back as a list); dict keys must be strings.

``decode_message(encode_message(m)) == m`` for every message (NaN compares unequal to
itself, so such messages come back with NaN in the same places). What is not a message
(``{"role": "user", "content": "Hello"}`` has no ``"type": "message"``) raises
:class:`~chatkeep.core.errors.InvalidMessage`, never decodes to an empty message; what
cannot be stored raises :class:`~chatkeep.core.errors.EncodeError`.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

from .errors import EncodeError, InvalidMessage
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
    "InvalidMessage",
    "content_from_dict",
    "content_to_dict",
    "decode_message",
    "encode_message",
    "encode_message_adding",
    "message_from_dict",
    "message_to_dict",
    "pack_value",
    "parse_json",
    "plain_decoder",
    "unpack_value",
]

MARKER = "__chatkeep__"
#: The tag key as this encoder writes it (``ensure_ascii=False`` never escapes it): data
#: without it holds no tags, and is decoded without walking its values.
_MARKER_BYTES = b'"__chatkeep__"'
_dumps = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=True
).encode


def _stdlib_loads(data: bytes | str) -> Any:
    return json.loads(data)


def _fast_loads() -> Callable[[bytes | str], Any]:
    """The fastest exact JSON parser installed: msgspec's (a core dependency where it has
    wheels), else the stdlib's. Imported on the first decode, not with the core."""
    try:
        import msgspec
    except ImportError:  # pragma: no cover - msgspec is a dependency on CPython
        return _stdlib_loads
    decode = msgspec.json.Decoder().decode

    def loads(data: bytes | str) -> Any:
        try:
            return decode(data)
        except Exception:
            # What msgspec refuses (the NaN/Infinity tokens MAF's file store writes, lone
            # surrogates, a BOM, UTF-16, 1e400, nesting past its limit, damage) the stdlib
            # decides: its result, or its error. Where both accept a text, they agree
            # (integers of any size included; orjson, for one, turns big ints into floats).
            return json.loads(data)

    return loads


_parser: Callable[[bytes | str], Any] | None = None


def _typed_structs(msgspec: Any) -> tuple[Any, Any, Any, Any]:
    """The msgspec structures :func:`_typed_decoder` decodes into: text, function call,
    function result, message."""
    # The fields and their types are those _content_from_dict / _message_from_dict accept
    # without raising and without anything going to ``extra``; msgspec takes the last of
    # duplicated keys, as json.loads does, and refuses a duplicated tag. The message's
    # ``type`` and non-empty ``role`` are checked by msgspec too, in C.
    # (defstruct, not class statements: this module's annotations are strings, which
    # msgspec could not resolve for classes local to this function.)
    # gc=False: these structures live only until their fields are moved into the typed
    # messages, so the collector never needs to track them (nor count them towards its
    # next pass while a long history is decoded).
    from typing import Annotated, Literal

    properties = ("additional_properties", dict[str, Any] | None, None)
    struct = functools.partial(msgspec.defstruct, forbid_unknown_fields=True, gc=False)
    tagged = functools.partial(struct, tag_field="type")
    _Text = tagged("_Text", [("text", str), properties], tag="text")
    _Call = tagged(
        "_Call",
        [("call_id", str), ("name", str), ("arguments", Any, None), properties],
        tag="function_call",
    )
    _Result = tagged(
        "_Result",
        [("call_id", str), ("result", Any, None), ("exception", Any, None), properties],
        tag="function_result",
    )
    _Message = struct(
        "_Message",
        [
            ("type", Literal[_MESSAGE_TYPES]),
            ("role", Annotated[str, msgspec.Meta(min_length=1)]),
            ("contents", list[_Text | _Call | _Result], []),  # type: ignore[valid-type]
            ("author_name", str | None, None),
            ("message_id", str | None, None),
            properties,
        ],
    )

    return _Text, _Call, _Result, _Message


def _typed_decoder() -> Callable[[bytes], Message | None]:
    """msgspec decoding straight into typed structures, for the message shape chatkeep and
    MAF write with nothing else in it: text, function call and function result contents,
    the modeled fields only. Anything else (another content type, a field chatkeep does not
    model, a value of another type, bad JSON) is refused (``None``) and decoded by the
    general path, so what it accepts decodes to exactly what that path gives."""
    try:
        import msgspec
    except ImportError:  # pragma: no cover - msgspec is a dependency on CPython
        return lambda data: None

    _Text, _Call, _Result, _Message = _typed_structs(msgspec)
    decode = msgspec.json.Decoder(_Message).decode
    new = object.__new__
    marker = _MARKER_BYTES

    def typed(data: bytes) -> Message | None:
        if marker in data:  # tagged values: only the general path reads them back
            return None
        try:
            raw: Any = decode(data)
        except Exception:  # refused: the general path decides (and raises what it raises)
            return None
        # The decoded list is this message's own: it becomes ``contents``, each item
        # replaced by its typed content (one list per message, not two).
        contents: list[Any] = raw.contents
        for index, item in enumerate(contents):
            kind = type(item)
            content: Content
            if kind is _Text:
                content = new(TextContent)
                content.type = "text"
                content.text = item.text
            elif kind is _Call:
                content = new(FunctionCallContent)
                content.type = "function_call"
                content.call_id = item.call_id
                content.name = item.name
                content.arguments = item.arguments
            else:
                content = new(FunctionResultContent)
                content.type = "function_result"
                content.call_id = item.call_id
                content.result = item.result
                content.exception = item.exception
            content.additional_properties = item.additional_properties or {}
            content.extra = {}
            contents[index] = content
        # Every field was checked by msgspec: skip Message.__post_init__, as below.
        message: Message = new(Message)
        message.role = raw.role
        message.contents = contents
        message.author_name = raw.author_name
        message.message_id = raw.message_id
        message.additional_properties = raw.additional_properties or {}
        message.extra = {}
        return message

    return typed


_typed: Callable[[bytes], Message | None] | None = None


def _init_typed() -> Callable[[bytes], Message | None]:
    global _typed
    _typed = _typed_decoder()
    return _typed


def plain_decoder() -> Callable[[bytes], Message | None]:
    """The codec's one-step decoder of a stored message, for loops over many records (the
    view builder): ``decoder(data)`` is ``decode_message(data)`` for the message shape it
    models (text, function call and function result contents, the modeled fields only, no
    tagged values), else ``None``: then call :func:`decode_message`, which decides.
    Imports msgspec on the first call, not with the core."""
    return _typed or _init_typed()


def parse_json(data: bytes | str) -> Any:
    """Parse JSON exactly as ``json.loads`` does (the same values, the same errors:
    ``json.JSONDecodeError``, ``UnicodeDecodeError``, ``RecursionError``), faster.

    The codec's own parser, for adapters that read stored records without building
    messages (``chatkeep.openai_agents`` decodes records straight into SDK items).
    """
    return (_parser or _init_parser())(data)


def _init_parser() -> Callable[[bytes | str], Any]:
    global _parser
    _parser = _fast_loads()
    return _parser


#: The ``"float"`` tag's values (what ``float()`` parses back).
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}

#: The fields each known type models; any other field of its dict goes to ``extra``.
_MESSAGE_FIELDS = frozenset(
    {"type", "role", "contents", "author_name", "message_id", "additional_properties"}
)
_FIELDS: dict[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "additional_properties"}),
    "function_call": frozenset({"type", "call_id", "name", "arguments", "additional_properties"}),
    "function_result": frozenset(
        {"type", "call_id", "result", "exception", "additional_properties"}
    ),
    "data": frozenset({"type", "uri", "media_type", "additional_properties"}),
    "uri": frozenset({"type", "uri", "media_type", "additional_properties"}),
    "text_reasoning": frozenset({"type", "text", "protected_data", "additional_properties"}),
}
_TEXT = _FIELDS["text"]
_CALL = _FIELDS["function_call"]
_RESULT = _FIELDS["function_result"]
_DATA = _FIELDS["data"]
_URI = _FIELDS["uri"]
_REASONING = _FIELDS["text_reasoning"]


# -- extended JSON values ------------------------------------------------------------------


def _pack(value: Any) -> Any:
    """Turn a value with bytes/datetimes/non-finite floats into plain JSON data (tagged
    where needed)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        kind = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return {MARKER: "float", "value": kind}
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


def _unpack(value: Any) -> Any:
    if isinstance(value, list):
        return [_unpack(item) for item in value]
    if not isinstance(value, dict):
        return value
    kind = value.get(MARKER)
    if kind is None:
        return {key: _unpack(item) for key, item in value.items()}
    raw: Any = value.get("value")
    if kind == "float":
        if raw not in _NON_FINITE:
            raise InvalidMessage(f"a float tag needs NaN, Infinity or -Infinity, not {raw!r}")
        return _NON_FINITE[raw]
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
    raise InvalidMessage(f"unknown tagged value kind {kind!r}")


def pack_value(value: Any) -> Any:
    """``value`` as plain JSON data, tagged as a message's fields are (bytes, datetimes,
    NaN and the infinities, dicts with the tag key): for an adapter that keeps values of
    its own (in a ``chatkeep.state`` record, say) as losslessly as the codec keeps a
    message's. :func:`unpack_value` gives the value back. Raises
    :class:`~chatkeep.core.errors.EncodeError` for what cannot be stored."""
    return _pack(value)


def unpack_value(data: Any) -> Any:
    """The value :func:`pack_value` made ``data`` from (JSON data as parsed). Raises
    :class:`~chatkeep.core.errors.InvalidMessage` (a ``ValueError``) for a malformed tag."""
    try:
        return _unpack(data)
    except InvalidMessage:
        raise
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidMessage(f"malformed tagged value: {exc}") from None


def _as_parsed(value: Any) -> Any:
    """The values of freshly parsed JSON without a tag anywhere: already what they are."""
    return value


def _copy(value: Any) -> Any:
    """``value`` with its dicts and lists copied, nothing interpreted (``tagged=False``)."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


Convert = Callable[[Any], Any]


def _fields_out(
    out: dict[str, Any], fields: dict[str, Any], modeled: frozenset[str], pack: Convert
) -> None:
    """Write a content's or message's ``extra`` fields after the modeled ones."""
    for key, value in fields.items():
        if key in modeled:
            raise EncodeError(
                f"extra field {key!r} is one chatkeep models on {out['type']!r}; "
                "set the attribute instead"
            )
        if not isinstance(key, str):
            raise EncodeError(f"extra field names must be str, not {key!r}")
        out[key] = pack(value)


def _fields_in(raw: Mapping[str, Any], modeled: frozenset[str], unpack: Convert) -> dict[str, Any]:
    """The fields of ``raw`` that are not ``modeled``, unpacked. (Callers test
    ``raw.keys() <= modeled`` first, the usual case, inline: a call costs more.)"""
    return {key: unpack(value) for key, value in raw.items() if key not in modeled}


# -- contents -------------------------------------------------------------------------------


def content_to_dict(content: Content, *, tagged: bool = True) -> dict[str, Any]:
    """The MAF-shaped dict of one content (``tagged``: see :func:`message_to_dict`)."""
    return _content_to_dict(content, _pack if tagged else _copy)


def _content_to_dict(content: Content, pack: Convert) -> dict[str, Any]:
    if isinstance(content, UnknownContent):
        out: dict[str, Any] = {}
        for key, value in content.raw.items():
            if not isinstance(key, str):
                raise EncodeError(f"content field names must be str, not {key!r}")
            out[key] = pack(value)
        return out
    if isinstance(content, TextContent):
        out = {"type": "text", "text": content.text}
    elif isinstance(content, FunctionCallContent):
        out = {"type": "function_call", "call_id": content.call_id, "name": content.name}
        if content.arguments is not None:
            out["arguments"] = pack(content.arguments)
    elif isinstance(content, FunctionResultContent):
        out = {"type": "function_result", "call_id": content.call_id}
        if content.result is not None:
            out["result"] = pack(content.result)
        if content.exception is not None:
            out["exception"] = content.exception
    elif isinstance(content, DataContent):
        out = {"type": "data", "uri": _data_uri(content), "media_type": content.media_type}
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
        out["additional_properties"] = pack(content.additional_properties)
    if content.extra:
        extra = content.extra
        if isinstance(content, DataContent) and "uri" in extra:
            extra = {key: value for key, value in extra.items() if key != "uri"}
        _fields_out(out, extra, _FIELDS[out["type"]], pack)
    return out


def _data_uri(content: DataContent) -> str:
    """The data URI to write: the stored one kept in ``extra`` while it still holds
    ``data``, else chatkeep's canonical base64 form."""
    kept = content.extra.get("uri")
    if isinstance(kept, str):
        try:
            if _data_uri_bytes(kept) == content.data:
                return kept
        except (InvalidMessage, binascii.Error, ValueError):
            pass
    encoded = base64.b64encode(content.data).decode("ascii")
    return f"data:{content.media_type};base64,{encoded}"


def _split_data_uri(uri: str) -> tuple[str, str, bool]:
    """``(header without "data:", payload, is_base64)`` of an RFC 2397 data URI."""
    if not uri.startswith("data:"):
        raise InvalidMessage("data content needs a data: URI")
    header, sep, payload = uri.rpartition(",")  # base64 never contains a comma
    if sep and header.endswith(";base64"):
        return header[5:-7], payload, True
    header, sep, payload = uri.partition(",")  # percent-encoded data may contain commas
    if not sep:
        raise InvalidMessage("a data URI needs a comma before its data")
    return header[5:], payload, False


def _data_uri_bytes(uri: str) -> bytes:
    _, payload, is_base64 = _split_data_uri(uri)
    if is_base64:
        return base64.b64decode(payload, validate=True)
    return unquote_to_bytes(payload)


def _properties_in(raw: Mapping[str, Any], unpack: Convert) -> dict[str, Any]:
    properties = raw.get("additional_properties")
    if not properties:
        return {}
    if not isinstance(properties, dict):
        raise InvalidMessage("additional_properties must be an object")
    result: dict[str, Any] = unpack(properties)
    return result


def _data_from_dict(raw: Mapping[str, Any], extra: dict[str, Any], unpack: Convert) -> DataContent:
    uri = _str(raw, "uri")
    header, payload, is_base64 = _split_data_uri(uri)
    if is_base64:
        try:
            data = base64.b64decode(payload, validate=True)
        except binascii.Error as exc:
            raise InvalidMessage(f"data content has invalid base64: {exc}") from None
    else:
        data = unquote_to_bytes(payload)
    media_type = raw.get("media_type")
    if not isinstance(media_type, str):
        media_type = header.partition(";")[0] if not is_base64 else header
        media_type = media_type or ("application/octet-stream" if is_base64 else "text/plain")
    if not (
        is_base64 and header == media_type and payload == base64.b64encode(data).decode("ascii")
    ):
        extra["uri"] = uri  # not the form chatkeep writes: keep it as it was
    return DataContent(data, media_type, _properties_in(raw, unpack), extra)


def _content_from_dict(raw: Mapping[str, Any], unpack: Convert = _unpack) -> Content:
    # A chain of comparisons is faster than a table lookup here; each branch takes the
    # fields its type does not model (usually none: a C-speed set comparison says so).
    kind = raw.get("type")
    if kind == "text":
        text = raw.get("text")
        if type(text) is not str:
            text = _str(raw, "text")
        if len(raw) == 2:  # "type" and "text" only: the usual case
            return TextContent(text, {}, {})
        extra = {} if raw.keys() <= _TEXT else _fields_in(raw, _TEXT, unpack)
        return TextContent(text, _properties_in(raw, unpack), extra)
    if kind == "function_call":
        extra = {} if raw.keys() <= _CALL else _fields_in(raw, _CALL, unpack)
        return FunctionCallContent(
            _str(raw, "call_id"),
            _str(raw, "name"),
            unpack(raw.get("arguments")),
            _properties_in(raw, unpack),
            extra,
        )
    if kind == "function_result":
        extra = {} if raw.keys() <= _RESULT else _fields_in(raw, _RESULT, unpack)
        return FunctionResultContent(
            _str(raw, "call_id"),
            unpack(raw.get("result")),
            raw.get("exception"),
            _properties_in(raw, unpack),
            extra,
        )
    if kind == "data":
        extra = {} if raw.keys() <= _DATA else _fields_in(raw, _DATA, unpack)
        return _data_from_dict(raw, extra, unpack)
    if kind == "uri":
        extra = {} if raw.keys() <= _URI else _fields_in(raw, _URI, unpack)
        return UriContent(
            _str(raw, "uri"), raw.get("media_type"), _properties_in(raw, unpack), extra
        )
    if kind == "text_reasoning":
        extra = {} if raw.keys() <= _REASONING else _fields_in(raw, _REASONING, unpack)
        return ReasoningContent(
            raw.get("text"), raw.get("protected_data"), _properties_in(raw, unpack), extra
        )
    return UnknownContent({key: unpack(value) for key, value in raw.items()})


def content_from_dict(raw: Mapping[str, Any], *, tagged: bool = True) -> Content:
    """Rebuild a content from its dict; unknown ``type`` values become UnknownContent
    (``tagged``: see :func:`message_from_dict`).

    Raises :class:`~chatkeep.core.errors.InvalidMessage` for a damaged known content.
    """
    try:
        return _content_from_dict(raw, _unpack if tagged else _copy)
    except InvalidMessage:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if not isinstance(raw, Mapping):
            raise InvalidMessage(f"a content must be an object, not {type(raw).__name__}") from None
        raise InvalidMessage(f"malformed content: {exc}") from None
    except RecursionError:
        raise InvalidMessage("content nested too deeply") from None


def _str(raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        raise InvalidMessage(f"{raw.get('type')} content needs a string {key!r}")
    return value


# -- messages -------------------------------------------------------------------------------


def message_to_dict(message: Message, *, tagged: bool = True) -> dict[str, Any]:
    """The MAF-shaped dict of a message (``{"type": "message", ...}``).

    ``tagged=True``: plain JSON data, values JSON cannot hold tagged (what is stored).
    ``tagged=False``: the values as they are (bytes, datetimes, NaN; dicts and lists
    copied), the form a framework's own ``to_dict()``/``from_dict()`` use (MAF's
    ``Message.from_dict(message_to_dict(m, tagged=False))``).
    """
    pack = _pack if tagged else _copy
    out: dict[str, Any] = {
        "type": "message",
        "role": message.role,
        "contents": [_content_to_dict(content, pack) for content in message.contents],
    }
    if message.author_name is not None:
        out["author_name"] = message.author_name
    if message.message_id is not None:
        out["message_id"] = message.message_id
    properties = message.additional_properties
    out["additional_properties"] = pack(properties) if properties else {}
    if message.extra:
        _fields_out(out, message.extra, _MESSAGE_FIELDS, pack)
    return out


_MESSAGE_TYPES = ("message", "chat_message")  # older MAF releases wrote "chat_message"


def _message_from_dict(raw: Mapping[str, Any], unpack: Convert = _unpack) -> Message:
    get = raw.get  # not a mapping: AttributeError, reported by the caller
    kind = get("type")
    if kind not in _MESSAGE_TYPES:
        if kind is None:
            keys = ", ".join(sorted(map(str, raw))) or "none"
            raise InvalidMessage(
                f'not a message: it has no "type": "message" (its keys: {keys}); build a '
                "chatkeep Message, or pass the output of message_to_dict() or MAF's "
                "Message.to_dict()"
            )
        raise InvalidMessage(f"not a message: type {kind!r}")
    role: Any = get("role")
    plain = type(role) is str and role != ""  # the usual case: no Role to convert
    if not plain:
        if isinstance(role, Mapping):  # older MAF wrote {"type": "role", "value": "user"}
            role = role.get("value")
        if not isinstance(role, str) or not role:
            raise InvalidMessage("message needs a non-empty string role")
    contents = get("contents", [])
    if type(contents) is not list and not isinstance(contents, list):
        raise InvalidMessage("message contents must be a list")
    author_name = get("author_name")
    if author_name is not None and not isinstance(author_name, str):
        raise InvalidMessage(f"message author_name must be a string, not {author_name!r}")
    message_id = get("message_id")
    if message_id is not None and not isinstance(message_id, str):
        raise InvalidMessage(f"message message_id must be a string, not {message_id!r}")
    properties = get("additional_properties")
    decoded = [_content_from_dict(item, unpack) for item in contents]
    # {} is what the codec writes for no properties: no call for it
    properties = {} if properties == {} else _properties_in(raw, unpack)
    extra = {} if raw.keys() <= _MESSAGE_FIELDS else _fields_in(raw, _MESSAGE_FIELDS, unpack)
    if not plain:
        return Message(role, decoded, author_name, message_id, properties, extra)
    # Every field is checked above: skip Message.__post_init__'s checks (a fifth of the
    # cost of decoding a short message).
    message: Message = _new(Message)
    message.role = role
    message.contents = decoded
    message.author_name = author_name
    message.message_id = message_id
    message.additional_properties = properties
    message.extra = extra
    return message


_new = object.__new__


def message_from_dict(raw: Mapping[str, Any], *, tagged: bool = True) -> Message:
    """Rebuild a message from :func:`message_to_dict` output (or MAF's ``to_dict()``).

    ``tagged=True``: ``raw`` is plain JSON data as stored (tags are read back into bytes,
    datetimes, NaN). ``tagged=False``: ``raw`` holds Python values as a framework's own
    ``to_dict()`` gives them (MAF's ``Message.to_dict()``); nothing in it is read as a tag,
    so an application dict with a ``"__chatkeep__"`` key stays what it is.

    Raises :class:`~chatkeep.core.errors.InvalidMessage` (a ``ValueError``) for anything
    that is not such a message, e.g. ``{"role": "user", "content": "Hello"}``.
    """
    try:
        return _message_from_dict(raw, _unpack if tagged else _copy)
    except InvalidMessage:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if not isinstance(raw, Mapping):
            raise InvalidMessage(f"a message must be an object, not {type(raw).__name__}") from None
        raise InvalidMessage(f"malformed message: {exc}") from None
    except RecursionError:
        raise InvalidMessage("message nested too deeply") from None


def encode_message(message: Message) -> bytes:
    """Encode ``message`` as compact UTF-8 JSON (strict: no NaN tokens). Raises
    :class:`~chatkeep.core.errors.EncodeError` for values that would not round-trip."""
    return _encode_with(message, None)


def encode_message_adding(message: Message, added: Mapping[str, Any]) -> bytes:
    """:func:`encode_message` of ``message`` with ``added`` merged into its
    ``additional_properties`` (as ``{**properties, **added}``: a key it already has keeps its
    place and takes the new value), without copying the message: the same bytes as
    encoding such a copy. ``added`` holds plain JSON values (the core's storage time and
    running count)."""
    if not added:
        return _encode_with(message, None)
    properties = message.additional_properties
    if MARKER in properties or MARKER in added:  # the packed form is a tag: take the long way
        copy = Message(
            message.role,
            message.contents,
            message.author_name,
            message.message_id,
            {**properties, **added},
            message.extra,
        )
        return _encode_with(copy, None)
    return _encode_with(message, added)


def _encode_with(message: Message, added: Mapping[str, Any] | None) -> bytes:
    """The encoder of both: ``added`` goes into the dict's own properties (packed or new)."""
    try:
        out = message_to_dict(message)
        if added:
            out["additional_properties"].update(added)
        return _dumps(out).encode("utf-8")
    except (TypeError, ValueError) as exc:
        if isinstance(exc, EncodeError):
            raise
        raise EncodeError(f"message cannot be encoded: {exc}") from exc
    except RecursionError:
        raise EncodeError("message nested too deeply to encode") from None


def decode_message(data: bytes) -> Message:
    """Decode bytes written by :func:`encode_message` (or a MAF message's JSON). Raises
    :class:`~chatkeep.core.errors.InvalidMessage` (a ``ValueError``) on bad input; callers
    reading a store turn it into ``CorruptRecord`` with the record's position."""
    message = (_typed or _init_typed())(data)  # the usual shape, in one step
    if message is not None:
        return message
    try:
        raw = (_parser or _init_parser())(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidMessage(f"not JSON: {exc}") from None
    except RecursionError:
        raise InvalidMessage("JSON nested too deeply") from None
    if type(raw) is not dict:
        raise InvalidMessage(f"a message must be a JSON object, not {type(raw).__name__}")
    # No tag key in the bytes: no value needs unpacking (the usual case: skip the walk).
    unpack = _unpack if _MARKER_BYTES in data else _as_parsed
    try:
        return _message_from_dict(raw, unpack)  # message_from_dict, one call less
    except InvalidMessage:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidMessage(f"malformed message: {exc}") from None
    except RecursionError:
        raise InvalidMessage("message nested too deeply") from None
