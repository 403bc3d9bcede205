"""Showing URLs without their secrets."""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

__all__ = ["redact_url"]

_SECRET_KEY = re.compile(r"pass|secret|key|token|sig|credential|auth|connection", re.IGNORECASE)
# Values that carry a secret whatever their key is called (Azure connection strings, SAS).
_SECRET_VALUE = re.compile(r"accountkey=|sharedaccesssignature=|[?&;]?sig=", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` with its password and secret-looking query values replaced by ``***``.

    Works on the string itself (no parse-and-rebuild, which can change a URL or miss a
    password containing ``/``): everything between the user name and the last ``@`` before
    the query is hidden, as are values of query keys that look like secrets
    (``password``, ``account_key``, ``sig``, ``token``, ...). Errs on the side of hiding.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    head, qmark, query = rest.partition("?")
    at = head.rfind("@")
    if at >= 0:
        userinfo, hostpart = head[:at], head[at + 1 :]
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        head = f"{userinfo}@{hostpart}"
    if query:
        fragment = ""
        if "#" in query:
            query, fragment = query.split("#", 1)
            fragment = "#" + fragment
        pieces = []
        for piece in query.split("&"):
            key, eq, value = piece.partition("=")
            secret = _SECRET_KEY.search(key) or _SECRET_VALUE.search(unquote_plus(value))
            pieces.append(f"{key}=***" if eq and secret else piece)
        query = "&".join(pieces) + fragment
    return f"{scheme}{sep}{head}{qmark}{query}"
