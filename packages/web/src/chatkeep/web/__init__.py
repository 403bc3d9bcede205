"""chatkeep serve: a read-only local web page over any chatkeep store.

::

    chatkeep serve --url sqlite:///chats.db          # http://127.0.0.1:8700/

or from Python, :func:`create_app` over an open store, run by any ASGI server.
"""

from __future__ import annotations

from .app import create_app
from .serve import DEFAULT_PORT, TOKEN_ENV, serve

__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "create_app", "serve"]
