"""Messages to and from Responses API items (also the items of a Conversation).

:func:`to_items` turns core messages into ``input`` items; :func:`from_items` reads items
(a response's ``output``, a request's ``input``, a conversation's items) back. Kept both
ways: text parts and their annotations, refusals, images and files (data URIs, links),
function calls (call id, name, arguments text), function-call outputs, and reasoning
items (their id, summary, reasoning text and ``encrypted_content``, which is what lets a
client-managed ``store=False`` conversation hand a reasoning model its own earlier
reasoning). An item the core does not model (a web search call, an MCP call, ...) is kept
verbatim as an :class:`~chatkeep.core.UnknownContent` of type ``"openai_item"`` and sent
back as it was.

Items that belong to the model's turn (assistant messages, reasoning, function calls,
other tool calls) read back as one assistant message, in order; consecutive function-call
outputs as one ``tool`` message, as the agent writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from chatkeep.core import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    TextContent,
    Tool,
    UnknownContent,
    UriContent,
)

from ._common import data_uri, dump, json_arguments, parse_data_uri, result_text

__all__ = [
    "UNKNOWN_ITEM",
    "from_items",
    "split_instructions",
    "to_items",
    "to_response_tools",
]

#: The ``type`` of an :class:`UnknownContent` holding a Responses item verbatim.
UNKNOWN_ITEM = "openai_item"

_INPUT_ROLES = ("user", "system", "developer")


def to_response_tools(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """Core tools as Responses function tools (not ``strict``: optional parameters are
    allowed)."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "strict": False,
        }
        for tool in tools
    ]


def split_instructions(messages: Sequence[Message]) -> tuple[str | None, list[Message]]:
    """The leading system messages' text (sent as ``instructions``, which a stored
    conversation does not keep, so they are not repeated into its history) and the rest."""
    index = 0
    while index < len(messages) and messages[index].role in ("system", "developer"):
        index += 1
    texts = [m.text for m in messages[:index] if m.text]
    return ("\n\n".join(texts) if texts else None), list(messages[index:])


# -- core -> items -------------------------------------------------------------------------


def _input_part(content: Content) -> dict[str, Any] | None:
    if isinstance(content, TextContent):
        return {"type": "input_text", "text": content.text}
    extra = content.additional_properties if not isinstance(content, UnknownContent) else {}
    if isinstance(content, DataContent):
        uri = data_uri(content.data, content.media_type)
        if content.media_type.startswith("image/"):
            return {"type": "input_image", "image_url": uri, "detail": extra.get("detail", "auto")}
        return {
            "type": "input_file",
            "file_data": uri,
            "filename": extra.get("filename", "file"),
        }
    if isinstance(content, UriContent):
        if content.media_type is None or content.media_type.startswith("image"):
            return {
                "type": "input_image",
                "image_url": content.uri,
                "detail": extra.get("detail", "auto"),
            }
        return {"type": "input_file", "file_url": content.uri}
    if isinstance(content, UnknownContent) and content.type == UNKNOWN_ITEM:
        part = content.raw.get("part")
        return dict(part) if isinstance(part, Mapping) else None
    return None


def _output_part(content: TextContent) -> dict[str, Any]:
    if content.additional_properties.get("refusal"):
        return {"type": "refusal", "refusal": content.text}
    return {
        "type": "output_text",
        "text": content.text,
        "annotations": list(content.additional_properties.get("annotations", [])),
    }


def _reasoning_item(content: ReasoningContent) -> dict[str, Any] | None:
    extra = content.additional_properties
    item_id = extra.get("item_id")
    # Only the service's own reasoning items can go back (they need their id); reasoning
    # from another vendor or protocol is not something this API accepts as input.
    if not isinstance(item_id, str):
        return None
    if "summary" in extra:
        summary = [{"type": "summary_text", "text": text} for text in extra["summary"]]
    else:
        summary = [{"type": "summary_text", "text": content.text}] if content.text else []
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": summary}
    if "content" in extra:
        item["content"] = [{"type": "reasoning_text", "text": text} for text in extra["content"]]
    if content.protected_data is not None:
        item["encrypted_content"] = content.protected_data
    return item


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []

    def flush() -> None:
        if parts:
            items.append({"type": "message", "role": "assistant", "content": list(parts)})
            parts.clear()

    for content in message.contents:
        if isinstance(content, TextContent):
            parts.append(_output_part(content))
            continue
        flush()
        if isinstance(content, ReasoningContent):
            reasoning = _reasoning_item(content)
            if reasoning is not None:
                items.append(reasoning)
        elif isinstance(content, FunctionCallContent):
            items.append(
                {
                    "type": "function_call",
                    "call_id": content.call_id,
                    "name": content.name,
                    "arguments": json_arguments(content.arguments),
                }
            )
        elif isinstance(content, FunctionResultContent):
            items.append(_output_item(content))
        elif isinstance(content, UnknownContent) and content.type == UNKNOWN_ITEM:
            item = content.raw.get("item")
            if isinstance(item, Mapping):
                items.append(dict(item))
    flush()
    return items


def _output_item(content: FunctionResultContent) -> dict[str, Any]:
    return {
        "type": "function_call_output",
        "call_id": content.call_id,
        "output": result_text(content),
    }


def to_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Core messages as Responses ``input`` items.

    No item carries a service item id except reasoning (which needs it): ids of messages
    and calls are not needed to continue, and with ``store=False`` the service rejects ids
    it did not persist.
    """
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            items.extend(_assistant_items(message))
            continue
        results = [c for c in message.contents if isinstance(c, FunctionResultContent)]
        others = [c for c in message.contents if not isinstance(c, FunctionResultContent)]
        if message.role != "tool" and (others or not results):
            parts = [part for part in map(_input_part, others) if part is not None]
            role = message.role if message.role in _INPUT_ROLES else "user"
            items.append({"type": "message", "role": role, "content": parts})
        items.extend(_output_item(result) for result in results)
    return items


# -- items -> core -------------------------------------------------------------------------


def _content_from_part(part: Mapping[str, Any]) -> Content:
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
        annotations = part.get("annotations")
        return TextContent(part["text"], {"annotations": list(annotations)} if annotations else {})
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return TextContent(part["refusal"], {"refusal": True})
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        detail = part.get("detail", "auto")
        extra = {"detail": detail} if detail != "auto" else {}
        decoded = parse_data_uri(part["image_url"])
        if decoded is not None:
            return DataContent(decoded[0], decoded[1], extra)
        return UriContent(part["image_url"], "image/*", extra)
    if kind == "input_file":
        if isinstance(part.get("file_data"), str) and set(part) <= {
            "type",
            "file_data",
            "filename",
        }:
            decoded = parse_data_uri(part["file_data"])
            if decoded is not None:
                filename = part.get("filename", "file")
                return DataContent(
                    decoded[0], decoded[1], {"filename": filename} if filename != "file" else {}
                )
        if isinstance(part.get("file_url"), str) and set(part) <= {"type", "file_url"}:
            return UriContent(part["file_url"], "application/octet-stream")
    return UnknownContent({"type": UNKNOWN_ITEM, "part": dict(part)})


def _reasoning(item: Mapping[str, Any]) -> ReasoningContent:
    summary = [str(s.get("text", "")) for s in item.get("summary") or () if isinstance(s, Mapping)]
    extra: dict[str, Any] = {}
    if isinstance(item.get("id"), str):
        extra["item_id"] = item["id"]
    if len(summary) > 1:
        extra["summary"] = summary
    if item.get("content"):
        extra["content"] = [
            str(c.get("text", "")) for c in item["content"] if isinstance(c, Mapping)
        ]
    encrypted = item.get("encrypted_content")
    return ReasoningContent(
        "\n\n".join(summary) if summary else None,
        encrypted if isinstance(encrypted, str) else None,
        extra,
    )


def from_items(items: Iterable[Any]) -> list[Message]:
    """Responses items (dicts or SDK models) as core messages."""
    out: list[Message] = []

    def turn(role: str) -> Message:
        if out and out[-1].role == role and role in ("assistant", "tool"):
            return out[-1]
        message = Message(role, [])
        out.append(message)
        return message

    for value in items:
        item: Mapping[str, Any] = dump(value)
        kind = item.get("type", "message")
        if kind == "message":
            role = str(item.get("role", "user"))
            raw = item.get("content")
            parts: list[Content] = [TextContent(raw)] if isinstance(raw, str) else []
            if isinstance(raw, list):
                parts = [_content_from_part(p) for p in raw if isinstance(p, Mapping)]
            if role == "assistant":
                turn("assistant").contents.extend(parts)
            else:
                out.append(Message(role, parts))
        elif kind == "function_call":
            turn("assistant").contents.append(
                FunctionCallContent(
                    str(item.get("call_id", "")), str(item.get("name", "")), item.get("arguments")
                )
            )
        elif kind == "function_call_output":
            output = item.get("output")
            if isinstance(output, list):
                output = "".join(str(p.get("text", "")) for p in output if isinstance(p, Mapping))
            turn("tool").contents.append(
                FunctionResultContent(str(item.get("call_id", "")), output)
            )
        elif kind == "reasoning":
            turn("assistant").contents.append(_reasoning(item))
        else:
            # Hosted tool calls and anything newer: part of the model's turn, kept verbatim.
            turn("assistant").contents.append(
                UnknownContent({"type": UNKNOWN_ITEM, "item": dict(item)})
            )
    return out
