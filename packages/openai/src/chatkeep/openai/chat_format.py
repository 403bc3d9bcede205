"""Messages to and from the Chat Completions format.

:func:`to_chat_messages` turns core messages into the ``messages`` of a request;
:func:`from_chat_messages` reads that format (requests, or a completion's message) back.
Both directions keep everything the format can express: text (several parts stay
several parts), images and audio and files (as data URIs or links), the author's name,
tool calls (id, name, arguments text), tool results (one ``tool`` message per result, as
the format requires; consecutive ``tool`` messages read back as one core message),
refusals, and a vendor's reasoning text (``reasoning_content``, as DeepSeek, Qwen, Kimi
and GLM return it). A content part the core does not model is kept verbatim as an
:class:`~chatkeep.core.UnknownContent` of type ``"openai_chat_part"`` and sent back as it
was.

What the format cannot express is dropped when sending: reasoning (unless
``reasoning_field`` names the vendor's field), and the structure of a non-text tool result
(sent as its JSON text; it reads back as that text).
"""

from __future__ import annotations

import base64
import binascii
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
    "UNKNOWN_PART",
    "from_chat_message",
    "from_chat_messages",
    "to_chat_messages",
    "to_chat_tools",
]

#: The ``type`` of an :class:`UnknownContent` holding a content part verbatim.
UNKNOWN_PART = "openai_chat_part"

_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def to_chat_tools(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """Core tools as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


# -- core -> Chat Completions -------------------------------------------------------------


def _part(content: Content) -> dict[str, Any] | None:
    """A user/system content part, or ``None`` when the format has no place for it."""
    if isinstance(content, TextContent):
        return {"type": "text", "text": content.text}
    if isinstance(content, DataContent):
        extra = content.additional_properties
        if content.media_type.startswith("image/"):
            image: dict[str, Any] = {"url": data_uri(content.data, content.media_type)}
            if "detail" in extra:
                image["detail"] = extra["detail"]
            return {"type": "image_url", "image_url": image}
        audio_format = _AUDIO_FORMATS.get(content.media_type)
        if audio_format is not None:
            encoded = base64.b64encode(content.data).decode("ascii")
            return {"type": "input_audio", "input_audio": {"data": encoded, "format": audio_format}}
        file: dict[str, Any] = {"file_data": data_uri(content.data, content.media_type)}
        if "filename" in extra:
            file["filename"] = extra["filename"]
        return {"type": "file", "file": file}
    if isinstance(content, UriContent):
        image = {"url": content.uri}
        if "detail" in content.additional_properties:
            image["detail"] = content.additional_properties["detail"]
        return {"type": "image_url", "image_url": image}
    if isinstance(content, UnknownContent) and content.type == UNKNOWN_PART:
        part = content.raw.get("part")
        return dict(part) if isinstance(part, Mapping) else None
    return None


def _text_or_parts(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    # One text part is sent as a plain string, the form every vendor accepts.
    if len(parts) == 1 and parts[0]["type"] == "text":
        text: str = parts[0]["text"]
        return text
    return parts


def _assistant(message: Message, reasoning_field: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant"}
    texts: list[dict[str, Any]] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for content in message.contents:
        if isinstance(content, TextContent):
            if content.additional_properties.get("refusal"):
                refusals.append(content.text)
            else:
                texts.append({"type": "text", "text": content.text})
        elif isinstance(content, FunctionCallContent):
            calls.append(
                {
                    "id": content.call_id,
                    "type": "function",
                    "function": {
                        "name": content.name,
                        "arguments": json_arguments(content.arguments),
                    },
                }
            )
        elif isinstance(content, ReasoningContent) and content.text:
            reasoning.append(content.text)
        elif isinstance(content, UnknownContent) and content.type == UNKNOWN_PART:
            part = content.raw.get("part")
            if isinstance(part, Mapping):
                texts.append(dict(part))
    if texts:
        out["content"] = _text_or_parts(texts)
    elif not calls:
        out["content"] = ""  # the format needs content or tool calls
    if refusals:
        out["refusal"] = "".join(refusals)
    if calls:
        out["tool_calls"] = calls
    if reasoning and reasoning_field:
        out[reasoning_field] = "".join(reasoning)
    if message.author_name:
        out["name"] = message.author_name
    return out


def to_chat_messages(
    messages: Sequence[Message], *, reasoning_field: str | None = None
) -> list[dict[str, Any]]:
    """Core messages as Chat Completions request messages.

    ``reasoning_field`` (e.g. ``"reasoning_content"``) sends assistant reasoning text back
    under that field, for vendors that ask for it; by default reasoning is not sent.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        results = [c for c in message.contents if isinstance(c, FunctionResultContent)]
        others = [c for c in message.contents if not isinstance(c, FunctionResultContent)]
        if message.role == "assistant":
            out.append(_assistant(message, reasoning_field))
        elif message.role != "tool" and (others or not results):
            parts = [part for part in map(_part, others) if part is not None]
            entry: dict[str, Any] = {"role": message.role, "content": _text_or_parts(parts)}
            if message.role in ("system", "developer") and not parts:
                entry["content"] = ""
            if message.author_name:
                entry["name"] = message.author_name
            out.append(entry)
        # Each result is its own ``tool`` message; the format has no other place for them.
        out.extend(
            {"role": "tool", "tool_call_id": result.call_id, "content": result_text(result)}
            for result in results
        )
    return out


# -- Chat Completions -> core -------------------------------------------------------------


def _content_from_part(part: Mapping[str, Any]) -> Content:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return TextContent(part["text"])
    if kind == "image_url" and isinstance(part.get("image_url"), Mapping):
        image = part["image_url"]
        extra = {"detail": image["detail"]} if "detail" in image else {}
        url = str(image.get("url", ""))
        decoded = parse_data_uri(url)
        if decoded is not None:
            return DataContent(decoded[0], decoded[1], extra)
        return UriContent(url, "image/*", extra)
    if kind == "input_audio" and isinstance(part.get("input_audio"), Mapping):
        audio = part["input_audio"]
        audio_format = str(audio.get("format", ""))
        try:
            data = base64.b64decode(str(audio.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            data = None
        media = {"wav": "audio/wav", "mp3": "audio/mpeg"}.get(audio_format)
        if data is not None and media is not None:
            return DataContent(data, media)
    if kind == "file" and isinstance(part.get("file"), Mapping):
        file = part["file"]
        decoded = parse_data_uri(str(file.get("file_data", "")))
        if decoded is not None and set(file) <= {"file_data", "filename"}:
            extra = {"filename": file["filename"]} if "filename" in file else {}
            return DataContent(decoded[0], decoded[1], extra)
    return UnknownContent({"type": UNKNOWN_PART, "part": dict(part)})


def _contents(value: Any) -> list[Content]:
    if value is None:
        return []
    if isinstance(value, str):
        return [TextContent(value)]
    return [_content_from_part(part) for part in value if isinstance(part, Mapping)]


def from_chat_message(message: Any) -> Message:
    """One Chat Completions message (a dict, or the SDK's ``ChatCompletionMessage``) as a
    core message; reasoning text (``reasoning_content``/``reasoning``) comes first."""
    raw: Mapping[str, Any] = dump(message)
    role = str(raw.get("role") or "assistant")
    contents: list[Content] = []
    if role == "tool":
        text = raw.get("content")
        if isinstance(text, list):
            text = "".join(str(p.get("text", "")) for p in text if isinstance(p, Mapping))
        contents.append(FunctionResultContent(str(raw.get("tool_call_id", "")), text or ""))
        return Message("tool", contents)
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        contents.append(ReasoningContent(reasoning))
    contents.extend(_contents(raw.get("content")))
    if raw.get("refusal"):
        contents.append(TextContent(str(raw["refusal"]), {"refusal": True}))
    for call in raw.get("tool_calls") or ():
        function = call.get("function") or {}
        contents.append(
            FunctionCallContent(
                str(call.get("id", "")),
                str(function.get("name", "")),
                function.get("arguments"),
            )
        )
    name = raw.get("name")
    return Message(role, contents, author_name=name if isinstance(name, str) else None)


def from_chat_messages(messages: Iterable[Any]) -> list[Message]:
    """Chat Completions messages as core messages (consecutive ``tool`` messages become
    one core ``tool`` message, as the agent writes them)."""
    out: list[Message] = []
    for raw in messages:
        message = from_chat_message(raw)
        if message.role == "tool" and out and out[-1].role == "tool":
            out[-1].contents.extend(message.contents)
            continue
        out.append(message)
    return out
