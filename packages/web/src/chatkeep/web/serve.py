"""``chatkeep serve``: open a store read-only and serve the app with uvicorn."""

from __future__ import annotations

import re
import sys
import threading
import webbrowser

from chatkeep.core import ChatkeepError, InvalidOption, Store

from .app import create_app
from .security import is_loopback

__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "check_token", "serve"]

DEFAULT_PORT = 8700
#: The environment variable ``--token`` defaults to.
TOKEN_ENV = "CHATKEEP_WEB_TOKEN"  # noqa: S105 (a variable's name, not a secret)
_TOKEN = re.compile(r"[A-Za-z0-9._~-]{16,256}")


def check_token(host: str, token: str | None) -> None:
    """Refuse a non-loopback ``host`` without a token, and a token that is short or holds
    characters a cookie cannot carry (the token itself is never shown)."""
    if token is not None and not _TOKEN.fullmatch(token):
        raise InvalidOption(
            "the token must be 16 to 256 letters, digits or . _ ~ - "
            "(try: python -c 'import secrets; print(secrets.token_urlsafe(24))')"
        )
    if token is None and not is_loopback(host):
        raise InvalidOption(
            f"--host {host} is reachable from other machines: give --token "
            f"(or ${TOKEN_ENV}) so that every request must carry it"
        )


def _hosts(host: str, port: int) -> tuple[str, ...]:
    """The ``Host`` names the server answers to: loopback names for a loopback bind (no
    DNS rebinding); any for a wildcard or another address (the token guards those)."""
    if is_loopback(host):
        return ("127.0.0.1", "localhost", "[::1]", host.lower())
    return ()


def serve(
    store: Store,
    *,
    store_shown: str,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    open_browser: bool = False,
) -> int:
    """Serve the app over ``store`` until interrupted; returns the exit code."""
    import uvicorn

    check_token(host, token)
    app = create_app(store, store_shown=store_shown, token=token, hosts=_hosts(host, port))
    shown_host = f"[{host}]" if ":" in host else host
    address = f"http://{shown_host}:{port}/"
    print(f"chatkeep serve: {store_shown} at {address} (read-only; Ctrl-C stops)", file=sys.stderr)
    if token is not None:
        print(
            "open it with ?token=<your token> once; the page keeps it in a cookie", file=sys.stderr
        )
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(address,)).start()
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, server_header=False
    )
    try:
        uvicorn.Server(config).run()
    except (OSError, SystemExit) as error:
        raise ChatkeepError(f"could not serve on {address}: {error}") from None
    return 0
