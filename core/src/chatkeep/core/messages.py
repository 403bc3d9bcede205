"""The data model: messages and their typed contents (DESIGN section 2).

Field names and ``type`` strings follow Microsoft Agent Framework's Python ``Message`` and
``Content`` so stored history reads the same in both. Nothing is lost on the way through:

- a content type this version does not know is kept as :class:`UnknownContent`, verbatim,
  so a newer writer never loses data in an older reader;
- a known content (and a message) keeps every stored field it does not model in ``extra``
  (MAF's text ``annotations``, ``function_call.hosted``, ``function_result.items`` /
  ``status`` / ``id``, ``data.name``, ...), and the codec writes them back unchanged.
  ``extra`` never holds a field the type models (the codec refuses it), with one exception
  explained on :class:`DataContent`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

__all__ = [
    "ATTRIBUTION_KEY",
    "Content",
    "DataContent",
    "FunctionCallContent",
    "FunctionResultContent",
    "Message",
    "MessageSource",
    "ReasoningContent",
    "Role",
    "TextContent",
    "UnknownContent",
    "UriContent",
]

#: The ``additional_properties`` key under which a message's source is recorded (as in MAF).
ATTRIBUTION_KEY = "_attribution"


class Role(str, Enum):
    """Well-known roles. Any string is accepted as a role; these are the usual ones."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"

    def __str__(self) -> str:
        return self.value


class MessageSource(str, Enum):
    """Where a message handed to the model came from."""

    EXTERNAL = "external"  #: the caller's input or the model's response (the default)
    CHAT_HISTORY = "chat_history"  #: loaded from a history provider
    CONTEXT_PROVIDER = "context_provider"  #: injected by a context provider

    def __str__(self) -> str:
        return self.value


@dataclass(slots=True)
class TextContent:
    """Plain text."""

    text: str
    additional_properties: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    type: str = field(default="text", init=False, repr=False)


@dataclass(slots=True)
class FunctionCallContent:
    """A model's request to call a tool. ``arguments`` is a JSON string or a mapping."""

    call_id: str
    name: str
    arguments: str | dict[str, Any] | None = None
    additional_properties: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    type: str = field(default="function_call", init=False, repr=False)


@dataclass(slots=True)
class FunctionResultContent:
    """A tool's result for ``call_id``; ``result`` is any JSON value (bytes and datetimes
    included); ``exception`` is the error text when the tool failed."""

    call_id: str
    result: Any = None
    exception: str | None = None
    additional_properties: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    type: str = field(default="function_result", init=False, repr=False)


@dataclass(slots=True)
class DataContent:
    """Binary data (an image, audio, a file) with its media type; stored as a data URI.

    chatkeep writes ``data:<media_type>;base64,<data>``. A data URI stored in another form
    (RFC 2397 parameters such as ``;charset=utf-8`` that MAF leaves out of ``media_type``, a
    payload that is not base64) is kept in ``extra["uri"]`` and written back as it was, as
    long as it still holds ``data`` (after ``data`` is changed, the canonical URI is written).
    """

    data: bytes
    media_type: str = "application/octet-stream"
    additional_properties: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    type: str = field(default="data", init=False, repr=False)


@dataclass(slots=True)
class UriContent:
    """A reference to content elsewhere (``https://...``, a file id URI, ...)."""

    uri: str
    media_type: str | None = None
    additional_properties: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    type: str = field(default="uri", init=False, repr=False)


@dataclass(slots=True)
class ReasoningContent:
    """The model's reasoning text; ``protected_data`` is an opaque (often encrypted) blob a
    service needs back verbatim."""

    text: str | None = None
    protected_data: str | None = None
    additional_properties: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    type: str = field(default="text_reasoning", init=False, repr=False)


@dataclass(slots=True)
class UnknownContent:
    """A content type this version does not model, kept exactly as it was stored.

    ``raw`` is the content's whole dict (``type`` included); its values may be any JSON value
    (NaN and infinities too) and, like ``additional_properties``, bytes and datetimes.
    """

    raw: dict[str, Any]

    @property
    def type(self) -> str:
        """The stored ``type`` string."""
        return str(self.raw.get("type", ""))


Content = (
    TextContent
    | FunctionCallContent
    | FunctionResultContent
    | DataContent
    | UriContent
    | ReasoningContent
    | UnknownContent
)


@dataclass(slots=True)
class Message:
    """One chat message: a role and a list of contents.

    ``contents`` is a list of contents (a plain string is also accepted at run time and
    becomes one text content; ``Message.user("...")`` says the same with types)::

        Message("user", [TextContent("What is the weather?")])
        Message("assistant", [FunctionCallContent("c1", "weather", {"city": "Oslo"})])
    """

    role: str
    contents: list[Content] = field(default_factory=list)
    author_name: str | None = None
    message_id: str | None = None
    additional_properties: dict[str, Any] = field(default_factory=dict)
    #: Stored top-level fields this version does not model, kept verbatim and written back.
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.role) is not str or not self.role:  # the usual case skips the checks
            if isinstance(self.role, Role):
                self.role = self.role.value
            if not isinstance(self.role, str) or not self.role:
                raise TypeError(f"a message role must be a non-empty str, not {self.role!r}")
        contents: Any = self.contents
        if type(contents) is list:
            return
        if isinstance(contents, str):
            self.contents = [TextContent(contents)]
        elif not isinstance(contents, list):
            if isinstance(contents, Sequence):
                self.contents = list(contents)
            else:
                raise TypeError("contents must be a str or a list of contents")

    @property
    def text(self) -> str:
        """The concatenated text of the message's text contents."""
        return "".join(c.text for c in self.contents if isinstance(c, TextContent))

    @property
    def source(self) -> MessageSource:
        """Where this message came from (``EXTERNAL`` unless a provider tagged it)."""
        attribution = self.additional_properties.get(ATTRIBUTION_KEY)
        if isinstance(attribution, Mapping):
            try:
                return MessageSource(attribution.get("source_type"))
            except ValueError:
                return MessageSource.EXTERNAL
        return MessageSource.EXTERNAL

    @property
    def source_id(self) -> str | None:
        """The id of the provider that tagged this message, if any."""
        attribution = self.additional_properties.get(ATTRIBUTION_KEY)
        if isinstance(attribution, Mapping):
            value = attribution.get("source_id")
            return value if isinstance(value, str) else None
        return None

    def tagged(self, source: MessageSource, source_id: str) -> Message:
        """A copy of this message tagged with ``source``; the original is not modified."""
        properties = dict(self.additional_properties)
        properties[ATTRIBUTION_KEY] = {"source_id": source_id, "source_type": source.value}
        return self._copy(properties)

    def _copy(self, properties: dict[str, Any]) -> Message:
        """A copy with its own contents list and ``properties`` (``dataclasses.replace``,
        without its cost for the class itself: a history load tags every message)."""
        if type(self) is not Message:  # a subclass may add fields: let replace copy them
            return replace(self, contents=list(self.contents), additional_properties=properties)
        return Message(
            self.role,
            list(self.contents),
            self.author_name,
            self.message_id,
            properties,
            self.extra,
        )

    def untagged(self) -> Message:
        """A copy without a source tag (or this message if it has none)."""
        if ATTRIBUTION_KEY not in self.additional_properties:
            return self
        properties = dict(self.additional_properties)
        del properties[ATTRIBUTION_KEY]
        return self._copy(properties)

    @classmethod
    def system(cls, text: str, **fields: Any) -> Message:
        """A system message with one text content."""
        return cls("system", [TextContent(text)], **fields)

    @classmethod
    def user(cls, text: str, **fields: Any) -> Message:
        """A user message with one text content."""
        return cls("user", [TextContent(text)], **fields)

    @classmethod
    def assistant(cls, text: str, **fields: Any) -> Message:
        """An assistant message with one text content."""
        return cls("assistant", [TextContent(text)], **fields)
