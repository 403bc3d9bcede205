"""Conversion between chatkeep messages and the Anthropic Messages wire format.

To Anthropic (:func:`to_anthropic`):

* system messages become the top-level ``system`` field (one text: a string; more: text
  blocks), wherever they were in the history;
* ``tool`` messages become ``user`` messages of ``tool_result`` blocks (a result that is
  not a string is sent as JSON text; ``exception`` is sent with ``is_error: true``);
* function calls become ``tool_use`` blocks (``input`` is always an object);
* reasoning becomes ``thinking`` (signature = ``protected_data``) or, without text,
  ``redacted_thinking`` (data = ``protected_data``);
* bytes become base64 ``image``/``document`` blocks, URIs ``url`` sources;
* consecutive messages of one role are merged into one message, as the API requires;
* block fields chatkeep does not model (``citations``, ``cache_control`` ...) travel in a
  content's ``additional_properties["anthropic"]``, and unknown block types as
  :class:`~chatkeep.core.UnknownContent`, so they round-trip verbatim.

From Anthropic (:func:`content_from_block`, :func:`from_anthropic`) is the inverse: a user
message holding ``tool_result`` blocks splits back into a ``tool`` message and a ``user``
message, so ``from_anthropic(*to_anthropic(history)) == history`` for every history the
API can express (see the package README for the exact limits).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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

__all__ = [
    "EXTRA_KEY",
    "AnthropicRequest",
    "content_from_block",
    "from_anthropic",
    "message_from_response",
    "to_anthropic",
    "tool_to_anthropic",
]

#: The ``additional_properties`` key holding block fields chatkeep does not model.
EXTRA_KEY = "anthropic"

# Media types the API accepts as base64 documents (images are any image/*).
_DOCUMENT_TYPES = ("application/pdf", "text/plain")


@dataclass
class AnthropicRequest:
    """The history as the Messages API takes it: ``system`` (``None`` when there is no
    system message) and ``messages``."""

    system: str | list[dict[str, Any]] | None
    messages: list[dict[str, Any]]


def _with_extra(block: dict[str, Any], content: Any) -> dict[str, Any]:
    extra = getattr(content, "additional_properties", {}).get(EXTRA_KEY)
    if isinstance(extra, Mapping):
        for key, value in extra.items():
            block.setdefault(key, value)
    return block


def _arguments(arguments: str | dict[str, Any] | None) -> dict[str, Any]:
    if arguments is None:
        return {}
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        parsed = None
    # Another model may have produced arguments that are not a JSON object; the API only
    # takes objects, so such text is wrapped rather than lost.
    return parsed if isinstance(parsed, dict) else {"arguments": arguments}


def _result_text(content: FunctionResultContent) -> str:
    if content.exception is not None:
        return content.exception
    if isinstance(content.result, str):
        return content.result
    if content.result is None:
        return ""
    return json.dumps(content.result, default=str, ensure_ascii=False)


def _media_block(media_type: str, source: dict[str, Any]) -> dict[str, Any]:
    kind = "document" if media_type in _DOCUMENT_TYPES else "image"
    if kind == "image" and media_type and not media_type.startswith("image/"):
        raise ValueError(
            f"the Anthropic Messages API cannot take {media_type!r} content "
            "(images, PDF and plain text only)"
        )
    return {"type": kind, "source": source}


def content_to_block(content: Content) -> dict[str, Any] | None:
    """One chatkeep content as an Anthropic content block (``None``: nothing to send)."""
    if isinstance(content, TextContent):
        return _with_extra({"type": "text", "text": content.text}, content)
    block: dict[str, Any]
    if isinstance(content, FunctionCallContent):
        block = {
            "type": "tool_use",
            "id": content.call_id,
            "name": content.name,
            "input": _arguments(content.arguments),
        }
        return _with_extra(block, content)
    if isinstance(content, FunctionResultContent):
        block = {
            "type": "tool_result",
            "tool_use_id": content.call_id,
            "content": _result_text(content),
        }
        if content.exception is not None:
            block["is_error"] = True
        return _with_extra(block, content)
    if isinstance(content, ReasoningContent):
        if content.text is None:
            if content.protected_data is None:
                return None
            return _with_extra(
                {"type": "redacted_thinking", "data": content.protected_data}, content
            )
        block = {
            "type": "thinking",
            "thinking": content.text,
            "signature": content.protected_data or "",
        }
        return _with_extra(block, content)
    if isinstance(content, DataContent):
        if content.media_type == "text/plain":
            text = content.data.decode("utf-8")
            source = {"type": "text", "media_type": "text/plain", "data": text}
        else:
            data = base64.b64encode(content.data).decode("ascii")
            source = {"type": "base64", "media_type": content.media_type, "data": data}
        return _with_extra(_media_block(content.media_type, source), content)
    if isinstance(content, UriContent):
        media_type = content.media_type or "image/*"
        return _with_extra(_media_block(media_type, {"type": "url", "url": content.uri}), content)
    if isinstance(content, UnknownContent):
        return dict(content.raw)  # a block chatkeep does not model, sent back verbatim
    raise TypeError(f"cannot send {type(content).__name__} to the Anthropic Messages API")


def tool_to_anthropic(tool: Any) -> dict[str, Any]:
    """A :class:`chatkeep.core.Tool` (or an Anthropic tool dict, passed through) as an
    entry of the ``tools`` parameter."""
    if isinstance(tool, Mapping):
        return dict(tool)
    schema = dict(getattr(tool, "parameters", None) or {"type": "object", "properties": {}})
    schema.setdefault("type", "object")
    entry: dict[str, Any] = {"name": tool.name, "input_schema": schema}
    if getattr(tool, "description", None):
        entry["description"] = tool.description
    return entry


def to_anthropic(messages: Iterable[Message]) -> AnthropicRequest:
    """``messages`` as the Messages API's ``system`` and ``messages`` fields."""
    system: list[dict[str, Any]] = []
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            for content in message.contents:
                block = content_to_block(content)
                if block is not None:
                    system.append(block)
            continue
        if message.role not in ("user", "assistant", "tool"):
            raise ValueError(
                f"the Anthropic Messages API has no {message.role!r} role "
                "(only system, user, assistant and tool messages can be sent)"
            )
        role = "user" if message.role == "tool" else message.role
        blocks = [b for c in message.contents if (b := content_to_block(c)) is not None]
        if not blocks:
            continue  # the API refuses empty messages
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)  # the API wants roles to alternate
        else:
            wire.append({"role": role, "content": blocks})
    system_field: str | list[dict[str, Any]] | None = None
    if len(system) == 1 and set(system[0]) == {"type", "text"}:
        system_field = system[0]["text"]
    elif system:
        system_field = system
    return AnthropicRequest(system_field, wire)


# -- from Anthropic -----------------------------------------------------------------


def _extra(block: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    skip = {"type", *known}
    extra = {k: v for k, v in block.items() if k not in skip and v is not None}
    return {EXTRA_KEY: extra} if extra else {}


def _block_dict(block: Any) -> dict[str, Any]:
    if isinstance(block, Mapping):
        return dict(block)
    dump = getattr(block, "model_dump", None)
    if callable(dump):  # an SDK model
        result: dict[str, Any] = dump(mode="json", exclude_none=True)
        return result
    raise TypeError(f"not an Anthropic content block: {type(block).__name__}")


def _tool_result_content(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            str(b.get("text", ""))
            for b in value
            if isinstance(b, Mapping) and b.get("type") == "text"
        )
    return json.dumps(value)


def _source_content(block: dict[str, Any]) -> Content:
    source = block.get("source")
    extra = _extra(block, ("source",))
    if isinstance(source, Mapping):
        kind = source.get("type")
        if kind == "base64":
            data = base64.b64decode(str(source.get("data", "")))
            return DataContent(data, str(source.get("media_type")), additional_properties=extra)
        if kind == "text":
            data = str(source.get("data", "")).encode("utf-8")
            return DataContent(data, "text/plain", additional_properties=extra)
        if kind == "url":
            media_type = "application/pdf" if block["type"] == "document" else None
            return UriContent(str(source.get("url")), media_type, additional_properties=extra)
    return UnknownContent(block)


def content_from_block(block: Any) -> Content:
    """One Anthropic content block (a dict or an SDK model) as a chatkeep content."""
    data = _block_dict(block)
    kind = data.get("type")
    if kind == "text":
        return TextContent(str(data.get("text", "")), _extra(data, ("text",)))
    if kind == "tool_use":
        return FunctionCallContent(
            str(data["id"]),
            str(data["name"]),
            dict(data.get("input") or {}),
            _extra(data, ("id", "name", "input")),
        )
    if kind == "tool_result":
        text = _tool_result_content(data.get("content"))
        known = ("tool_use_id", "content", "is_error")
        if data.get("is_error"):
            return FunctionResultContent(str(data["tool_use_id"]), None, text, _extra(data, known))
        return FunctionResultContent(str(data["tool_use_id"]), text, None, _extra(data, known))
    if kind == "thinking":
        return ReasoningContent(
            str(data.get("thinking", "")),
            data.get("signature") or None,
            _extra(data, ("thinking", "signature")),
        )
    if kind == "redacted_thinking":
        return ReasoningContent(None, str(data.get("data", "")), _extra(data, ("data",)))
    if kind in ("image", "document"):
        return _source_content(data)
    return UnknownContent(data)


def from_anthropic(
    system: str | Sequence[Any] | None, messages: Iterable[Mapping[str, Any]]
) -> list[Message]:
    """The chatkeep history of a Messages API request (the inverse of :func:`to_anthropic`).

    ``tool_result`` blocks of a user message become a ``tool`` message; the blocks around
    them stay ``user`` messages, in order.
    """
    history: list[Message] = []
    if isinstance(system, str):
        history.append(Message.system(system))
    elif system:
        history.extend(Message("system", [content_from_block(b)]) for b in system)
    for message in messages:
        role = str(message["role"])
        raw = message.get("content")
        blocks = [{"type": "text", "text": raw}] if isinstance(raw, str) else list(raw or [])
        pieces: list[Message] = []  # one wire message: split where the role changes
        for block in blocks:
            content = content_from_block(block)
            piece_role = "tool" if isinstance(content, FunctionResultContent) else role
            if pieces and pieces[-1].role == piece_role:
                pieces[-1].contents.append(content)
            else:
                pieces.append(Message(piece_role, [content]))
        history.extend(pieces)
    return history


def message_from_response(response: Any) -> Message:
    """The assistant message of a Messages API response (an SDK ``Message`` or a dict)."""
    data = response if isinstance(response, Mapping) else None
    content = data["content"] if data is not None else response.content
    message_id = data["id"] if data is not None else response.id
    return Message("assistant", [content_from_block(b) for b in content], message_id=message_id)
