"""The Responses API (``/v1/responses``) and the Conversations API (``/v1/conversations``).

Service-managed history lives here: a stored response keeps the whole history it ended
(so continuing from *any* stored response id forks from that point), and a conversation
keeps a linear list of items that each response made with ``conversation=`` extends.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from .model import Call, ModelReply, Result, Turn, canonical_turns, reply, sign_thinking
from .state import (
    ApiError,
    Conversation,
    JsonReply,
    ServerState,
    StoredResponse,
    StreamReply,
    approximate_tokens,
    word_pieces,
)

__all__ = [
    "create_conversation",
    "create_items",
    "create_response",
    "delete_conversation",
    "delete_item",
    "delete_response",
    "list_input_items",
    "list_items",
    "retrieve_conversation",
    "retrieve_item",
    "retrieve_response",
    "update_conversation",
]

_MESSAGE_ROLES = ("user", "assistant", "system", "developer")


# -- items --------------------------------------------------------------------------


def _normalize_item(state: ServerState, value: Any, where: str) -> dict[str, Any]:
    """An input item as the service stores it: an id, a type, list-shaped content."""
    if not isinstance(value, dict):
        raise ApiError(400, f"Invalid type for '{where}': expected an object.", param=where)
    item: dict[str, Any] = copy.deepcopy(value)
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        role = item.get("role")
        if role not in _MESSAGE_ROLES:
            raise ApiError(
                400,
                f"Invalid value: '{role}'. Supported values are: 'user', 'assistant', "
                "'system', and 'developer'.",
                param=f"{where}.role",
            )
        content = item.get("content")
        part_type = "output_text" if role == "assistant" else "input_text"
        if isinstance(content, str):
            item["content"] = [{"type": part_type, "text": content}]
        elif not isinstance(content, list):
            raise ApiError(400, f"Missing required parameter: '{where}.content'.", param=where)
        item["type"] = "message"
        item.setdefault("id", state.new_id("msg"))
        item.setdefault("status", "completed")
        return item
    if kind == "function_call":
        for name in ("call_id", "name", "arguments"):
            if not isinstance(item.get(name), str):
                raise ApiError(400, f"Missing required parameter: '{where}.{name}'.", param=where)
        item.setdefault("id", state.new_id("fc"))
        item.setdefault("status", "completed")
        return item
    if kind == "function_call_output":
        if not isinstance(item.get("call_id"), str) or "output" not in item:
            raise ApiError(400, f"Missing required parameter: '{where}.output'.", param=where)
        item.setdefault("id", state.new_id("fco"))
        item.setdefault("status", "completed")
        return item
    if kind == "reasoning":
        encrypted = item.get("encrypted_content")
        if encrypted is not None and not _valid_encrypted(state, encrypted):
            raise ApiError(
                400,
                "The encrypted content for item could not be verified.",
                param=where,
                code="invalid_encrypted_content",
            )
        item.setdefault("summary", [])
        return item
    if kind == "item_reference":
        found = _find_item(state, item.get("id"))
        if found is None:
            raise ApiError(400, f"Item with id '{item.get('id')}' not found.", param=where)
        return dict(copy.deepcopy(found))
    if not isinstance(kind, str):
        raise ApiError(400, f"Missing required parameter: '{where}.type'.", param=where)
    item.setdefault("id", state.new_id("item"))
    return item  # other item types are kept verbatim; the model ignores them


def _find_item(state: ServerState, item_id: Any) -> dict[str, Any] | None:
    for stored in state.responses.values():
        for item in stored.history:
            if item.get("id") == item_id:
                return item
    for conversation in state.conversations.values():
        for item in conversation.items:
            if item.get("id") == item_id:
                return item
    return None


def _normalize_input(state: ServerState, value: Any, param: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if isinstance(value, str):
        return [_normalize_item(state, {"role": "user", "content": value}, param)]
    if not isinstance(value, list):
        raise ApiError(
            400, f"Invalid type for '{param}': expected a string or an array.", param=param
        )
    return [_normalize_item(state, item, f"{param}[{i}]") for i, item in enumerate(value)]


def _part_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text"):
            texts.append(str(part.get("text", "")))
    return texts


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "".join(_part_texts(output)) if isinstance(output, list) else json.dumps(output)


def items_to_turns(items: list[dict[str, Any]], instructions: Any = None) -> list[Turn]:
    """The effective history of a list of items, validated like the real API: every
    function call output answers an earlier call, and no user message comes while a call
    is unanswered."""
    turns: list[Turn] = []
    if isinstance(instructions, str) and instructions:
        turns.append(Turn("system", [instructions]))
    known: set[str] = set()
    pending: list[str] = []
    for item in items:
        kind = item.get("type")
        if kind == "message":
            role = item["role"]
            if role == "user" and pending:
                raise ApiError(
                    400, f"No tool output found for function call {pending[0]}.", param="input"
                )
            role = "system" if role in ("system", "developer") else role
            # An assistant's text and its calls are separate items of one turn.
            turns.append(Turn(role, _part_texts(item.get("content")), joins=role == "assistant"))
        elif kind == "function_call":
            known.add(item["call_id"])
            pending.append(item["call_id"])
            call = Call(item["call_id"], item["name"], item["arguments"])
            turns.append(Turn("assistant", calls=[call], joins=True))
        elif kind == "function_call_output":
            call_id = item["call_id"]
            if call_id not in known:
                raise ApiError(
                    400,
                    f"No tool call found for function call output with call_id {call_id}.",
                    param="input",
                )
            if call_id in pending:
                pending.remove(call_id)
            result = Result(call_id, _output_text(item.get("output")))
            turns.append(Turn("tool", results=[result], joins=True))
    return canonical_turns(turns)


def _tool_names(tools: Any) -> list[str]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ApiError(400, "'tools' must be an array.", param="tools")
    names: list[str] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or "type" not in tool:
            raise ApiError(400, f"Missing required parameter: 'tools[{index}].type'.")
        if tool["type"] == "function":
            if not isinstance(tool.get("name"), str):
                raise ApiError(400, f"Missing required parameter: 'tools[{index}].name'.")
            names.append(tool["name"])
    return names


def _encrypt(state: ServerState, thought: str) -> str:
    return json.dumps({"thought": thought, "sig": sign_thinking(state.secret, thought)})


def _valid_encrypted(state: ServerState, blob: Any) -> bool:
    try:
        data = json.loads(blob)
        return bool(data["sig"] == sign_thinking(state.secret, data["thought"]))
    except (TypeError, ValueError, KeyError):
        return False


# -- responses ----------------------------------------------------------------------


def _output_items(
    state: ServerState, answer: ModelReply, body: dict[str, Any]
) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if answer.thinking is not None:
        include = body.get("include") or []
        output.append(
            {
                "id": state.new_id("rs"),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": answer.thinking}],
                "encrypted_content": (
                    _encrypt(state, answer.thinking)
                    if "reasoning.encrypted_content" in include
                    else None
                ),
            }
        )
    if answer.text is not None:
        output.append(
            {
                "id": state.new_id("msg"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": answer.text, "annotations": [], "logprobs": []}
                ],
            }
        )
    for call in answer.calls:
        output.append(
            {
                "id": state.new_id("fc"),
                "type": "function_call",
                "status": "completed",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            }
        )
    return output


def _conversation_id(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return str(value["id"])
    raise ApiError(400, "Invalid type for 'conversation'.", param="conversation")


def create_response(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply | StreamReply:
    """``POST /v1/responses``."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "Missing required parameter: 'model'.", param="model")
    store = body.get("store", True) is not False
    previous_id = body.get("previous_response_id")
    conversation_id = _conversation_id(body.get("conversation"))
    if previous_id is not None and conversation_id is not None:
        raise ApiError(
            400,
            "Mutually exclusive parameters: Ensure you are only providing one of: "
            "'previous_response_id' or 'conversation'.",
            param="previous_response_id",
            code="mutually_exclusive_parameters",
        )
    earlier: list[dict[str, Any]] = []
    conversation: Conversation | None = None
    if previous_id is not None:
        stored = state.responses.get(previous_id)
        if stored is None:
            raise ApiError(
                400,
                f"Previous response with id '{previous_id}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        earlier = stored.history
    elif conversation_id is not None:
        conversation = state.conversations.get(conversation_id)
        if conversation is None:
            raise ApiError(
                404, f"Conversation with id '{conversation_id}' not found.", kind="not_found_error"
            )
        earlier = conversation.items
    new_items = _normalize_input(state, body.get("input"), "input")
    instructions = body.get("instructions")
    turns = items_to_turns(earlier + new_items, instructions)
    answer = reply(
        turns,
        tool_names=_tool_names(body.get("tools")),
        new_call_id=lambda: state.new_id("call"),
        thinking=isinstance(body.get("reasoning"), dict),
    )
    output = _output_items(state, answer, body)
    input_tokens = approximate_tokens(*(t.text for t in turns))
    output_tokens = approximate_tokens(answer.text or "", *(c.arguments for c in answer.calls))
    response_id = state.new_id("resp")
    response: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": float(state.now()),
        "status": "completed",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": instructions,
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": body.get("metadata") or {},
        "model": model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": previous_id,
        "conversation": {"id": conversation_id} if conversation_id else None,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": store,
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
        "user": None,
    }
    if store:
        state.responses[response_id] = StoredResponse(
            copy.deepcopy(response), earlier + new_items + copy.deepcopy(output), new_items
        )
    if conversation is not None:
        conversation.items.extend(new_items + copy.deepcopy(output))
    if body.get("stream"):
        return StreamReply(_stream_events(response))
    return JsonReply(response)


def _stream_events(response: dict[str, Any]) -> list[tuple[str | None, str]]:
    events: list[tuple[str | None, str]] = []

    def emit(kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": len(events), **fields}
        events.append((kind, json.dumps(data)))

    pending = dict(response, status="in_progress", output=[], usage=None)
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        item_id = item["id"]
        if item["type"] == "message":
            emit(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", content=[]),
            )
            text = item["content"][0]["text"]
            empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            emit(
                "response.content_part.added",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=empty_part,
            )
            for piece in word_pieces(text):
                emit(
                    "response.output_text.delta",
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            emit(
                "response.content_part.done",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=item["content"][0],
            )
        elif item["type"] == "function_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", arguments=""),
            )
            arguments = item["arguments"]
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                name=item["name"],
                arguments=arguments,
            )
        else:
            emit("response.output_item.added", output_index=index, item=item)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return events


def _stored(state: ServerState, response_id: str) -> StoredResponse:
    stored = state.responses.get(response_id)
    if stored is None:
        raise ApiError(
            404, f"Response with id '{response_id}' not found.", kind="invalid_request_error"
        )
    return stored


def retrieve_response(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``GET /v1/responses/{id}`` (404 for unknown and ``store=false`` responses)."""
    return JsonReply(copy.deepcopy(_stored(state, params["id"]).body))


def delete_response(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``DELETE /v1/responses/{id}``."""
    _stored(state, params["id"])
    del state.responses[params["id"]]
    return JsonReply({"id": params["id"], "object": "response", "deleted": True})


def _page(items: list[dict[str, Any]], query: dict[str, str], default_order: str) -> JsonReply:
    order = query.get("order", default_order)
    ordered = list(reversed(items)) if order == "desc" else list(items)
    after = query.get("after")
    if after is not None:
        ids = [item.get("id") for item in ordered]
        ordered = ordered[ids.index(after) + 1 :] if after in ids else []
    try:
        limit = int(query.get("limit", "20"))
    except ValueError:
        raise ApiError(400, "Invalid value for 'limit'.", param="limit") from None
    page = copy.deepcopy(ordered[:limit])
    return JsonReply(
        {
            "object": "list",
            "data": page,
            "first_id": page[0].get("id") if page else None,
            "last_id": page[-1].get("id") if page else None,
            "has_more": len(ordered) > limit,
        }
    )


def list_input_items(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``GET /v1/responses/{id}/input_items`` (newest first by default, as the API)."""
    return _page(_stored(state, params["id"]).input_items, query, "desc")


# -- conversations ------------------------------------------------------------------


def _conversation(state: ServerState, conversation_id: str) -> Conversation:
    conversation = state.conversations.get(conversation_id)
    if conversation is None:
        raise ApiError(
            404, f"Conversation with id '{conversation_id}' not found.", kind="not_found_error"
        )
    return conversation


def create_conversation(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``POST /v1/conversations`` with optional ``items`` and ``metadata``."""
    body = body if isinstance(body, dict) else {}
    items = _normalize_input(state, body.get("items"), "items")
    if len(items) > 20:
        raise ApiError(400, "A conversation can be created with at most 20 items.", param="items")
    conversation = Conversation(state.new_id("conv"), state.now(), dict(body.get("metadata") or {}))
    conversation.items.extend(items)
    state.conversations[conversation.conversation_id] = conversation
    return JsonReply(conversation.body())


def retrieve_conversation(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``GET /v1/conversations/{id}``."""
    return JsonReply(_conversation(state, params["id"]).body())


def update_conversation(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``POST /v1/conversations/{id}`` (replaces ``metadata``)."""
    conversation = _conversation(state, params["id"])
    conversation.metadata = dict(body.get("metadata") or {})
    return JsonReply(conversation.body())


def delete_conversation(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``DELETE /v1/conversations/{id}``."""
    _conversation(state, params["id"])
    del state.conversations[params["id"]]
    return JsonReply({"id": params["id"], "object": "conversation.deleted", "deleted": True})


def create_items(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``POST /v1/conversations/{id}/items``: append items (returns the added ones)."""
    conversation = _conversation(state, params["id"])
    items = _normalize_input(state, body.get("items"), "items")
    if not items:
        raise ApiError(400, "Missing required parameter: 'items'.", param="items")
    conversation.items.extend(items)
    return _page(items, {"order": "asc", "limit": str(len(items))}, "asc")


def list_items(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``GET /v1/conversations/{id}/items`` (``order`` defaults to ``desc``, as the API)."""
    return _page(_conversation(state, params["id"]).items, query, "desc")


def _item(conversation: Conversation, item_id: str) -> dict[str, Any]:
    for item in conversation.items:
        if item.get("id") == item_id:
            return item
    raise ApiError(404, f"Item with id '{item_id}' not found.", kind="not_found_error")


def retrieve_item(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``GET /v1/conversations/{id}/items/{item_id}``."""
    return JsonReply(copy.deepcopy(_item(_conversation(state, params["id"]), params["item"])))


def delete_item(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    """``DELETE /v1/conversations/{id}/items/{item_id}`` (returns the conversation)."""
    conversation = _conversation(state, params["id"])
    conversation.items.remove(_item(conversation, params["item"]))
    return JsonReply(conversation.body())
