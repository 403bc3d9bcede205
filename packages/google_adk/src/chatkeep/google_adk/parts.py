"""An event's content parts as chatkeep message contents, and back, exactly.

Each part of ``Event.content`` (in its JSON form, ``model_dump(mode="json",
exclude_none=True)``) is stored once, as a chatkeep content dict that any chatkeep reader
understands when the part has that exact shape, else verbatim:

================================================  =============================================
part                                              chatkeep content
================================================  =============================================
``{"text": t}``                                   ``{"type": "text", "text": t}``
``{"text": t, "thought": true[, "thought_         ``{"type": "text_reasoning", "text": t[,
signature": s]}``                                 "protected_data": s]}``
``{"function_call": {"id", "name"[, "args"]}}``   ``{"type": "function_call", "call_id",
                                                  "name"[, "arguments"]}``
``{"function_response": {"id", "name"[,           ``{"type": "function_result", "call_id",
"response"]}}``                                   "name"[, "result"]}``
``{"file_data": {"file_uri"[, "mime_type"]}}``    ``{"type": "uri", "uri"[, "media_type"]}``
anything else (inline data, code, a part with     ``{"type": "google_adk.part", "part": <the
more fields, ...)                                 part as it was>}`` (an unknown content to
                                                  chatkeep, kept verbatim)
================================================  =============================================

:func:`part_of_content` undoes :func:`content_of_part` for every part (the tests check it
on every shape above and on generated parts), so the event read back equals the one
appended; the message's role and text come from the same contents, so ``chatkeep sessions
show``, export and search read ADK conversations without a copy of them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PART_TYPE", "content_of_part", "part_of_content"]

#: The ``type`` of a chatkeep content holding a part verbatim.
PART_TYPE = "google_adk.part"

_REASONING_KEYS = frozenset({"text", "thought", "thought_signature"})
_CALL_KEYS = frozenset({"id", "name", "args"})
_RESPONSE_KEYS = frozenset({"id", "name", "response"})
_FILE_KEYS = frozenset({"file_uri", "mime_type"})


def _named(value: Any) -> bool:
    """A call or response whose ``id`` and ``name`` are strings (what the contents need)."""
    return type(value.get("id")) is str and type(value.get("name")) is str


def content_of_part(part: dict[str, Any]) -> dict[str, Any]:
    """The chatkeep content dict that stores ``part`` (a part's JSON form)."""
    if len(part) == 1:
        if "text" in part and type(part["text"]) is str:
            return {"type": "text", "text": part["text"]}
        call = part.get("function_call")
        if type(call) is dict and call.keys() <= _CALL_KEYS and _named(call):
            out = {"type": "function_call", "call_id": call["id"], "name": call["name"]}
            if "args" in call:
                out["arguments"] = call["args"]
            return out
        response = part.get("function_response")
        if type(response) is dict and response.keys() <= _RESPONSE_KEYS and _named(response):
            out = {"type": "function_result", "call_id": response["id"]}
            if "response" in response:
                out["result"] = response["response"]
            out["name"] = response["name"]
            return out
        file = part.get("file_data")
        if type(file) is dict and file.keys() <= _FILE_KEYS and type(file.get("file_uri")) is str:
            out = {"type": "uri", "uri": file["file_uri"]}
            if type(file.get("mime_type")) is str:
                out["media_type"] = file["mime_type"]
                return out
            if "mime_type" not in file:
                return out
    elif (
        part.get("thought") is True
        and type(part.get("text")) is str
        and part.keys() <= _REASONING_KEYS
        and type(part.get("thought_signature", "")) is str
    ):
        out = {"type": "text_reasoning", "text": part["text"]}
        if "thought_signature" in part:
            out["protected_data"] = part["thought_signature"]
        return out
    return {"type": PART_TYPE, "part": part}


def part_of_content(content: dict[str, Any]) -> dict[str, Any]:
    """The part :func:`content_of_part` stored as ``content``. Raises ``ValueError`` for a
    content it never writes."""
    kind = content.get("type")
    if kind == "text":
        return {"text": content["text"]}
    if kind == PART_TYPE:
        part = content["part"]
        if type(part) is not dict:
            raise ValueError("a stored part must be an object")
        return part
    if kind == "function_call":
        call = {"id": content["call_id"], "name": content["name"]}
        if "arguments" in content:
            call["args"] = content["arguments"]
        return {"function_call": call}
    if kind == "function_result":
        response = {"id": content["call_id"], "name": content["name"]}
        if "result" in content:
            response["response"] = content["result"]
        return {"function_response": response}
    if kind == "text_reasoning":
        part = {"text": content["text"], "thought": True}
        if "protected_data" in content:
            part["thought_signature"] = content["protected_data"]
        return part
    if kind == "uri":
        file = {"file_uri": content["uri"]}
        if "media_type" in content:
            file["mime_type"] = content["media_type"]
        return {"file_data": file}
    raise ValueError(f"not a content this adapter writes: type {kind!r}")
