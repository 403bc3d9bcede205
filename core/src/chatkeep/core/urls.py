"""Showing URLs without their secrets."""

from __future__ import annotations

import re
from urllib.parse import quote, unquote, unquote_plus

__all__ = ["redact_text", "redact_url", "url_secrets"]

_SECRET_KEY = re.compile(r"pass|secret|key|token|sig|credential|auth|connection", re.IGNORECASE)
# Values that carry a secret whatever their key is called (Azure connection strings, SAS).
_SECRET_VALUE = re.compile(r"accountkey=|sharedaccesssignature=|[?&;]?sig=", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` with its password and secret-looking query values replaced by ``***``.

    Works on the string itself (no parse-and-rebuild, which can change a URL or miss a
    password containing ``/``): everything between the user name and the last ``@`` before
    the query is hidden, as are values of query keys that look like secrets
    (``password``, ``account_key``, ``sig``, ``token``, ...), and URLs nested in query values
    (``?endpoint_url=http://user:pw@host``) are redacted the same way. Errs on the side of
    hiding.
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
            decoded = unquote_plus(value)
            secret = _SECRET_KEY.search(key) or _SECRET_VALUE.search(decoded)
            if eq and secret:
                piece = f"{key}=***"
            elif eq and "://" in decoded:
                # A URL inside the URL (S3's endpoint_url=http://user:pw@host): its own
                # password and secrets are hidden the same way, written back as given.
                inner = redact_url(decoded)
                if inner != decoded:
                    piece = f"{key}={inner if value == decoded else quote(inner, safe='')}"
            pieces.append(piece)
        query = "&".join(pieces) + fragment
    return f"{scheme}{sep}{head}{qmark}{query}"


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets :func:`redact_url` hides in ``url``, each as written and decoded.

    For output that may quote them outside the URL (a test's locals, a driver's message),
    so a caller can scrub them wherever they appear. Example::

        >>> url_secrets("redis://:p%40ss@host/0?token=t0k")
        ('p%40ss', 'p@ss', 't0k')
    """
    found: list[str] = []
    _, sep, rest = url.partition("://")
    if not sep:
        rest = url
    head, _, query = rest.partition("?")
    userinfo = head[: head.rfind("@")] if "@" in head else ""
    if ":" in userinfo:
        password = userinfo.split(":", 1)[1]
        found += [password, unquote(password)]
    for piece in query.split("#", 1)[0].split("&") if query else ():
        key, eq, value = piece.partition("=")
        decoded = unquote_plus(value)
        if eq and (_SECRET_KEY.search(key) or _SECRET_VALUE.search(decoded)):
            found += [value, decoded]
            # A connection string or SAS inside the value: its own secret parts too.
            for part in re.split(r"[;&]", decoded):
                inner_key, inner_eq, inner_value = part.partition("=")
                if inner_eq and _SECRET_KEY.search(inner_key):
                    found += [inner_value, unquote_plus(inner_value)]
        elif eq and "://" in decoded:
            found += url_secrets(decoded)
    return tuple(dict.fromkeys(s for s in found if s))


# A URL inside free text: a scheme, "://", then anything up to whitespace or a quote.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# key=value or key: value pairs whose key looks secret, outside URLs.
_SECRET_PAIR = re.compile(
    r"(?P<key>\b[\w.-]*(?:pass(?:word)?|secret|token|accountkey|account_key|sig|"
    r"credential|api[_-]?key)[\w.-]*)(?P<sep>\s*[=:]\s*)(?P<value>[^\s,;&'\"]+)",
    re.IGNORECASE,
)


def redact_text(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact_url` and the values of
    secret-looking ``key=value`` pairs replaced by ``***`` (for error messages and logs
    that may quote a driver's message)."""
    text = _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)
    return _SECRET_PAIR.sub(lambda m: f"{m.group('key')}{m.group('sep')}***", text)
