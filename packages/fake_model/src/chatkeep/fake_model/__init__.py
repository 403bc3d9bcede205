"""A fake model service on loopback for testing chat clients through the official SDKs.

Usage contract
==============

::

    from chatkeep.fake_model import FakeModelServer

    with FakeModelServer() as server:          # real HTTP, 127.0.0.1, random free port
        oai = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        ant = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="test")
        ...
        server.requests            # [RecordedRequest(method, path, api, query, body, size,
                                   #                  status, stream, headers)], oldest first
        server.requests_for("responses")
        server.reset()             # clear the log AND all responses/conversations

Addresses: ``server.url`` = ``http://127.0.0.1:PORT``; ``server.base_url`` = ``url + "/v1"``
(OpenAI SDK); ``server.anthropic_base_url`` = ``url`` (the Anthropic SDK appends
``/v1/messages``). Routes match the END of the path, so any prefix works
(``/compatible-mode/v1/chat/completions``, ``/anthropic/v1/messages``, Azure's
``/openai/deployments/x/chat/completions`` ...): vendor presets can be pointed at
``server.url + <vendor path>``.

Auth: every API request needs ``Authorization: Bearer <anything>``, ``x-api-key`` or
``api-key`` (Azure), else 401. Credentials are never recorded (``headers`` omits them).
``FakeModelServer(require_auth=False)`` turns the check off.

``RecordedRequest.api`` is one of ``chat.completions``, ``responses``,
``responses.retrieve``, ``responses.delete``, ``responses.input_items``,
``conversations.create|retrieve|update|delete``,
``conversations.items.create|list|retrieve|delete``, ``messages``,
``messages.count_tokens``, ``models``, ``unknown``. ``size`` is the request body's length in
bytes (assert service-managed requests stay constant-size); ``body`` the parsed JSON.

Endpoints
---------
* ``POST /v1/chat/completions``: ``messages`` (system/developer/user/assistant with
  ``tool_calls``/tool), ``tools``, ``stream`` (chunks then ``data: [DONE]``;
  ``stream_options.include_usage`` adds a usage chunk). Client-managed: nothing is kept.
  Checked like the API: a tool message must answer a pending ``tool_calls`` id, and an
  assistant's ``tool_calls`` must all be answered before the next non-tool message (400).
* ``POST /v1/responses``: ``input`` (string or items: messages, ``function_call``,
  ``function_call_output``, ``reasoning``, ``item_reference``), ``instructions`` (not
  inherited by continuations, as in the API), ``tools``, ``store`` (default true),
  ``previous_response_id`` (any stored response: continuing an older id forks),
  ``conversation`` (id or ``{"id": ...}``; input and output are appended to it),
  ``stream`` (``response.created`` ... ``response.output_text.delta`` ...
  ``response.completed``), ``reasoning={...}`` adds a reasoning item (with
  ``encrypted_content`` when ``include=["reasoning.encrypted_content"]``; tampered content
  sent back is a 400). ``store=false`` responses are not kept (with ``conversation=``
  their items are still appended to the conversation): ``GET`` is 404 and
  ``previous_response_id`` to them is 400 ``previous_response_not_found``. Both
  ``previous_response_id`` and ``conversation`` is 400. A ``function_call_output`` for an
  unknown call id, or a user message while a call is unanswered, is 400.
  ``GET``/``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``.
* Conversations: ``POST /v1/conversations`` (``items``, ``metadata``), ``GET``/``POST``
  (metadata)/``DELETE /v1/conversations/{id}``, ``POST``/``GET
  /v1/conversations/{id}/items`` (list order defaults to ``desc`` like the API; ``limit``,
  ``after``, ``order``), ``GET``/``DELETE /v1/conversations/{id}/items/{item_id}``. A
  conversation is linear: each response made with it appends its input and output items.
* ``POST /v1/messages`` (Anthropic): ``max_tokens`` required (400 without), top-level
  ``system`` (a ``system`` role in ``messages`` is 400), content blocks ``text``,
  ``tool_use``, ``tool_result`` (must answer the previous assistant message's
  ``tool_use`` ids; every ``tool_use`` must be answered in the next message), ``thinking``
  (its ``signature`` must be the one the server gave), ``tools``,
  ``thinking={"type": "enabled", ...}`` (the reply starts with a signed thinking block),
  ``stream`` (``message_start``, ``content_block_start/delta/stop``, ``message_delta``,
  ``message_stop``). Consecutive same-role messages are accepted (the API merges them;
  the model still counts each message sent as a turn).
  ``POST /v1/messages/count_tokens``. ``GET /v1/models`` lists one model.

The model
---------
Every protocol is reduced to the same canonical history (see :mod:`.model`): one turn per
message sent, except that an assistant's text and calls are one turn even as separate
Responses items, and the results of one round of tools are one ``tool`` turn even as
separate messages/items or as the ``tool_result`` blocks of a user message. The
reply is ``[seen N] first: '<first user text>' | latest: '<latest user text>'`` (N = non-system
turns, quoted with ``repr``), exactly :class:`chatkeep.core.OfflineChatClient`'s text for an
ordinary history. After tool results it adds ``| tool results: '<output>', ...`` (outputs
as the text sent). When the latest user text contains ``call:<tool>(<json object>)``
(``call:clock()`` for no arguments) and the last turn is the user's, the reply is a call of
each offered tool named so (call ids ``call_...``/``toolu_...``); a tool that was not
offered adds ``| tool not offered: '<name>'`` to the text instead.

Errors use each API's error body (OpenAI ``{"error": {message, type, param, code}}``,
Anthropic ``{"type": "error", "error": {type, message}}``), so the SDKs raise their usual
``BadRequestError``/``NotFoundError``/``AuthenticationError``. ``server.fail_next(status=500,
message=..., times=1)`` makes the next API requests fail (SDK clients retry 5xx unless
built with ``max_retries=0``). ``server.stored_response(id)`` and
``server.conversation_items(id)`` read server-side state directly.
``python -m chatkeep.fake_model [--port N] [--no-auth]`` serves in the foreground
and first prints ``FAKE_MODEL_URL=http://127.0.0.1:PORT``.
"""

from __future__ import annotations

from .model import parse_tool_requests
from .server import FakeModelServer, RecordedRequest

__all__ = ["FakeModelServer", "RecordedRequest", "parse_tool_requests"]
