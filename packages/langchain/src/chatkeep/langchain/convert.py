"""LangChain messages as chatkeep messages, and back, without losing anything.

=====================================  ==========================================================
LangChain                              chatkeep
=====================================  ==========================================================
``HumanMessage`` / ``AIMessage`` /     role ``user`` / ``assistant`` / ``system`` / ``tool``
``SystemMessage`` / ``ToolMessage``    (``ChatMessage``: its ``role``); ``name`` ->
                                       ``author_name``
string ``content``                     one :class:`TextContent`
content blocks                         ``text`` -> :class:`TextContent`; ``reasoning`` and
                                       ``thinking`` -> :class:`ReasoningContent` (a thinking
                                       block's ``signature`` as ``protected_data``); images,
                                       audio, files with base64 data -> :class:`DataContent`,
                                       with a URL -> :class:`UriContent`; any other block ->
                                       a ``langchain_block`` :class:`UnknownContent`
``AIMessage.tool_calls``               one :class:`FunctionCallContent` each (``args`` as a
                                       mapping)
``ToolMessage``                        one :class:`FunctionResultContent` (``tool_call_id``,
                                       ``content`` as the result; ``status="error"`` also
                                       sets ``exception``)
=====================================  ==========================================================

Everything else (``id``, ``additional_kwargs``, ``response_metadata``, ``usage_metadata``,
``invalid_tool_calls``, ``status``, ``artifact``, a block's other fields) is kept under the
key :data:`MESSAGE_KEY` of ``additional_properties``, so :func:`from_chatkeep` rebuilds a
message equal to the original under LangChain's own ``==``. Every conversion is checked when
it is made; a message the mapping would not rebuild exactly is kept whole (LangChain's
``message_to_dict``) under :data:`MESSAGE_KEY`.

A chatkeep message that did not come from LangChain (written by other chatkeep code) reads
as the LangChain message that says the same.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from chatkeep.core import (
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
from chatkeep.core.adapters import plain_message

__all__ = ["MESSAGE_KEY", "UNKNOWN_TYPE", "from_chatkeep", "from_dict", "to_chatkeep"]

#: The ``additional_properties`` key holding what a chatkeep message does not model.
MESSAGE_KEY = "langchain"
#: The ``type`` of an :class:`UnknownContent` holding a LangChain content block verbatim.
UNKNOWN_TYPE = "langchain_block"

_ROLES = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    "HumanMessageChunk": "user",
    "AIMessageChunk": "assistant",
    "SystemMessageChunk": "system",
    "ToolMessageChunk": "tool",
    "FunctionMessageChunk": "tool",
}
# Field values a message gets when they are not given: not stored.
_DEFAULTS: dict[str, Any] = {
    "additional_kwargs": {},
    "response_metadata": {},
    "name": None,
    "id": None,
    "tool_calls": [],
    "invalid_tool_calls": [],
    "usage_metadata": None,
    "artifact": None,
    "status": "success",
    "tool_call_chunks": [],
    "chunk_position": None,
}
_MEDIA = ("image", "audio", "file", "video")
_WHOLE = "verbatim"


# -- content blocks --------------------------------------------------------------------------


def _rest(block: Mapping[str, Any], *taken: str) -> dict[str, Any]:
    """The block without the ``taken`` keys, which stay as ``None`` placeholders."""
    return {key: (None if key in taken else value) for key, value in block.items()}


def _b64(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def _data_uri(value: Any) -> tuple[bytes, str] | None:
    if not isinstance(value, str) or not value.startswith("data:"):
        return None
    header, sep, payload = value.partition(",")
    if not sep or not header.endswith(";base64"):
        return None
    data = _b64(payload)
    return None if data is None else (data, header[5:-7])


def _opaque(block: Any) -> UnknownContent:
    return UnknownContent({"type": UNKNOWN_TYPE, "block": block})


def _media(block: dict[str, Any], kind: str) -> Content:
    mime = block.get("mime_type")
    mime_taken = ("mime_type",) if isinstance(mime, str) else ()
    key = "data" if block.get("source_type") == "base64" else "base64"
    data = _b64(block.get(key))
    if data is not None:
        media = mime if isinstance(mime, str) else "application/octet-stream"
        return DataContent(data, media, {MESSAGE_KEY: _rest(block, key, *mime_taken)})
    if isinstance(block.get("url"), str):
        uri = block["url"]
        media_type = mime if isinstance(mime, str) else (f"{kind}/*" if kind != "file" else None)
        return UriContent(uri, media_type, {MESSAGE_KEY: _rest(block, "url", *mime_taken)})
    return _opaque(block)


def _block_to_content(block: Any) -> Content:
    if isinstance(block, str):
        return TextContent(block)  # a bare string in a content list: no MESSAGE_KEY
    if not isinstance(block, dict):
        return _opaque(block)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return TextContent(block["text"], {MESSAGE_KEY: _rest(block, "text")})
    if kind == "reasoning" and isinstance(block.get("reasoning"), str):
        return ReasoningContent(block["reasoning"], None, {MESSAGE_KEY: _rest(block, "reasoning")})
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        signature = block.get("signature")
        if isinstance(signature, str):
            rest = _rest(block, "thinking", "signature")
            return ReasoningContent(block["thinking"], signature, {MESSAGE_KEY: rest})
        return ReasoningContent(block["thinking"], None, {MESSAGE_KEY: _rest(block, "thinking")})
    if kind == "image_url":
        inner = block.get("image_url")
        url = inner.get("url") if isinstance(inner, dict) else inner
        if isinstance(url, str):
            rest = dict(block)
            rest["image_url"] = _rest(inner, "url") if isinstance(inner, dict) else None
            decoded = _data_uri(url)
            if decoded is not None:
                return DataContent(decoded[0], decoded[1], {MESSAGE_KEY: rest})
            return UriContent(url, "image/*", {MESSAGE_KEY: rest})
    if kind in _MEDIA:
        return _media(block, str(kind))
    return _opaque(block)


def _fill(rest: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``rest`` with its placeholders (keys present as ``None``) filled from ``values``."""
    out = dict(rest)
    for key, value in values.items():
        if key in out and out[key] is None:
            out[key] = value
    return out


def _block_of(content: Mapping[str, Any]) -> Any:
    """The content block a content made by :func:`_block_to_content` came from (the
    content in the codec's dict form); ``_MISSING`` if it was not made from one."""
    kind = content.get("type")
    if kind == UNKNOWN_TYPE and "block" in content:
        return content["block"]
    properties = content.get("additional_properties")
    rest = properties.get(MESSAGE_KEY) if isinstance(properties, dict) else None
    if kind == "text":
        if rest is None:
            return content.get("text")  # a bare string in a content list
        return _fill(rest, {"text": content.get("text")}) if isinstance(rest, dict) else _MISSING
    if not isinstance(rest, dict):
        return _MISSING
    if kind == "text_reasoning":
        key = "thinking" if rest.get("type") == "thinking" else "reasoning"
        return _fill(rest, {key: content.get("text"), "signature": content.get("protected_data")})
    uri = content.get("uri")
    if kind in ("data", "uri") and rest.get("type") == "image_url":
        out = dict(rest)
        inner = rest.get("image_url")
        out["image_url"] = uri if inner is None else {**inner, "url": uri}
        return out
    if kind == "data" and isinstance(uri, str):
        key = "data" if rest.get("source_type") == "base64" else "base64"
        payload = uri.partition(",")[2]  # the codec's data URI holds the base64 text
        return _fill(rest, {key: payload, "mime_type": content.get("media_type")})
    if kind == "uri":
        return _fill(rest, {"url": uri, "mime_type": content.get("media_type")})
    return _MISSING


_MISSING: Any = object()


# -- messages -------------------------------------------------------------------------------


def _without_defaults(data: Mapping[str, Any], *taken: str) -> dict[str, Any]:
    return {
        key: value
        for key, value in data.items()
        if key not in taken and not (key in _DEFAULTS and value == _DEFAULTS[key])
    }


def to_chatkeep(message: BaseMessage, *, message_id: str | None = None) -> Message:
    """The chatkeep message for a LangChain message (``message_id`` is chatkeep's own id;
    the LangChain ``id`` stays with the message)."""
    if not isinstance(message, BaseMessage):
        raise TypeError(f"not a LangChain message: {type(message).__name__}")
    dumped = message_to_dict(message)
    kind, data = dumped["type"], dumped["data"]
    taken = ["type", "content"]
    role = _ROLES.get(kind, "user")
    if kind in ("chat", "ChatMessageChunk") and isinstance(data.get("role"), str) and data["role"]:
        role = data["role"]
        taken.append("role")
    name = data.get("name")
    author = name if isinstance(name, str) else None
    if author is not None:
        taken.append("name")
    content = data.get("content")
    contents: list[Content] = []
    form = "text"
    if kind in ("tool", "ToolMessageChunk") and isinstance(data.get("tool_call_id"), str):
        status = data.get("status")
        error = None
        if status == "error":
            error = content if isinstance(content, str) else "error"
        contents.append(FunctionResultContent(data["tool_call_id"], content, error))
        taken.append("tool_call_id")
        form = "result"
    elif isinstance(content, str):
        contents.append(TextContent(content))
    elif isinstance(content, list):
        contents.extend(_block_to_content(block) for block in content)
        form = "blocks"
    else:
        taken.remove("content")
        form = "none"
    calls = data.get("tool_calls")
    if isinstance(calls, list) and calls and all(_is_call(call) for call in calls):
        for call in calls:
            call_id = call.get("id")
            rest = _rest(call, "name", "args", *(("id",) if isinstance(call_id, str) else ()))
            contents.append(
                FunctionCallContent(
                    call_id if isinstance(call_id, str) else "",
                    call["name"],
                    call["args"],
                    {MESSAGE_KEY: rest},
                )
            )
        taken.append("tool_calls")
    kept = {"type": kind, "content": form, "data": _without_defaults(data, *taken)}
    converted = Message(role, contents, author, message_id, {MESSAGE_KEY: kept})
    try:
        exact = _rebuild(converted) == message
    except (TypeError, ValueError, KeyError):
        exact = False
    if not exact:
        converted.additional_properties[MESSAGE_KEY] = {"type": _WHOLE, "message": dumped}
    return converted


def _is_call(call: Any) -> bool:
    return (
        isinstance(call, dict)
        and isinstance(call.get("name"), str)
        and isinstance(call.get("args"), dict)
    )


def from_dict(message: Mapping[str, Any]) -> BaseMessage | None:
    """The LangChain message a chatkeep message made by :func:`to_chatkeep` stands for,
    from the message's dict form (a decoded record); ``None`` if it was not made from a
    LangChain message."""
    properties = message.get("additional_properties")
    kept = properties.get(MESSAGE_KEY) if isinstance(properties, dict) else None
    if not isinstance(kept, dict):
        return None
    if kept.get("type") == _WHOLE:
        return messages_from_dict([kept["message"]])[0]
    kind, form, data = kept.get("type"), kept.get("content"), kept.get("data")
    contents = message.get("contents")
    if not isinstance(kind, str) or not isinstance(data, dict) or not isinstance(contents, list):
        return None
    out = dict(data)
    calls = [c for c in contents if isinstance(c, dict) and c.get("type") == "function_call"]
    others = [c for c in contents if not (isinstance(c, dict) and c.get("type") == "function_call")]
    if form == "text":
        if len(others) != 1 or others[0].get("type") != "text":
            return None
        out["content"] = others[0].get("text")
    elif form == "blocks":
        blocks = [_block_of(content) for content in others]
        if any(block is _MISSING for block in blocks):
            return None
        out["content"] = blocks
    elif form == "result":
        if len(others) != 1 or others[0].get("type") != "function_result":
            return None
        out["content"] = others[0].get("result")
        out["tool_call_id"] = others[0].get("call_id")
    if calls:
        out["tool_calls"] = [_call_of(call) for call in calls]
    author = message.get("author_name")
    if author is not None:
        out["name"] = author
    if kind in ("chat", "ChatMessageChunk") and "role" not in out:
        out["role"] = message.get("role")
    return messages_from_dict([{"type": kind, "data": out}])[0]


def _rebuild(message: Message) -> BaseMessage | None:
    return from_dict(plain_message(message))


def _call_of(call: Mapping[str, Any]) -> dict[str, Any]:
    properties = call.get("additional_properties")
    rest = properties.get(MESSAGE_KEY) if isinstance(properties, dict) else None
    values: dict[str, Any] = {"name": call.get("name"), "args": call.get("arguments")}
    if call.get("call_id"):  # an empty call id stands for a call LangChain gave no id
        values["id"] = call["call_id"]
    return _fill(rest if isinstance(rest, dict) else {}, values)


def from_chatkeep(message: Message) -> BaseMessage:
    """The LangChain message for a chatkeep message: exactly the one it was made from, or,
    for a message that did not come from LangChain, the LangChain message that says the
    same (user -> ``HumanMessage``, assistant -> ``AIMessage`` with ``tool_calls``, system
    -> ``SystemMessage``, tool results -> ``ToolMessage``)."""
    try:
        rebuilt = _rebuild(message)
    except (TypeError, ValueError, KeyError):
        rebuilt = None
    if rebuilt is not None:
        return rebuilt
    return _foreign(message)


# -- messages written by other chatkeep code ---------------------------------------------


def _foreign_block(content: Content) -> dict[str, Any] | None:
    if isinstance(content, TextContent):
        return {"type": "text", "text": content.text}
    if isinstance(content, ReasoningContent):
        return {"type": "reasoning", "reasoning": content.text or ""}
    if isinstance(content, DataContent):
        kind = content.media_type.split("/", 1)[0]
        return {
            "type": kind if kind in _MEDIA else "file",
            "base64": base64.b64encode(content.data).decode("ascii"),
            "mime_type": content.media_type,
        }
    if isinstance(content, UriContent):
        kind = (content.media_type or "").split("/", 1)[0]
        block: dict[str, Any] = {"type": kind if kind in _MEDIA else "file", "url": content.uri}
        if content.media_type and "*" not in content.media_type:
            block["mime_type"] = content.media_type
        return block
    if isinstance(content, UnknownContent) and content.type == UNKNOWN_TYPE:
        raw = content.raw.get("block")
        return raw if isinstance(raw, dict) else None
    return None


def _foreign(message: Message) -> BaseMessage:
    results = [c for c in message.contents if isinstance(c, FunctionResultContent)]
    if message.role == "tool" and len(results) == 1:
        result = results[0]
        output = result.result if result.result is not None else (result.exception or "")
        if not isinstance(output, (str, list)):
            output = json.dumps(output, default=str)
        status = "error" if result.exception is not None else "success"
        return ToolMessage(content=output, tool_call_id=result.call_id, status=status)
    text_only = all(isinstance(c, (TextContent, FunctionCallContent)) for c in message.contents)
    body: Any
    if text_only:
        body = "".join(c.text for c in message.contents if isinstance(c, TextContent))
    else:
        blocks = [
            _foreign_block(c) for c in message.contents if not isinstance(c, FunctionCallContent)
        ]
        body = [block for block in blocks if block is not None]
    name = message.author_name
    if message.role == "assistant":
        calls = [
            {
                "name": c.name,
                "args": c.arguments
                if isinstance(c.arguments, dict)
                else (json.loads(c.arguments) if c.arguments else {}),
                "id": c.call_id,
                "type": "tool_call",
            }
            for c in message.contents
            if isinstance(c, FunctionCallContent)
        ]
        return AIMessage(content=body, tool_calls=calls, name=name)
    if message.role == "system":
        return SystemMessage(content=body, name=name)
    return HumanMessage(content=body, name=name)
