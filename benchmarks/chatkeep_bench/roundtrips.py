"""Counting what a store costs on the wire, whatever its driver: round trips to a server
(a TCP proxy that counts how often the client speaks after the server has), HTTP requests
(a forwarding HTTP proxy), and SQLite statements (a trace callback on every connection).
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HTTPCounter", "TCPCounter", "count_sqlite_statements"]


class TCPCounter:
    """A TCP proxy to ``upstream`` counting round trips: each time a connection's client
    sends after the server last spoke (or first) is one round trip."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.count = 0
        self._lock = threading.Lock()
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
        upstream = socket.create_connection(self.upstream, timeout=60)
        server_spoke_last = True
        try:
            while True:
                ready, _, _ = select.select([client, upstream], [], [], 120)
                if not ready:
                    return
                for source in ready:
                    data = source.recv(262144)
                    if not data:
                        return
                    if source is client:
                        if server_spoke_last:
                            with self._lock:
                                self.count += 1
                        server_spoke_last = False
                        upstream.sendall(data)
                    else:
                        server_spoke_last = True
                        client.sendall(data)
        except OSError:
            return
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()

    def close(self) -> None:
        """Stop accepting."""
        self._closed = True
        self._server.close()


class HTTPCounter:
    """A forwarding HTTP proxy to ``upstream`` (``http://host:port``) counting requests."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.count = 0
        lock = threading.Lock()
        counter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                with lock:
                    counter.count += 1
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                connection = http.client.HTTPConnection(*target, timeout=120)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    payload = response.read()
                finally:
                    connection.close()
                self.send_response(response.status)
                head = self.command == "HEAD"
                for key, value in response.getheaders():
                    lowered = key.lower()
                    if lowered in ("connection", "transfer-encoding"):
                        continue
                    if lowered == "content-length" and not head:
                        continue
                    self.send_header(key, value)
                if not head:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if not head:
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


class _StatementCount:
    count = 0


def count_sqlite_statements() -> type[_StatementCount]:
    """From now on, every SQLite connection this process opens counts its statements in
    the returned object's ``count`` (a trace callback; SQLite has no round trips)."""
    original = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = original(*args, **kwargs)

        def traced(statement: str) -> None:
            _StatementCount.count += 1

        connection.set_trace_callback(traced)
        return connection

    sqlite3.connect = connect  # type: ignore[assignment]
    return _StatementCount
