"""What every request and response goes through: read-only methods, the Host check, the
token, and the security headers.

- Only ``GET`` and ``HEAD`` are served (anything else is 405): the app has no write path.
- The ``Host`` header must name the address the server was started for (a page on another
  site that rebinds its DNS name to 127.0.0.1 is refused).
- With a token (required for a non-loopback ``--host``), every request must carry it: the
  ``chatkeep_token`` cookie, an ``Authorization: Bearer`` header, or ``?token=`` once, which
  sets the cookie (``HttpOnly``, ``SameSite=Strict``) and redirects to the same URL without
  it, so the token does not stay in the address bar or the history.
- Every response carries a strict Content-Security-Policy (scripts and styles only from the
  app's own files, no inline script, no framing, no form posts elsewhere), ``nosniff``, no
  referrer and ``no-store``.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

__all__ = ["CSP", "TOKEN_COOKIE", "Guard", "is_loopback"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_COOKIE = "chatkeep_token"  # noqa: S105 (the cookie's name, not a secret)
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "media-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or name."""
    return host in _LOOPBACK or host.startswith("127.")


def _host_name(value: str) -> str:
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """The ASGI middleware of this module's docstring."""

    def __init__(self, app: ASGIApp, *, token: str | None, hosts: Iterable[str]) -> None:
        self.app = app
        self.token = token
        self.hosts = {host.lower() for host in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                # A response's own header wins (the media route's sandboxing CSP).
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                message["headers"] = [*headers, *(h for h in _HEADERS if h[0] not in present)]
            await send(message)

        headers = dict(scope.get("headers", []))
        if scope["method"] not in ("GET", "HEAD"):
            await _plain(secured, 405, "read-only: only GET and HEAD", [(b"allow", b"GET, HEAD")])
            return
        host = _host_name(headers.get(b"host", b"").decode("latin-1").lower())
        if self.hosts and host not in self.hosts:
            await _plain(secured, 421, "this server does not answer for that host name")
            return
        if self.token is not None:
            answered = await self._check_token(scope, headers, secured)
            if answered:
                return
        await self.app(scope, receive, secured)

    async def _check_token(self, scope: Scope, headers: dict[bytes, bytes], send: Send) -> bool:
        """True when the request was answered here (refused, or redirected to set the
        cookie)."""
        assert self.token is not None
        expected = self.token.encode()
        query = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))]
        given = [v for k, v in query if k == "token"]
        if given:
            if not hmac.compare_digest(given[-1].encode(), expected):
                await _plain(send, 401, "wrong token")
                return True
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            location = scope.get("path", "/") + (f"?{rest}" if rest else "")
            cookie = (f"{TOKEN_COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/").encode()
            await _plain(
                send, 303, "see other", [(b"location", location.encode()), (b"set-cookie", cookie)]
            )
            return True
        auth = headers.get(b"authorization", b"")
        if auth.lower().startswith(b"bearer ") and hmac.compare_digest(auth[7:].strip(), expected):
            return False
        cookies: SimpleCookie = SimpleCookie()
        try:
            cookies.load(headers.get(b"cookie", b"").decode("latin-1"))
        except Exception:
            cookies = SimpleCookie()
        morsel = cookies.get(TOKEN_COOKIE)
        if morsel is not None and hmac.compare_digest(morsel.value.encode(), expected):
            return False
        await _plain(send, 401, "this server needs its token: open the URL it printed")
        return True


async def _plain(
    send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = f"{status} {text}\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
