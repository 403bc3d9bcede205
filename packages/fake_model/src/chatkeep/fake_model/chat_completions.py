"""``POST /v1/chat/completions``: client-managed history, the OpenAI wire format."""

from __future__ import annotations

import json
from typing import Any

from .model import Call, Result, Turn, canonical_turns, reply
from .state import ApiError, JsonReply, ServerState, StreamReply, approximate_tokens, word_pieces

__all__ = ["create_chat_completion", "message_turns"]


def _text_of(content: Any, where: str) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        texts: list[str] = []
        for index, part in enumerate(content):
            if not isinstance(part, dict) or "type" not in part:
                raise ApiError(
                    400, f"Invalid value for '{where}[{index}]': expected a content part."
                )
            if part["type"] == "text":
                texts.append(str(part.get("text", "")))
        return texts
    raise ApiError(400, f"Invalid type for '{where}': expected a string or an array of parts.")


def message_turns(messages: Any) -> list[Turn]:
    """The effective history of a ``messages`` array, validated like the real API."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty array.", param="messages")
    turns: list[Turn] = []
    pending: list[str] = []  # tool call ids still waiting for their tool message
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise ApiError(400, f"Invalid type for '{where}': expected an object.", param=where)
        role = message.get("role")
        if pending and role != "tool":
            raise ApiError(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}",
                param="messages",
            )
        content = message.get("content")
        if role in ("system", "developer"):
            turns.append(Turn("system", _text_of(content, f"{where}.content")))
        elif role == "user":
            turns.append(Turn("user", _text_of(content, f"{where}.content")))
        elif role == "assistant":
            calls: list[Call] = []
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict) or not call.get("id") or "name" not in function:
                    raise ApiError(400, f"Invalid tool call in '{where}.tool_calls'.", param=where)
                calls.append(Call(call["id"], function["name"], function.get("arguments", "")))
            pending = [c.call_id for c in calls]
            turns.append(Turn("assistant", _text_of(content, f"{where}.content"), calls))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise ApiError(
                    400,
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    param=f"{where}.role",
                )
            pending.remove(call_id)
            output = "".join(_text_of(content, f"{where}.content"))
            turns.append(Turn("tool", results=[Result(call_id, output)], joins=True))
        else:
            raise ApiError(
                400,
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', "
                "'user', 'tool', 'function', and 'developer'.",
                param=f"{where}.role",
            )
    return canonical_turns(turns)


def tool_names(tools: Any) -> list[str]:
    """The function names of a Chat Completions ``tools`` array."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ApiError(400, "'tools' must be an array.", param="tools")
    names: list[str] = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ApiError(400, f"Missing required parameter: 'tools[{index}].function.name'.")
        names.append(function["name"])
    return names


def create_chat_completion(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply | StreamReply:
    """Answer one Chat Completions request."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "you must provide a model parameter", param="model")
    turns = message_turns(body.get("messages"))
    answer = reply(
        turns,
        tool_names=tool_names(body.get("tools")),
        new_call_id=lambda: ServerState.new_id("call"),
    )
    completion_id = ServerState.new_id("chatcmpl")
    created = ServerState.now()
    prompt_tokens = approximate_tokens(*(t.text for t in turns))
    completion_tokens = approximate_tokens(answer.text or "", *(c.arguments for c in answer.calls))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    finish_reason = "tool_calls" if answer.calls else "stop"
    tool_calls = [
        {
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in answer.calls
    ]
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        return JsonReply(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": finish_reason,
                        "logprobs": None,
                    }
                ],
                "usage": usage,
            }
        )

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str | None, str]:
        data = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        return None, json.dumps(data)

    events = [chunk({"role": "assistant", "content": ""})]
    if answer.text is not None:
        events.extend(chunk({"content": piece}) for piece in word_pieces(answer.text))
    for index, call in enumerate(answer.calls):
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.call_id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        half = len(call.arguments) // 2  # arguments arrive in pieces, as from a real model
        for piece in (call.arguments[:half], call.arguments[half:]):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    events.append(chunk({}, finish_reason))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        usage_chunk = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }
        events.append((None, json.dumps(usage_chunk)))
    events.append((None, "[DONE]"))
    return StreamReply(events)
