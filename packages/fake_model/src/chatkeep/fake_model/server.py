"""The HTTP server: routing, authentication, the request log, SSE and error bodies."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from . import anthropic_messages, chat_completions, responses
from .state import ApiError, JsonReply, ServerState, StreamReply

__all__ = ["FakeModelServer", "RecordedRequest"]

#: Headers that carry credentials: never recorded.
_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "cookie"})


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, for server-side assertions.

    ``path`` is the URL path without the query (``/v1/responses``); ``api`` names the
    endpoint (``"chat.completions"``, ``"responses"``, ``"responses.retrieve"``,
    ``"conversations.items.create"``, ``"messages"``, ... or ``"unknown"``); ``body`` is the
    parsed JSON body (``None`` without one); ``size`` the body's length in bytes; ``headers``
    has every header except credentials (``Authorization``, ``x-api-key``, ``api-key``).
    """

    method: str
    path: str
    api: str
    query: dict[str, str]
    body: Any
    size: int
    status: int
    stream: bool
    headers: dict[str, str] = field(repr=False)


Handler = Callable[[ServerState, Any, dict[str, str], dict[str, str]], "JsonReply | StreamReply"]


def _models(
    state: ServerState, body: Any, params: dict[str, str], query: dict[str, str]
) -> JsonReply:
    return JsonReply(
        {
            "object": "list",
            "data": [{"id": "fake-model", "object": "model", "created": 0, "owned_by": "chatkeep"}],
        }
    )


# (method, path suffix pattern, api name, handler). Matched against the END of the path,
# so any prefix works: /v1, /compatible-mode/v1, /openai/deployments/x, /anthropic/v1 ...
_ROUTES: list[tuple[str, re.Pattern[str], str, Handler]] = [
    (m, re.compile(p + r"$"), name, handler)
    for m, p, name, handler in [
        ("POST", r"/chat/completions", "chat.completions", chat_completions.create_chat_completion),
        ("POST", r"/responses", "responses", responses.create_response),
        ("GET", r"/responses/(?P<id>[^/]+)", "responses.retrieve", responses.retrieve_response),
        ("DELETE", r"/responses/(?P<id>[^/]+)", "responses.delete", responses.delete_response),
        (
            "GET",
            r"/responses/(?P<id>[^/]+)/input_items",
            "responses.input_items",
            responses.list_input_items,
        ),
        ("POST", r"/conversations", "conversations.create", responses.create_conversation),
        (
            "GET",
            r"/conversations/(?P<id>[^/]+)",
            "conversations.retrieve",
            responses.retrieve_conversation,
        ),
        (
            "POST",
            r"/conversations/(?P<id>[^/]+)",
            "conversations.update",
            responses.update_conversation,
        ),
        (
            "DELETE",
            r"/conversations/(?P<id>[^/]+)",
            "conversations.delete",
            responses.delete_conversation,
        ),
        (
            "POST",
            r"/conversations/(?P<id>[^/]+)/items",
            "conversations.items.create",
            responses.create_items,
        ),
        (
            "GET",
            r"/conversations/(?P<id>[^/]+)/items",
            "conversations.items.list",
            responses.list_items,
        ),
        (
            "GET",
            r"/conversations/(?P<id>[^/]+)/items/(?P<item>[^/]+)",
            "conversations.items.retrieve",
            responses.retrieve_item,
        ),
        (
            "DELETE",
            r"/conversations/(?P<id>[^/]+)/items/(?P<item>[^/]+)",
            "conversations.items.delete",
            responses.delete_item,
        ),
        ("POST", r"/messages", "messages", anthropic_messages.create_message),
        (
            "POST",
            r"/messages/count_tokens",
            "messages.count_tokens",
            anthropic_messages.count_tokens,
        ),
        ("GET", r"/models", "models", _models),
    ]
]


def _error_body(api: str, error: ApiError) -> dict[str, Any]:
    if api.startswith("messages"):  # Anthropic's shape
        return {"type": "error", "error": {"type": error.kind, "message": error.message}}
    return {
        "error": {
            "message": error.message,
            "type": error.kind,
            "param": error.param,
            "code": error.code,
        }
    }


class _Failure:
    """A queued injected failure (see :meth:`FakeModelServer.fail_next`)."""

    def __init__(self, status: int, message: str, times: int) -> None:
        self.status = status
        self.message = message
        self.times = times


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # Set by FakeModelServer before serving.
    state: ServerState
    log: list[RecordedRequest]
    log_lock: threading.Lock
    require_auth: bool
    failures: list[_Failure]


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect
    server: _HTTPServer
    timeout = 60  # a keep-alive connection left idle does not hold a thread for ever
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms stall

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_GET(self) -> None:
        """Serve a GET."""
        self._handle("GET")

    def do_POST(self) -> None:
        """Serve a POST."""
        self._handle("POST")

    def do_DELETE(self) -> None:
        """Serve a DELETE."""
        self._handle("DELETE")

    def _route(self, method: str, path: str) -> tuple[str, Handler | None, dict[str, str]]:
        path_matched = False
        for route_method, pattern, name, handler in _ROUTES:
            match = pattern.search(path)
            if match is None:
                continue
            path_matched = True
            if route_method == method:
                return name, handler, {k: v for k, v in match.groupdict().items()}
        return ("unknown" if not path_matched else "method_not_allowed"), None, {}

    def _authorized(self) -> bool:
        bearer = self.headers.get("Authorization", "")
        if bearer.startswith("Bearer ") and bearer[len("Bearer ") :].strip():
            return True
        return bool(self.headers.get("x-api-key") or self.headers.get("api-key"))

    def _handle(self, method: str) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        query = dict(parse_qsl(split.query))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        api, handler, params = self._route(method, path)
        body: Any = None
        result: JsonReply | StreamReply
        stream = False
        try:
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    raise ApiError(
                        400, "We could not parse the JSON body of your request."
                    ) from None
            stream = isinstance(body, dict) and body.get("stream") is True
            if handler is None:
                status = 405 if api == "method_not_allowed" else 404
                raise ApiError(
                    status, f"Unknown request URL: {method} {path}.", kind="not_found_error"
                )
            if self.server.require_auth and not self._authorized():
                kind = (
                    "authentication_error"
                    if api.startswith("messages")
                    else "invalid_request_error"
                )
                raise ApiError(
                    401,
                    "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' "
                    "or 'x-api-key: <key>'.",
                    kind=kind,
                    code="invalid_api_key",
                )
            with self.server.log_lock:
                failure = self.server.failures[0] if self.server.failures else None
                if failure is not None:
                    failure.times -= 1
                    if failure.times <= 0:
                        self.server.failures.pop(0)
            if failure is not None:
                raise ApiError(failure.status, failure.message, kind="server_error")
            if method == "POST" and not isinstance(body, dict) and api != "conversations.create":
                raise ApiError(400, "The request body must be a JSON object.")
            with self.server.state.lock:
                result = handler(self.server.state, body, params, query)
        except ApiError as error:
            result = JsonReply(_error_body(api, error), error.status)
        except Exception as error:  # a bug in the fake server: say so rather than hang
            message = f"fake model server error: {type(error).__name__}: {error}"
            result = JsonReply(_error_body(api, ApiError(500, message, kind="server_error")), 500)
        status = result.status if isinstance(result, JsonReply) else 200
        headers = {
            k.lower(): v for k, v in self.headers.items() if k.lower() not in _SECRET_HEADERS
        }
        record = RecordedRequest(method, path, api, query, body, len(raw), status, stream, headers)
        with self.server.log_lock:
            self.server.log.append(record)
        if isinstance(result, JsonReply):
            self._send_json(result)
        else:
            self._send_stream(result)

    def _send_json(self, result: JsonReply) -> None:
        data = json.dumps(result.body).encode("utf-8")
        self.send_response(result.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", ServerState.new_id("req"))
        self.send_header("request-id", ServerState.new_id("req"))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, result: StreamReply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        # No length is known up front: the end of the stream is the end of the connection.
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for event, data in result.events:
                text = (f"event: {event}\n" if event else "") + f"data: {data}\n\n"
                self.wfile.write(text.encode("utf-8"))
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading early (it closed the stream): not an error


class FakeModelServer:
    """A fake model service on loopback speaking Chat Completions, Responses, Conversations
    and Anthropic Messages closely enough for the official SDKs.

    ::

        with FakeModelServer() as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="test")
            client.responses.create(model="m", input="hi")
            assert server.requests[-1].api == "responses"

    See the package docstring (:mod:`chatkeep.fake_model`) for the full contract.
    """

    def __init__(
        self, *, host: str = "127.0.0.1", port: int = 0, require_auth: bool = True
    ) -> None:
        self._host = host
        self._port = port
        self._require_auth = require_auth
        self.state = ServerState()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> FakeModelServer:
        """Start serving in a background thread (idempotent); returns ``self``."""
        if self._httpd is not None:
            return self
        httpd = _HTTPServer((self._host, self._port), _RequestHandler)
        httpd.state = self.state
        httpd.log = []
        httpd.log_lock = threading.Lock()
        httpd.require_auth = self._require_auth
        httpd.failures = []
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="chatkeep-fake-model",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _server(self) -> _HTTPServer:
        if self._httpd is None:
            raise RuntimeError("the fake model server is not running (use `with` or .start())")
        return self._httpd

    # -- addresses -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (the Anthropic SDK's ``base_url``)."""
        host, port = self._server().server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (the OpenAI SDK's ``base_url``)."""
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The Anthropic SDK's ``base_url`` (it appends ``/v1/messages`` itself)."""
        return self.url

    # -- inspection ------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the log of every request received since start or the last reset."""
        server = self._server()
        with server.log_lock:
            return list(server.log)

    def requests_for(self, api: str) -> list[RecordedRequest]:
        """The logged requests to one endpoint (``"responses"``, ``"messages"``, ...)."""
        return [r for r in self.requests if r.api == api]

    def clear_requests(self) -> None:
        """Empty the request log (server-side state is kept)."""
        server = self._server()
        with server.log_lock:
            server.log.clear()

    def reset(self) -> None:
        """Empty the request log, forget every response and conversation, cancel failures."""
        server = self._server()
        with server.log_lock:
            server.log.clear()
            server.failures.clear()
        self.state.reset()

    def fail_next(
        self, status: int = 500, message: str = "injected failure", times: int = 1
    ) -> None:
        """Make the next ``times`` API requests fail with ``status`` (after authentication).

        The official SDKs retry 408/409/429/5xx by default: build test clients with
        ``max_retries=0`` or count the retries in.
        """
        server = self._server()
        with server.log_lock:
            server.failures.append(_Failure(status, message, times))

    def stored_response(self, response_id: str) -> dict[str, Any] | None:
        """The stored Responses API response ``response_id`` (``None`` if not stored)."""
        with self.state.lock:
            stored = self.state.responses.get(response_id)
            return json.loads(json.dumps(stored.body)) if stored else None

    def conversation_items(self, conversation_id: str) -> list[dict[str, Any]]:
        """The items of a conversation, oldest first (``KeyError`` if unknown)."""
        with self.state.lock:
            items = self.state.conversations[conversation_id].items
            return json.loads(json.dumps(items))  # type: ignore[no-any-return]
