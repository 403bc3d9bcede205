"""Fault injection between the stores and their servers, over real sockets.

:class:`CuttingProxy` is a TCP proxy that cuts connections (both directions at once, after a
random number of bytes) with a given probability and on demand: what a flaky network, a
load balancer's idle timeout or a failover does to Redis and PostgreSQL clients.

:class:`FaultyHTTPProxy` is an HTTP reverse proxy for S3 and Azure Blob that answers a share
of requests with throttling or server errors without forwarding them, forwards some and then
drops the connection before the reply (the request *was* applied: the client cannot know),
resets others, and can serialize what it forwards (moto's conditional writes are not atomic
under concurrent requests; with one request at a time the contention the clients see is
real, and so is every conflict).
"""

from __future__ import annotations

import contextlib
import http.client
import random
import select
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["CuttingProxy", "FaultyHTTPProxy"]


class CuttingProxy:
    """Forward ``127.0.0.1:<port>`` to ``upstream``, cutting a ``cut`` share of connections."""

    def __init__(self, upstream: tuple[str, int], *, cut: float = 0.0, seed: int = 7) -> None:
        self.upstream = upstream
        self.cut = cut
        self.random = random.Random(seed)
        self.faults: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._pump, args=(client,), daemon=True).start()

    def _pump(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            client.close()
            return
        with self._lock:
            budget = self.random.randint(0, 4096) if self.random.random() < self.cut else None
            self._live.update((client, upstream))
        moved = 0
        try:
            while True:
                ready, _, _ = select.select([client, upstream], [], [], 30)
                if not ready:
                    break
                for source in ready:
                    data = source.recv(65536)
                    if not data:
                        return
                    target = upstream if source is client else client
                    target.sendall(data)
                    moved += len(data)
                    if budget is not None and moved >= budget:
                        self.faults["cut mid-stream"] += 1
                        return
        except OSError:
            return
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            with self._lock:
                self._live.difference_update((client, upstream))

    def cut_all(self) -> int:
        """Cut every open connection now; returns how many were cut."""
        with self._lock:
            live = list(self._live)
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.faults["cut all"] += len(live) // 2
        return len(live) // 2

    def close(self) -> None:
        """Stop accepting and cut what is open."""
        self._closed = True
        self._server.close()
        self.cut_all()


# What each service says when it throttles or fails (enough for botocore and azure-core to
# recognise the error and retry).
_THROTTLE = {
    "s3": (
        503,
        {"Content-Type": "application/xml"},
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
        b"<Message>Please reduce your request rate.</Message></Error>",
    ),
    "azure": (
        503,
        {"Content-Type": "application/xml", "x-ms-error-code": "ServerBusy"},
        b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>'
        b"<Message>The server is busy.</Message></Error>",
    ),
}
_INTERNAL = {
    "s3": (
        500,
        {"Content-Type": "application/xml"},
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
        b"<Message>We encountered an internal error.</Message></Error>",
    ),
    "azure": (
        500,
        {"Content-Type": "application/xml", "x-ms-error-code": "InternalError"},
        b'<?xml version="1.0" encoding="utf-8"?><Error><Code>InternalError</Code>'
        b"<Message>The server encountered an internal error.</Message></Error>",
    ),
}
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


class FaultyHTTPProxy:
    """An HTTP reverse proxy to ``upstream`` (``http://host:port``) injecting faults.

    ``rates`` maps fault kind to probability per request: ``throttle`` (503 SlowDown /
    ServerBusy, not forwarded), ``error`` (500, not forwarded), ``lost_reply`` (forwarded,
    then the connection is dropped before the reply), ``reset`` (dropped, not forwarded),
    ``stall`` (forwarded, then no reply for ``stall_seconds``: longer than the client's
    read timeout, so it times out; then dropped).
    """

    def __init__(
        self,
        upstream: str,
        *,
        service: str,
        rates: dict[str, float] | None = None,
        serialize: bool = False,
        stall_seconds: float = 3.0,
        seed: int = 11,
    ) -> None:
        parts = urlsplit(upstream)
        self.stall_seconds = stall_seconds
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.service = service
        self.rates = dict(rates or {})
        self.random = random.Random(seed)
        self.faults: Counter[str] = Counter()
        self.requests = 0
        self._decide_lock = threading.Lock()
        self._forward_lock = threading.Lock() if serialize else None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                proxy._serve(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _fault(self) -> str | None:
        with self._decide_lock:
            self.requests += 1
            roll = self.random.random()
            for kind, rate in self.rates.items():
                if roll < rate:
                    self.faults[kind] += 1
                    return kind
                roll -= rate
        return None

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        fault = self._fault()
        if fault == "reset":
            handler.close_connection = True
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault in ("throttle", "error"):
            status, headers, payload = (_THROTTLE if fault == "throttle" else _INTERNAL)[
                self.service
            ]
            self._reply(handler, status, list(headers.items()), payload)
            return
        if self._forward_lock is not None:
            with self._forward_lock:
                status, headers, payload = self._forward(handler, body)
        else:
            status, headers, payload = self._forward(handler, body)
        if fault == "stall":  # applied upstream; the reply comes too late for the client
            time.sleep(self.stall_seconds)
        if fault in ("lost_reply", "stall"):  # applied upstream; the client never hears
            handler.close_connection = True
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)
            return
        self._reply(handler, status, headers, payload)

    def _forward(
        self, handler: BaseHTTPRequestHandler, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            headers = {
                key: value
                for key, value in handler.headers.items()
                if key.lower() not in _HOP_BY_HOP
            }
            connection.request(handler.command, handler.path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            return response.status, response.getheaders(), payload
        finally:
            connection.close()

    @staticmethod
    def _reply(
        handler: BaseHTTPRequestHandler,
        status: int,
        headers: list[tuple[str, str]],
        payload: bytes,
    ) -> None:
        handler.send_response(status)
        head = handler.command == "HEAD"  # no body, but the object's length stays
        for key, value in headers:
            lowered = key.lower()
            if lowered in _HOP_BY_HOP or (lowered == "content-length" and not head):
                continue
            handler.send_header(key, value)
        if not head:
            handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if not head:
            handler.wfile.write(payload)

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
