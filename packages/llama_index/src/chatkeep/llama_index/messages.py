"""LlamaIndex ``ChatMessage`` objects as chatkeep messages, and back, without losing
anything LlamaIndex's own equality looks at.

=====================  =====================================================================
LlamaIndex             chatkeep
=====================  =====================================================================
``role``               the message's role (``"user"``, ``"assistant"``, ``"tool"``, ...)
``TextBlock``          :class:`TextContent`
image, audio or        :class:`DataContent` (the raw bytes and their media type) when the
document block         block holds its data inline; :class:`UriContent` for an image or
                       audio block that only links to a URL
``ToolCallBlock``      :class:`FunctionCallContent` (id, name, ``tool_kwargs`` as arguments)
``ThinkingBlock``      :class:`ReasoningContent`
any other block        an :class:`UnknownContent` of type ``llama_index_block`` holding the
                       block's fields
``additional_kwargs``  the message's ``additional_properties["llama_index"]["kwargs"]``,
                       through chatkeep's codec (bytes and datetimes round-trip exactly)
=====================  =====================================================================

What a content does not model (an image's ``detail``, a document's ``title``, ...) is kept
under the key :data:`BLOCK_KEY` of its ``additional_properties``; each mapping is checked
when it is made, and a block it would not rebuild exactly is kept whole instead. Pydantic
objects in ``additional_kwargs`` (the tool calls an OpenAI LLM puts there) are stored as
their fields and the name of their class, and come back as that class when it can be found
among the modules already imported (no module is imported because a record names it);
otherwise as the dict of their fields.
"""

from __future__ import annotations

import base64
import binascii
import sys
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ContentBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from pydantic import AnyUrl, BaseModel, TypeAdapter, ValidationError

from chatkeep.core import (
    Content,
    DataContent,
    FunctionCallContent,
    Message,
    ReasoningContent,
    TextContent,
    UnknownContent,
    UriContent,
)

__all__ = [
    "BLOCK_KEY",
    "UNKNOWN_TYPE",
    "chat_message_from_record",
    "chat_message_to_message",
    "message_to_chat_message",
]

#: The ``additional_properties`` key (of a message and of each content) holding what the
#: chatkeep form does not model.
BLOCK_KEY = "llama_index"
#: The ``type`` of an :class:`UnknownContent` holding a block verbatim.
UNKNOWN_TYPE = "llama_index_block"
# How a pydantic object in additional_kwargs is stored.
_MODEL_TAG = "llama_index.model"
# The data field of each block type that holds inline bytes, and its media-type field.
_INLINE = {
    "image": ("image", "image_mimetype"),
    "audio": ("audio", "format"),
    "document": ("data", "document_mimetype"),
}
_BLOCKS: TypeAdapter[Any] = TypeAdapter(ContentBlock)


# -- plain values ------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A block field as chatkeep's codec stores it (URLs and paths as strings)."""
    if isinstance(value, (AnyUrl, PurePath)):
        return str(value)
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _fields(block: BaseModel) -> dict[str, Any]:
    """The block's fields (``model_dump`` in Python mode: bytes stay bytes)."""
    return {key: _plain(value) for key, value in block.model_dump().items()}


def _kwarg(value: Any) -> Any:
    """An ``additional_kwargs`` value as chatkeep stores it."""
    if isinstance(value, BaseModel):
        kind = type(value)
        return {
            _MODEL_TAG: f"{kind.__module__}:{kind.__qualname__}",
            "fields": _kwarg(value.model_dump()),
        }
    if isinstance(value, Mapping):
        return {key: _kwarg(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_kwarg(item) for item in value]
    return _plain(value)


def _model_class(name: str) -> type[BaseModel] | None:
    """The pydantic class ``module:qualname`` names, if its module is already imported."""
    module_name, _, qualname = name.partition(":")
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        found = getattr(found, part, None) if found is not None else None
    if isinstance(found, type) and issubclass(found, BaseModel):
        return found
    return None


def _unkwarg(value: Any) -> Any:
    if isinstance(value, list):
        return [_unkwarg(item) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {_MODEL_TAG, "fields"} and isinstance(value[_MODEL_TAG], str):
        fields = _unkwarg(value["fields"])
        kind = _model_class(value[_MODEL_TAG])
        if kind is not None:
            try:
                return kind.model_validate(fields)
            except ValidationError:
                pass
        return fields
    return {key: _unkwarg(item) for key, item in value.items()}


# -- blocks <-> contents -----------------------------------------------------------------------


def _rest(fields: Mapping[str, Any], *taken: str) -> dict[str, Any]:
    """The fields besides ``taken`` (which stay as ``None`` placeholders, in order)."""
    return {key: (None if key in taken else value) for key, value in fields.items()}


ModeledContent = TextContent | FunctionCallContent | ReasoningContent | DataContent | UriContent


def _with_rest(content: ModeledContent, rest: dict[str, Any]) -> Content:
    content.additional_properties[BLOCK_KEY] = rest
    return content


def _mapped(block: BaseModel) -> Content | None:
    """The chatkeep content for ``block``, before the exactness check."""
    fields = _fields(block)
    kind = fields.get("block_type")
    if isinstance(block, TextBlock):
        return TextContent(block.text)
    if isinstance(block, ToolCallBlock):
        call = FunctionCallContent(block.tool_call_id or "", block.tool_name, block.tool_kwargs)
        return _with_rest(call, _rest(fields, "tool_call_id", "tool_name", "tool_kwargs"))
    if isinstance(block, ThinkingBlock):
        reasoning = ReasoningContent(block.content)
        return _with_rest(reasoning, _rest(fields, "content"))
    if kind in _INLINE:
        data_field, type_field = _INLINE[kind]
        data, media = fields.get(data_field), fields.get(type_field)
        if kind == "audio" and isinstance(media, str):
            media = f"audio/{media}"
        if isinstance(data, bytes):
            try:
                raw = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                return None
            data_content = DataContent(raw, media or "application/octet-stream")
            return _with_rest(data_content, _rest(fields, data_field))
        url = fields.get("url")
        if data is None and isinstance(url, str) and kind != "document":
            return _with_rest(UriContent(url, media), _rest(fields, "url"))
    return None


def _block_fields(content: Content) -> dict[str, Any] | None:
    """The fields of the block a content made by :func:`_mapped` came from."""
    if isinstance(content, TextContent) and BLOCK_KEY not in content.additional_properties:
        return {"block_type": "text", "text": content.text}
    if isinstance(content, UnknownContent):
        block = content.raw.get("block") if content.type == UNKNOWN_TYPE else None
        return dict(block) if isinstance(block, dict) else None
    rest = content.additional_properties.get(BLOCK_KEY)
    if not isinstance(rest, dict):
        return None
    fields = dict(rest)
    kind = fields.get("block_type")
    if isinstance(content, FunctionCallContent):
        fields.update(tool_call_id=content.call_id or None, tool_name=content.name)
        fields["tool_kwargs"] = content.arguments
    elif isinstance(content, ReasoningContent):
        fields["content"] = content.text
    elif isinstance(content, DataContent) and kind in _INLINE:
        fields[_INLINE[kind][0]] = base64.b64encode(content.data)
    elif isinstance(content, UriContent):
        fields["url"] = content.uri
    else:
        return None
    return fields


def _block(fields: Mapping[str, Any]) -> Any:
    return _BLOCKS.validate_python(dict(fields))


def _content(block: BaseModel) -> Content:
    """The chatkeep content for one block: mapped when the mapping rebuilds it exactly,
    else the block's fields verbatim."""
    if type(block) is TextBlock:  # the usual block: a TextBlock is its text
        return TextContent(block.text)
    content = _mapped(block)
    if content is not None:
        fields = _block_fields(content)
        try:
            if fields is not None and _block(fields) == block:
                return content
        except (ValidationError, ValueError, TypeError):
            pass
    return UnknownContent({"type": UNKNOWN_TYPE, "block": _fields(block)})


def chat_message_to_message(chat_message: ChatMessage, *, message_id: str | None = None) -> Message:
    """The chatkeep message for a LlamaIndex ``ChatMessage`` (``message_id`` is chatkeep's
    own id; LlamaIndex messages have none)."""
    if not isinstance(chat_message, ChatMessage):
        raise TypeError(f"expected a LlamaIndex ChatMessage, not {type(chat_message).__name__}")
    contents = [_content(block) for block in chat_message.blocks]
    properties: dict[str, Any] = {}
    if chat_message.additional_kwargs:
        properties[BLOCK_KEY] = {"kwargs": _kwarg(chat_message.additional_kwargs)}
    return Message(chat_message.role.value, contents, None, message_id, properties)


def _foreign_block(content: Content) -> Any:
    """A block for a content not made by :func:`chat_message_to_message` (a message other
    chatkeep code wrote), or ``None`` when LlamaIndex has no block for it."""
    if isinstance(content, TextContent):
        return TextBlock(text=content.text)
    if isinstance(content, FunctionCallContent):
        arguments = content.arguments if content.arguments is not None else {}
        return ToolCallBlock(
            tool_call_id=content.call_id or None, tool_name=content.name, tool_kwargs=arguments
        )
    if isinstance(content, ReasoningContent):
        return ThinkingBlock(content=content.text)
    if isinstance(content, DataContent):
        encoded = base64.b64encode(content.data)
        media = content.media_type
        if media.startswith("image/"):
            return _block({"block_type": "image", "image": encoded, "image_mimetype": media})
        if media.startswith("audio/"):
            return _block({"block_type": "audio", "audio": encoded, "format": media[6:]})
        return _block({"block_type": "document", "data": encoded, "document_mimetype": media})
    if isinstance(content, UriContent):
        return _block({"block_type": "image", "url": content.uri})
    return None


def chat_message_from_record(raw: Any) -> ChatMessage | None:
    """The ``ChatMessage`` a record's parsed JSON (the codec's untagged form) stands for,
    built in one validation, when it holds only text (the usual message); ``None``
    otherwise (then the record goes through the codec and :func:`message_to_chat_message`)."""
    if not isinstance(raw, dict):
        return None
    contents = raw.get("contents")
    if not isinstance(contents, list):
        return None
    blocks = []
    for content in contents:
        if not isinstance(content, dict) or content.get("type") != "text" or len(content) != 2:
            return None
        text = content.get("text")
        if not isinstance(text, str):
            return None
        blocks.append({"block_type": "text", "text": text})
    kwargs: Any = {}
    properties = raw.get("additional_properties")
    if isinstance(properties, dict):
        kept = properties.get(BLOCK_KEY)
        if kept is not None:
            if not isinstance(kept, dict) or set(kept) != {"kwargs"}:
                return None
            kwargs = _unkwarg(kept["kwargs"])
    try:
        return ChatMessage.model_validate(
            {"role": raw.get("role"), "blocks": blocks, "additional_kwargs": kwargs}
        )
    except ValidationError:
        return None


def message_to_chat_message(message: Message) -> ChatMessage:
    """The LlamaIndex ``ChatMessage`` a chatkeep message stands for: exactly the one it
    was made from, or, for a message other chatkeep code wrote, the blocks that say the
    same (text, data, links, tool calls, reasoning; a tool result becomes its text)."""
    blocks: list[Any] = []
    for content in message.contents:
        fields = _block_fields(content)
        block = None
        if fields is not None:
            try:
                block = _block(fields)
            except (ValidationError, ValueError, TypeError):
                block = None
        if block is None:
            block = _foreign_block(content)
        if block is None and hasattr(content, "result"):
            block = TextBlock(text=str(getattr(content, "result", "")))
        if block is not None:
            blocks.append(block)
    kept = message.additional_properties.get(BLOCK_KEY)
    kwargs = kept.get("kwargs") if isinstance(kept, dict) else None
    role = message.role
    try:
        return ChatMessage(
            role=role, blocks=blocks, additional_kwargs=_unkwarg(kwargs) if kwargs else {}
        )
    except ValidationError:  # a role LlamaIndex does not know (written by other code)
        return ChatMessage(
            role="assistant", blocks=blocks, additional_kwargs=_unkwarg(kwargs) if kwargs else {}
        )
