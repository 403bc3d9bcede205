"""What the Chat Completions and Responses conversions share: data URIs, tool results as
text, tools as function schemas (this package's errors are in :mod:`.errors`)."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from chatkeep.core import FunctionResultContent, HistoryConflict, Tool

__all__ = [
    "data_uri",
    "dump",
    "json_arguments",
    "parse_data_uri",
    "refuse_service_conversation",
    "result_text",
    "to_tools",
]


def refuse_service_conversation(client: object, conversation_id: str | None) -> None:
    """Raise :class:`~chatkeep.core.HistoryConflict` when a client-managed client is asked
    to continue a service-managed conversation.

    The agent sends only the new input when the session holds a conversation id, so a
    client that keeps no server-side state would answer without the history: silently
    losing it is the one thing that must not happen. The message says how to migrate.
    """
    if conversation_id is None:
        return
    name = type(client).__name__
    raise HistoryConflict(
        f"this session's history is kept by the model service (conversation "
        f"{conversation_id!r}), but {name} keeps history on the client and cannot read "
        "it; answering now would silently drop the history. Migrate the session first "
        "(chatkeep.openai.migrate_to_client_managed(session, source=<the service-managed "
        "client>, history_provider=...)) or start a new session."
    )


def data_uri(data: bytes, media_type: str) -> str:
    """``data:<media_type>;base64,<data>``."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def parse_data_uri(uri: str) -> tuple[bytes, str] | None:
    """``(data, media_type)`` of a base64 data URI, or ``None`` for anything else."""
    if not uri.startswith("data:"):
        return None
    header, sep, payload = uri.partition(",")
    if not sep or not header.endswith(";base64"):
        return None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data, header[len("data:") : -len(";base64")] or "application/octet-stream"


def _json_default(value: object) -> Any:
    # Tool results may carry what the core's codec keeps (bytes, datetimes); a model only
    # reads text, so they are shown in their usual text forms.
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def result_text(content: FunctionResultContent) -> str:
    """A tool result as the text the APIs take: a ``str`` result verbatim, anything else
    as JSON; a failed call as ``"Error: <exception>"``."""
    if content.exception is not None:
        return f"Error: {content.exception}"
    if isinstance(content.result, str):
        return content.result
    if content.result is None:
        return ""
    return json.dumps(content.result, ensure_ascii=False, default=_json_default)


def to_tools(tools: Iterable[Tool | Callable[..., Any]] | None) -> list[Tool]:
    """``tools`` as core :class:`Tool` objects (plain functions are converted)."""
    return [Tool.from_function(item) for item in tools or ()]


def json_arguments(arguments: str | Mapping[str, Any] | None) -> str:
    """Function-call arguments as the JSON text the APIs take."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments
    return json.dumps(dict(arguments), ensure_ascii=False, default=_json_default)


def dump(value: Any) -> Any:
    """A pydantic model of the SDK (or anything else) as plain JSON data."""
    dumper = getattr(value, "model_dump", None)
    if callable(dumper):
        return dumper(mode="json", exclude_none=True)
    return value
