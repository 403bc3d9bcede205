"""Agents SDK items as chatkeep messages, and back, without losing anything.

Every item the SDK hands a session (a ``TResponseInputItem``: a plain JSON dict) becomes
one chatkeep :class:`~chatkeep.core.Message`, so other chatkeep code (``read_view``, the
CLI, reducers, Microsoft Agent Framework readers) sees a normal conversation:

==========================  =====================================================================
item                        chatkeep message
==========================  =====================================================================
``{"role": r, "content"}``  role ``r``; a string content is one :class:`TextContent`; content
                            parts: text/refusal -> :class:`TextContent`, images and files
                            (data URIs) -> :class:`DataContent`, links -> :class:`UriContent`,
                            anything else -> an ``openai_item`` :class:`UnknownContent`
``function_call``           ``assistant``, one :class:`FunctionCallContent` (arguments kept as
                            the SDK's JSON string)
``function_call_output``    ``tool``, one :class:`FunctionResultContent` (``result`` = output)
``reasoning``               ``assistant``, one :class:`ReasoningContent` (summary text,
                            ``encrypted_content`` as ``protected_data``)
any other type              ``assistant`` (or the item's role), one ``openai_item``
                            :class:`UnknownContent` holding the item verbatim
==========================  =====================================================================

What the message model does not represent (the item's ``id``, ``type``, ``status``, a part's
``annotations``, ...) is kept under the key :data:`ITEM_KEY` of the message's (and each
content's) ``additional_properties``, so :func:`message_to_items` rebuilds the item exactly:
``message_to_items(item_to_message(item)) == [item]`` for every JSON item. Each mapping is
checked when it is made; an item the mapping would not rebuild exactly is kept whole under
:data:`ITEM_KEY` (its contents are then only for other readers).

A message that did not come from an item (written by other chatkeep code, or a summary a
reducer made) is converted to the items the Responses API would take for it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
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
from chatkeep.core.adapters import plain_message

__all__ = ["ITEM_KEY", "UNKNOWN_TYPE", "item_to_message", "message_to_items"]

#: The ``additional_properties`` key holding what a message or content does not model.
ITEM_KEY = "openai_agents"
#: The ``type`` of an :class:`UnknownContent` holding an item or a content part verbatim
#: (the same convention as ``chatkeep.openai``).
UNKNOWN_TYPE = "openai_item"

# How a message's contents map back to its item ("as" in the message's ITEM_KEY dict).
_TEXT = "text"  # a message item whose content is a string
_PARTS = "message"  # a message item whose content is a list of parts
_CALL = "function_call"
_OUTPUT = "function_call_output"
_REASONING = "reasoning"
_OPAQUE = "item"  # an item type not modelled: the UnknownContent is the item
_WHOLE = "verbatim"  # the mapping would not rebuild the item: it is kept whole

_MESSAGE_ROLES = ("user", "assistant", "system", "developer")


# -- data URIs ------------------------------------------------------------------------------


def _parse_data_uri(value: str) -> tuple[bytes, str] | None:
    """``(data, media_type)`` of a ``data:<type>;base64,<payload>`` URI, else ``None``."""
    if not value.startswith("data:"):
        return None
    header, sep, payload = value.partition(",")
    if not sep or not header.endswith(";base64"):
        return None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data, header[5:-7]


def _data_uri(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


# -- content parts --------------------------------------------------------------------------


def _rest(mapping: Mapping[str, Any], *taken: str) -> dict[str, Any]:
    """What ``mapping`` keeps besides the ``taken`` keys, which stay as ``None``
    placeholders so that the rebuilt dict has its keys in the original order."""
    return {key: (None if key in taken else value) for key, value in mapping.items()}


def _opaque_part(part: Any) -> UnknownContent:
    return UnknownContent({"type": UNKNOWN_TYPE, "part": part})


def _part_to_content(part: Any) -> Content:
    """One content part of a message item as a chatkeep content."""
    if not isinstance(part, dict):
        return _opaque_part(part)
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
        return TextContent(part["text"], {ITEM_KEY: _rest(part, "text")})
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return TextContent(part["refusal"], {ITEM_KEY: _rest(part, "refusal")})
    key = {"input_image": "image_url", "input_file": "file_data"}.get(str(kind))
    if key is not None and isinstance(part.get(key), str):
        decoded = _parse_data_uri(part[key])
        if decoded is not None:
            return DataContent(decoded[0], decoded[1], {ITEM_KEY: _rest(part, key)})
        if kind == "input_image":
            return UriContent(part[key], "image/*", {ITEM_KEY: _rest(part, key)})
    if kind == "input_file" and isinstance(part.get("file_url"), str):
        return UriContent(part["file_url"], None, {ITEM_KEY: _rest(part, "file_url")})
    return _opaque_part(part)


def _part_of(content: Mapping[str, Any]) -> Any:
    """The content part a content made by :func:`_part_to_content` came from (``content``
    in the codec's dict form), or ``None``."""
    kind = content.get("type")
    if kind == UNKNOWN_TYPE and "part" in content:
        return content["part"]
    properties = content.get("additional_properties")
    rest = properties.get(ITEM_KEY) if isinstance(properties, dict) else None
    if not isinstance(rest, dict):
        return None
    part_type = rest.get("type")
    if kind == "text":
        return {**rest, ("refusal" if part_type == "refusal" else "text"): content.get("text")}
    if kind == "data":
        return {
            **rest,
            ("image_url" if part_type == "input_image" else "file_data"): content.get("uri"),
        }
    if kind == "uri":
        return {
            **rest,
            ("image_url" if part_type == "input_image" else "file_url"): content.get("uri"),
        }
    return None


# -- items -> messages ----------------------------------------------------------------------


def _reasoning(item: Mapping[str, Any]) -> tuple[list[Content], dict[str, Any]]:
    """A reasoning item's content and what the item keeps besides it."""
    summary = item.get("summary")
    encrypted = item.get("encrypted_content")
    taken = ["encrypted_content"] if isinstance(encrypted, str) else []
    extra: dict[str, Any] = {}
    text: str | None = None
    if isinstance(summary, list) and all(
        isinstance(part, dict) and isinstance(part.get("text"), str) for part in summary
    ):
        texts = [part["text"] for part in summary]
        if len(texts) <= 1:  # the usual case: the text alone rebuilds the summary
            taken.append("summary")
            extra = {ITEM_KEY: {"summary": [_rest(part, "text") for part in summary]}}
            text = texts[0] if texts else None
        else:  # several parts: the item keeps them; the content shows them joined
            text = "\n\n".join(texts)
    content = ReasoningContent(text, encrypted if isinstance(encrypted, str) else None, extra)
    return [content], _rest(item, *taken)


def _forward(item: Mapping[str, Any]) -> tuple[str, list[Content], str, dict[str, Any]]:
    """``(role, contents, how, residue)`` for an item, before the exactness check."""
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        role = item.get("role")
        content = item.get("content")
        taken = ["role"] if isinstance(role, str) and role else []
        if isinstance(content, str):
            contents: list[Content] = [TextContent(content)]
            how = _TEXT
            taken.append("content")
        elif isinstance(content, list):
            contents = [_part_to_content(part) for part in content]
            how = _PARTS
            taken.append("content")
        else:
            contents, how = [], _PARTS
        return (
            (role if isinstance(role, str) and role else "user"),
            contents,
            how,
            _rest(item, *taken),
        )
    if kind == "function_call":
        call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
        taken = [
            key
            for key, value in (("call_id", call_id), ("name", name), ("arguments", arguments))
            if isinstance(value, str)
        ]
        call = FunctionCallContent(
            call_id if isinstance(call_id, str) else "",
            name if isinstance(name, str) else "",
            arguments if isinstance(arguments, str) else None,
        )
        return "assistant", [call], _CALL, _rest(item, *taken)
    if kind == "function_call_output":
        call_id = item.get("call_id")
        taken = ["call_id"] if isinstance(call_id, str) else []
        if "output" in item and item["output"] is not None:
            taken.append("output")
        result = FunctionResultContent(
            call_id if isinstance(call_id, str) else "", item.get("output")
        )
        return "tool", [result], _OUTPUT, _rest(item, *taken)
    if kind == "reasoning":
        contents, residue = _reasoning(item)
        return "assistant", contents, _REASONING, residue
    role = item.get("role")
    opaque = UnknownContent({"type": UNKNOWN_TYPE, "item": dict(item)})
    return (role if isinstance(role, str) and role else "assistant"), [opaque], _OPAQUE, {}


def item_to_message(item: Mapping[str, Any], *, message_id: str | None = None) -> Message:
    """The chatkeep message for one Agents SDK item (``message_id`` is chatkeep's own id,
    never the item's: that one stays in the item).

    Raises ``TypeError`` for an item that is not a dict with string keys.
    """
    if not isinstance(item, Mapping):
        raise TypeError(f"an Agents SDK item is a dict, not {type(item).__name__}")
    role, contents, how, residue = _forward(item)
    message = Message(role, contents, None, message_id, {ITEM_KEY: {"as": how, "item": residue}})
    try:
        exact = _item_of(message) == item
    except (TypeError, ValueError, KeyError):
        exact = False
    if not exact:
        message.additional_properties[ITEM_KEY] = {"as": _WHOLE, "item": dict(item)}
    return message


# -- messages -> items ----------------------------------------------------------------------


def _only(contents: list[Any], kind: str) -> dict[str, Any] | None:
    if len(contents) == 1 and isinstance(contents[0], dict) and contents[0].get("type") == kind:
        return contents[0]
    return None


def item_of_dict(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """The item a message made by :func:`item_to_message` stands for, from the message's
    dict form (a decoded record, or :func:`~chatkeep.core.adapters.plain_message`); ``None``
    if it was not made from an item."""
    properties = message.get("additional_properties")
    kept = properties.get(ITEM_KEY) if isinstance(properties, dict) else None
    if not isinstance(kept, dict) or not isinstance(kept.get("item"), dict):
        return None
    how, residue = kept.get("as"), kept["item"]
    if how == _WHOLE:
        return dict(residue)
    contents = message.get("contents")
    if not isinstance(contents, list):
        return None
    built: dict[str, Any]
    if how == _OPAQUE:
        opaque = _only(contents, UNKNOWN_TYPE)
        raw = opaque.get("item") if opaque is not None else None
        return dict(raw) if isinstance(raw, dict) else None
    if how == _TEXT:
        text = _only(contents, "text")
        if text is None:
            return None
        built = {"role": message.get("role"), "content": text.get("text")}
    elif how == _PARTS:
        parts = [_part_of(c) if isinstance(c, dict) else None for c in contents]
        if any(part is None for part in parts):
            return None
        built = {"role": message.get("role"), "content": parts}
    elif how == _CALL:
        call = _only(contents, "function_call")
        if call is None:
            return None
        built = {"call_id": call.get("call_id"), "name": call.get("name")}
        arguments = call.get("arguments")
        if arguments is not None:
            built["arguments"] = arguments if isinstance(arguments, str) else json.dumps(arguments)
    elif how == _OUTPUT:
        result = _only(contents, "function_result")
        if result is None:
            return None
        built = {"call_id": result.get("call_id")}
        if result.get("result") is not None:
            built["output"] = result["result"]
    elif how == _REASONING:
        reasoning = _only(contents, "text_reasoning")
        if reasoning is None:
            return None
        built = {}
        extra = reasoning.get("additional_properties")
        kept_parts = extra.get(ITEM_KEY) if isinstance(extra, dict) else None
        summary = kept_parts.get("summary") if isinstance(kept_parts, dict) else None
        if isinstance(summary, list):
            text = reasoning.get("text")
            texts = [] if text is None else [text]
            built["summary"] = [
                {**part, "text": value} for part, value in zip(summary, texts, strict=False)
            ]
        if reasoning.get("protected_data") is not None:
            built["encrypted_content"] = reasoning["protected_data"]
    else:
        return None
    item = dict(residue)  # in the item's own key order (taken keys are placeholders)
    item.update(built)
    return item


def _item_of(message: Message) -> dict[str, Any] | None:
    return item_of_dict(plain_message(message))


def message_to_items(message: Message) -> list[dict[str, Any]]:
    """The Agents SDK items for a chatkeep message: exactly the item it was made from, or,
    for a message that was not made from an item, the Responses API input items that say
    the same (text, images, function calls and results; reasoning written by another
    service has no item form and is left out)."""
    item = _item_of(message)
    if item is not None:
        return [item]
    return _foreign_items(message)


# -- messages written by other chatkeep code -------------------------------------------------


def _foreign_part(content: Content) -> dict[str, Any] | None:
    """A content of a message not made from an item, as a Responses input part."""
    if isinstance(content, TextContent):
        return {"type": "input_text", "text": content.text}
    if isinstance(content, DataContent):
        uri = _data_uri(content.data, content.media_type)
        if content.media_type.startswith("image/"):
            return {"type": "input_image", "image_url": uri, "detail": "auto"}
        return {"type": "input_file", "file_data": uri}
    if isinstance(content, UriContent):
        if content.media_type is None or content.media_type.startswith("image"):
            return {"type": "input_image", "image_url": content.uri, "detail": "auto"}
        return {"type": "input_file", "file_url": content.uri}
    if isinstance(content, UnknownContent) and content.type == UNKNOWN_TYPE:
        part = content.raw.get("part")
        return dict(part) if isinstance(part, dict) else None
    return None


def _result_output(content: FunctionResultContent) -> Any:
    if content.exception is not None and content.result is None:
        return content.exception
    if isinstance(content.result, (str, list)):
        return content.result
    return json.dumps(content.result, default=str)


def _foreign_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    assistant = message.role == "assistant"

    def flush() -> None:
        if assistant and texts:
            items.append({"role": "assistant", "content": "".join(texts)})
        elif parts:
            role = message.role if message.role in _MESSAGE_ROLES else "user"
            items.append({"role": role, "content": list(parts)})
        texts.clear()
        parts.clear()

    for content in message.contents:
        if isinstance(content, FunctionCallContent):
            flush()
            arguments = content.arguments
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments if arguments is not None else {})
            items.append(
                {
                    "type": "function_call",
                    "call_id": content.call_id,
                    "name": content.name,
                    "arguments": arguments,
                }
            )
        elif isinstance(content, FunctionResultContent):
            flush()
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": content.call_id,
                    "output": _result_output(content),
                }
            )
        elif isinstance(content, UnknownContent) and isinstance(content.raw.get("item"), dict):
            flush()
            items.append(dict(content.raw["item"]))
        elif assistant and isinstance(content, TextContent):
            texts.append(content.text)
        elif not assistant:
            part = _foreign_part(content)
            if part is not None:
                parts.append(part)
    flush()
    if len(items) == 1 and not assistant and items[0].get("content") is not None:
        only = items[0]["content"]
        if (
            isinstance(only, list)
            and len(only) == 1
            and only[0].get("type") == "input_text"
            and message.role in _MESSAGE_ROLES
        ):
            items[0]["content"] = only[0]["text"]  # plain text reads as the SDK writes it
    return items
