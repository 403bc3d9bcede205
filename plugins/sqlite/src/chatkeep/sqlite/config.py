"""Reading a ``sqlite://`` URL and keyword options into the settings a SQLiteStore runs with.

URL forms::

    sqlite:///relative/path.db     relative to the current directory
    sqlite:////absolute/path.db    absolute (note the fourth slash)
    sqlite:///C:/data/chats.db     Windows drive paths work the same way
    sqlite://:memory:              a private in-memory database (also sqlite:///:memory:)

Options come from the query string (``sqlite:///chats.db?ttl=3600&timeout=10``) or as keyword
arguments; keyword arguments override the query string.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import parse_qsl, unquote

from chatkeep.core.backend import InvalidOption, check_namespace, redact_url

__all__ = ["MEMORY", "SQLiteOptions", "parse_options", "parse_url"]

MEMORY = ":memory:"

_URL_FORMS = "sqlite:///relative/path.db, sqlite:////absolute/path.db or sqlite://:memory:"
_SYNCHRONOUS = ("off", "normal", "full", "extra")
_JOURNAL_MODES = ("wal", "delete", "truncate", "persist")
_MODES = ("rwc", "rw", "ro")
_KNOWN = ("ttl", "timeout", "synchronous", "journal_mode", "clock", "namespace", "mode")


@dataclass(frozen=True)
class SQLiteOptions:
    """Validated options of a :class:`~chatkeep.sqlite.SQLiteStore`.

    ``ttl``: seconds of inactivity after which a session expires (``None``: never).
    ``timeout``: seconds to wait for another connection's write lock before giving up.
    ``synchronous``: SQLite's ``PRAGMA synchronous`` for every connection.
    ``journal_mode``: the file's journal mode (``wal`` unless the filesystem cannot do it).
    ``namespace``: the tenant this handle sees (``None``: the default namespace); one file
    can hold many, each invisible to the others (rules: :func:`chatkeep.core.check_namespace`).
    ``mode``: like SQLite's own URI parameter: ``rwc`` (read, write, create the file if
    missing), ``rw`` (never create the file) or ``ro`` (read-only: opens the file read-only,
    never creates or migrates anything; writes raise
    :class:`~chatkeep.sqlite.errors.ReadOnlyStore`).
    """

    ttl: float | None = None
    timeout: float = 5.0
    synchronous: str = "full"
    journal_mode: str = "wal"
    namespace: str | None = None
    mode: str = "rwc"


def parse_url(url: str) -> tuple[str, dict[str, str]]:
    """Split a ``sqlite://`` URL into a database path and its query options.

    Returns ``(":memory:", {...})`` for the in-memory forms. Raises :class:`InvalidOption`
    for anything that is not one of the documented forms.
    """
    if not isinstance(url, str):
        raise InvalidOption(f"a SQLite URL must be a str, not {type(url).__name__}")
    scheme, separator, rest = url.partition("://")
    if not separator or scheme.lower() != "sqlite":
        raise InvalidOption(f"not a SQLite URL: {redact_url(url)!r}; use {_URL_FORMS}")
    location, _, query = rest.partition("?")
    if location in (MEMORY, "/" + MEMORY):
        path = MEMORY
    elif location.startswith("/"):
        # sqlite:///x.db -> "/x.db" -> "x.db"; sqlite:////abs/x.db -> "//abs/x.db" -> "/abs/x.db"
        path = unquote(location[1:])
    elif location:
        meant = redact_url(f"sqlite:///{rest}")
        raise InvalidOption(
            f"SQLite URLs have no host part ({redact_url(url)!r}); did you mean {meant!r}? "
            f"Use {_URL_FORMS}"
        )
    else:
        path = ""
    if not path:
        raise InvalidOption(f"the SQLite URL {redact_url(url)!r} names no file; use {_URL_FORMS}")
    if "\x00" in path:
        raise InvalidOption("a SQLite database path must not contain NUL")
    return path, _parse_query(query)


def _parse_query(query: str) -> dict[str, str]:
    if not query:
        return {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise InvalidOption(
            f"malformed SQLite URL query {query!r}: expected name=value pairs joined by '&'"
        ) from None
    options: dict[str, str] = {}
    for name, value in pairs:
        if name in options:
            raise InvalidOption(f"SQLite URL option {name!r} is given twice")
        options[name] = value
    return options


def parse_options(raw: Mapping[str, object]) -> tuple[SQLiteOptions, Callable[[], float] | None]:
    """Validate ``raw`` (query-string strings or typed keyword values).

    Returns the options and the injected clock, if any (``clock=`` is for tests: a callable
    returning the current time in seconds, like :func:`time.time`).
    """
    unknown = sorted(set(raw) - set(_KNOWN))
    if unknown:
        raise InvalidOption(
            f"unknown SQLite option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(_KNOWN)}"
        )
    clock = raw.get("clock")
    if clock is not None and not callable(clock):
        raise InvalidOption("clock must be a callable returning seconds, like time.time")
    options = SQLiteOptions(
        ttl=_ttl(raw.get("ttl")),
        timeout=_seconds("timeout", raw.get("timeout", 5.0), allow_zero=True),
        synchronous=_choice("synchronous", raw.get("synchronous", "full"), _SYNCHRONOUS),
        journal_mode=_choice("journal_mode", raw.get("journal_mode", "wal"), _JOURNAL_MODES),
        namespace=_namespace(raw.get("namespace")),
        mode=_choice("mode", raw.get("mode", "rwc"), _MODES),
    )
    return options, clock


def _namespace(value: object) -> str | None:
    if value is None:
        return None
    try:
        return check_namespace(value)
    except InvalidOption as exc:
        raise InvalidOption(f"SQLite option {exc}") from None


def _ttl(value: object) -> float | None:
    if value is None or (isinstance(value, str) and value.lower() == "none"):
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    return _seconds("ttl", value, allow_zero=False)


def _seconds(name: str, value: object, *, allow_zero: bool) -> float:
    number: float
    if isinstance(value, bool):
        number = math.nan  # True/False are ints to Python, but never a duration
    elif isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = math.nan
    elif isinstance(value, timedelta):
        number = value.total_seconds()
    else:
        number = math.nan
    bound = "0 or more" if allow_zero else "greater than 0"
    if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
        raise InvalidOption(
            f"SQLite option {name}={value!r} is invalid: expected a number of seconds {bound}"
            + (" or a timedelta" if name == "ttl" else "")
        )
    return number


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    if isinstance(value, str) and value.lower() in allowed:
        return value.lower()
    raise InvalidOption(
        f"SQLite option {name}={value!r} is invalid: expected one of {', '.join(allowed)}"
    )
