"""``POST /v1/messages``: the Anthropic Messages API (client-managed history).

Checked like the real API: ``max_tokens`` is required, ``system`` is a top-level field
(a ``system`` role in ``messages`` is refused), every ``tool_result`` answers a
``tool_use`` of the message just before it and every ``tool_use`` is answered in the next
message, and a thinking block sent back must carry the signature the server gave it.
"""

from __future__ import annotations

import json
from typing import Any

from .model import Call, ModelReply, Result, Turn, canonical_turns, reply, sign_thinking
from .state import ApiError, JsonReply, ServerState, StreamReply, approximate_tokens, word_pieces

__all__ = ["count_tokens", "create_message", "message_turns"]


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: Input should be a valid list")
    for index, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise ApiError(400, f"{where}.{index}: Input should be a valid content block")
    return content


def _system_texts(system: Any) -> list[str]:
    if system is None:
        return []
    if isinstance(system, str):
        return [system]
    if isinstance(system, list):
        return [
            str(b.get("text", ""))
            for b in system
            if isinstance(b, dict) and b.get("type") == "text"
        ]
    raise ApiError(400, "system: Input should be a valid string or list of text blocks")


def _result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return json.dumps(content)


def message_turns(state: ServerState, body: dict[str, Any]) -> list[Turn]:
    """The effective history of a Messages request, validated like the real API."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(
            400,
            "messages: Field required"
            if messages is None
            else "messages: at least one message is required",
        )
    # The API merges consecutive messages of one role before anything else.
    merged: list[tuple[str, list[tuple[int, dict[str, Any]]]]] = []
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, dict):
            raise ApiError(400, f"{where}: Input should be a valid dictionary")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ApiError(
                400,
                f'{where}.role: Input should be "user" or "assistant"'
                + (
                    '. The Messages API accepts a top-level `system` parameter, not "system" '
                    "as an input message role."
                    if role == "system"
                    else ""
                ),
            )
        blocks = [(index, b) for b in _blocks(message.get("content"), f"{where}.content")]
        if merged and merged[-1][0] == role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((role, blocks))
    turns: list[Turn] = [Turn("system", _system_texts(body.get("system")))]
    previous_uses: list[str] = []
    for index, (role, blocks) in enumerate(merged):
        where = f"messages.{index}"
        uses: list[str] = []
        answered: set[str] = set()
        last_source = -1
        for source, block in blocks:
            kind = block["type"]
            # Blocks of one message join into turns; each message sent starts a new turn.
            joins, last_source = source == last_source, source
            if kind == "text":
                turns.append(Turn(role, [str(block.get("text", ""))], joins=joins))
            elif kind == "tool_use" and role == "assistant":
                if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                    raise ApiError(400, f"{where}.content: tool_use blocks need an id and a name")
                uses.append(block["id"])
                arguments = json.dumps(block.get("input", {}), separators=(",", ":"))
                call = Call(block["id"], block["name"], arguments)
                turns.append(Turn("assistant", calls=[call], joins=joins))
            elif kind == "tool_result" and role == "user":
                use_id = block.get("tool_use_id")
                if use_id not in previous_uses:
                    raise ApiError(
                        400,
                        f"{where}.content: unexpected `tool_use_id` found in `tool_result` "
                        f"blocks: {use_id}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message.",
                    )
                answered.add(use_id)
                result = Result(use_id, _result_text(block.get("content")))
                turns.append(Turn("tool", results=[result], joins=joins))
            elif kind == "thinking" and role == "assistant":
                thinking = str(block.get("thinking", ""))
                if block.get("signature") != sign_thinking(state.secret, thinking):
                    raise ApiError(400, f"{where}.content: Invalid `signature` in `thinking` block")
            elif kind in ("tool_use", "tool_result", "thinking"):
                raise ApiError(
                    400, f"{where}.content: `{kind}` blocks are not allowed in {role} messages"
                )
            # images, documents, redacted thinking ...: accepted, not shown to the model
        missing = [use for use in previous_uses if use not in answered]
        if missing:
            raise ApiError(
                400,
                f"messages.{index - 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message.",
            )
        previous_uses = uses
    return canonical_turns(turns)


def _check(body: Any) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "model: Field required")
    return model


def count_tokens(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``POST /v1/messages/count_tokens``."""
    _check(body)
    turns = message_turns(state, body)
    return JsonReply({"input_tokens": approximate_tokens(*(t.text for t in turns))})


def _content(state: ServerState, answer: ModelReply) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if answer.thinking is not None:
        content.append(
            {
                "type": "thinking",
                "thinking": answer.thinking,
                "signature": sign_thinking(state.secret, answer.thinking),
            }
        )
    if answer.text is not None:
        content.append({"type": "text", "text": answer.text})
    for call in answer.calls:
        content.append(
            {
                "type": "tool_use",
                "id": call.call_id,
                "name": call.name,
                "input": json.loads(call.arguments),
            }
        )
    return content


def create_message(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply | StreamReply:
    """``POST /v1/messages``."""
    model = _check(body)
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise ApiError(400, "max_tokens: Field required")
    if type(max_tokens) is not int or max_tokens < 1:
        raise ApiError(400, "max_tokens: Input should be a positive integer")
    turns = message_turns(state, body)
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise ApiError(400, "tools: Input should be a valid list")
    names = [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
    thinking = body.get("thinking")
    answer = reply(
        turns,
        tool_names=names,
        new_call_id=lambda: state.new_id("toolu"),
        thinking=isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"),
    )
    content = _content(state, answer)
    input_tokens = approximate_tokens(*(t.text for t in turns))
    output_tokens = approximate_tokens(answer.text or "", *(c.arguments for c in answer.calls))
    message = {
        "id": state.new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if answer.calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    if not body.get("stream"):
        return JsonReply(message)
    return StreamReply(_stream_events(message))


def _stream_events(message: dict[str, Any]) -> list[tuple[str | None, str]]:
    events: list[tuple[str | None, str]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, json.dumps({"type": kind, **fields})))

    start = dict(message, content=[], stop_reason=None)
    start["usage"] = dict(message["usage"], output_tokens=1)
    emit("message_start", message=start)
    emit("ping")
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            emit("content_block_start", index=index, content_block={"type": "text", "text": ""})
            for piece in word_pieces(block["text"]):
                emit(
                    "content_block_delta", index=index, delta={"type": "text_delta", "text": piece}
                )
        elif kind == "tool_use":
            emit(
                "content_block_start",
                index=index,
                content_block={
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": {},
                },
            )
            arguments = json.dumps(block["input"])
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                emit(
                    "content_block_delta",
                    index=index,
                    delta={"type": "input_json_delta", "partial_json": piece},
                )
        elif kind == "thinking":
            emit(
                "content_block_start",
                index=index,
                content_block={"type": "thinking", "thinking": "", "signature": ""},
            )
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "thinking_delta", "thinking": block["thinking"]},
            )
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "signature_delta", "signature": block["signature"]},
            )
        emit("content_block_stop", index=index)
    emit(
        "message_delta",
        delta={"stop_reason": message["stop_reason"], "stop_sequence": None},
        usage={"output_tokens": message["usage"]["output_tokens"]},
    )
    emit("message_stop")
    return events
