"""Strands messages as chatkeep messages, and back, exactly.

A Strands ``Message`` is a dict ``{"role", "content": [ContentBlock, ...]}`` (plus an optional
``tracking_id`` and ``metadata``). Each content block becomes a chatkeep content, so other
chatkeep readers see a normal conversation:

=================================================  ==========================================
Strands block                                      chatkeep content
=================================================  ==========================================
``{"text": ...}``                                  :class:`TextContent`
``{"toolUse": {toolUseId, name, input}}``          :class:`FunctionCallContent`
``{"toolResult": {toolUseId, status, content}}``   :class:`FunctionResultContent` (``result``
                                                   the content list, ``status`` kept aside)
``{"image": {format, source: {bytes}}}``           :class:`DataContent` (``image/<format>``)
any other block                                    an :class:`UnknownContent` of type
                                                   ``strands_block`` holding the block
=================================================  ==========================================

Each mapping is checked when it is made; a block it would not rebuild exactly is kept whole.
The message's other keys (``tracking_id``, ``metadata``) go under :data:`STRANDS_KEY` of its
``additional_properties``, with the :class:`SessionMessage` fields (``message_id``, times,
and, for a redacted message, the original).
"""

from __future__ import annotations

from typing import Any, cast

from strands.types.content import Message as StrandsMessage
from strands.types.session import SessionMessage

from chatkeep.core import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
    UnknownContent,
)

__all__ = [
    "STRANDS_KEY",
    "UNKNOWN_TYPE",
    "block_to_content",
    "content_to_block",
    "from_session_message",
    "to_session_message",
]

#: The ``additional_properties`` key holding what the chatkeep form does not model.
STRANDS_KEY = "strands"
#: The ``type`` of an :class:`UnknownContent` holding a block verbatim.
UNKNOWN_TYPE = "strands_block"


def _mapped(block: Any) -> Content | None:
    if not isinstance(block, dict) or len(block) != 1:
        return None
    ((kind, value),) = block.items()
    if kind == "text" and isinstance(value, str):
        return TextContent(value)
    if (
        kind == "toolUse"
        and isinstance(value, dict)
        and set(value) == {"toolUseId", "name", "input"}
    ):
        return FunctionCallContent(value["toolUseId"], value["name"], value["input"])
    if (
        kind == "toolResult"
        and isinstance(value, dict)
        and set(value)
        == {
            "toolUseId",
            "status",
            "content",
        }
    ):
        return FunctionResultContent(
            value["toolUseId"], value["content"], additional_properties={"status": value["status"]}
        )
    if kind == "image" and isinstance(value, dict) and set(value) == {"format", "source"}:
        source = value["source"]
        if (
            isinstance(source, dict)
            and set(source) == {"bytes"}
            and isinstance(value["format"], str)
        ):
            data = source["bytes"]
            if isinstance(data, bytes):
                return DataContent(data, f"image/{value['format']}")
    return None


def content_to_block(content: Content) -> Any:
    """The Strands content block a chatkeep content stands for."""
    if isinstance(content, TextContent):
        return {"text": content.text}
    if isinstance(content, FunctionCallContent):
        return {
            "toolUse": {
                "toolUseId": content.call_id,
                "name": content.name,
                "input": content.arguments,
            }
        }
    if isinstance(content, FunctionResultContent):
        status = content.additional_properties.get("status", "success")
        result = content.result
        if not isinstance(result, list):
            result = [{"text": str(result)}] if result is not None else []
        return {"toolResult": {"toolUseId": content.call_id, "status": status, "content": result}}
    if isinstance(content, DataContent) and content.media_type.startswith("image/"):
        return {"image": {"format": content.media_type[6:], "source": {"bytes": content.data}}}
    if isinstance(content, UnknownContent) and content.type == UNKNOWN_TYPE:
        return content.raw.get("block")
    if isinstance(content, DataContent):
        return {
            "document": {
                "format": content.media_type.rpartition("/")[2],
                "name": "data",
                "source": {"bytes": content.data},
            }
        }
    text = getattr(content, "text", None)
    return {"text": text if isinstance(text, str) else ""}


def block_to_content(block: Any) -> Content:
    """The chatkeep content for one Strands block (mapped when that rebuilds it exactly)."""
    content = _mapped(block)
    if content is not None and content_to_block(content) == block:
        return content
    return UnknownContent({"type": UNKNOWN_TYPE, "block": block})


def _contents(message: StrandsMessage) -> list[Content]:
    return [block_to_content(block) for block in message.get("content", [])]


def _extra(message: StrandsMessage) -> dict[str, Any]:
    return {key: value for key, value in message.items() if key not in ("role", "content")}


def _strands_message(role: str, contents: list[Content], extra: dict[str, Any]) -> StrandsMessage:
    message: dict[str, Any] = {"role": role, "content": [content_to_block(c) for c in contents]}
    message.update(extra)
    return cast(StrandsMessage, message)


def from_session_message(session_message: SessionMessage, *, message_id: str) -> Message:
    """The chatkeep message for a Strands ``SessionMessage``: the contents are what the agent
    sees (the redacted message, when there is one); the original of a redacted message, the
    Strands ``message_id`` and times are kept under :data:`STRANDS_KEY`."""
    shown = session_message.to_message()
    kept: dict[str, Any] = {
        "id": session_message.message_id,
        "created_at": session_message.created_at,
        "updated_at": session_message.updated_at,
    }
    if _extra(shown):
        kept["extra"] = _extra(shown)
    if session_message.redact_message is not None:
        kept["original"] = dict(session_message.message)
    properties = {STRANDS_KEY: kept}
    return Message(shown.get("role", "user"), _contents(shown), None, message_id, properties)


def to_session_message(message: Message) -> SessionMessage | None:
    """The Strands ``SessionMessage`` a chatkeep message made by
    :func:`from_session_message` stands for; ``None`` for a message without a Strands id."""
    kept = message.additional_properties.get(STRANDS_KEY)
    if not isinstance(kept, dict) or type(kept.get("id")) is not int:
        return None
    extra = kept.get("extra")
    if not isinstance(extra, dict):
        extra = {}
    shown = _strands_message(message.role, message.contents, extra)
    original = kept.get("original")
    fields: dict[str, Any] = {}
    for name in ("created_at", "updated_at"):
        if isinstance(kept.get(name), str):
            fields[name] = kept[name]
    if isinstance(original, dict):
        return SessionMessage(
            message=cast(StrandsMessage, original),
            message_id=kept["id"],
            redact_message=shown,
            **fields,
        )
    return SessionMessage(message=shown, message_id=kept["id"], **fields)
