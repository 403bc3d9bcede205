"""Reading a ``redis://`` URL and keyword options into the settings a RedisStore runs with.

URL forms::

    redis://[[user]:password@]host[:port][/db][?option=value&...]
    rediss://...                                        TLS
    redis+cluster://[[user]:password@]host[:port][,host[:port]...][?option=value&...]
    rediss+cluster://...                                TLS to a Redis Cluster

chatkeep's own options (``namespace``, ``key_prefix``, ``ttl``, ``pool_size``,
``pool_timeout``, ``socket_timeout``, ``socket_connect_timeout``, ``retries``,
``retry_backoff``, ``retry_backoff_max``, ``scan_count``) may be given in the query string
or as keyword arguments (keywords win). Any other option must be one redis-py's clients
accept (``ssl_cert_reqs``, ``client_name``, ...) and is handed to it; anything else raises
:class:`~chatkeep.core.errors.InvalidOption` when the store is opened, never later.

``namespace`` is chatkeep's portable tenant option (``chatkeep.core.backend.check_namespace``);
``key_prefix`` (default ``chatkeep:``) is the raw prefix of every key, for keeping several
applications apart in one database. A query value is percent-decoded once (URL syntax); a
keyword is taken literally.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from chatkeep.core.backend import InvalidOption, check_namespace, redact_url

__all__ = [
    "DEFAULT_KEY_PREFIX",
    "DEFAULT_NAMESPACE",
    "DEFAULT_URL",
    "SCHEMES",
    "Settings",
    "parse_settings",
]

DEFAULT_URL = "redis://127.0.0.1:6379/0"
DEFAULT_KEY_PREFIX = "chatkeep:"
#: Kept for code that imported it: the default key prefix (the 0.1 meaning of "namespace").
DEFAULT_NAMESPACE = DEFAULT_KEY_PREFIX

#: URL scheme -> (cluster?, TLS?)
SCHEMES: dict[str, tuple[bool, bool]] = {
    "redis": (False, False),
    "rediss": (False, True),
    "redis+cluster": (True, False),
    "rediss+cluster": (True, True),
}

_FLOATS = (
    "pool_timeout",
    "socket_timeout",
    "socket_connect_timeout",
    "retry_backoff",
    "retry_backoff_max",
)
_INTS = ("pool_size", "retries", "scan_count")
OPTION_NAMES = frozenset({"namespace", "key_prefix", "ttl", *_FLOATS, *_INTS})

#: redis-py options chatkeep sets itself: changing them would break the store.
_RESERVED_DRIVER_OPTIONS = frozenset(
    {
        "host",
        "port",
        "db",
        "url",
        "path",
        "decode_responses",
        "encoding",
        "encoding_errors",
        "connection_pool",
        "connection_pool_class",
        "retry",
        "retry_on_timeout",
        "retry_on_error",
        "cluster_error_retry_attempts",
        "startup_nodes",
        "single_connection_client",
        "max_connections",
        "reinitialize_steps",
        "protocol",
        "legacy_responses",
    }
)
#: Option names whose values are credentials (kept out of every message).
_SECRET_DRIVER_OPTIONS = frozenset({"password", "ssl_password", "username"})


def _driver_option_names(cluster: bool) -> frozenset[str]:
    """Every keyword redis-py's clients and connections accept (read off their signatures,
    so a new redis-py release keeps working)."""
    import inspect

    import redis
    import redis.asyncio.cluster
    import redis.cluster
    import redis.connection

    functions: list[Any] = [
        redis.Redis.__init__,
        redis.connection.AbstractConnection.__init__,
        redis.connection.Connection.__init__,
        redis.connection.SSLConnection.__init__,
    ]
    if cluster:
        functions += [
            redis.cluster.RedisCluster.__init__,
            redis.asyncio.cluster.RedisCluster.__init__,
        ]
    names: set[str] = set()
    for function in functions:
        for name, parameter in inspect.signature(function).parameters.items():
            if parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
                names.add(name)
    names.discard("self")
    return frozenset(names - _RESERVED_DRIVER_OPTIONS)


@dataclass(frozen=True)
class Settings:
    """Everything a RedisStore needs, parsed and validated. Holds credentials: never print
    it (its ``repr`` hides the connection URL)."""

    cluster: bool
    #: The URL redis-py parses: scheme ``redis``/``rediss``, one host, chatkeep's options
    #: removed. Contains the password, so it is excluded from the repr.
    driver_url: str = field(repr=False)
    #: Further cluster seed nodes as (host, port).
    seeds: tuple[tuple[str, int], ...]
    #: The URL as it may be shown: password replaced by ``***``.
    redacted_url: str
    #: The raw prefix of every key (``chatkeep:``).
    key_prefix: str
    #: The tenant (``None``: the default namespace).
    namespace: str | None
    ttl_ms: int | None
    pool_size: int
    pool_timeout: float
    socket_timeout: float
    socket_connect_timeout: float
    retries: int
    retry_backoff: float
    retry_backoff_max: float
    scan_count: int
    #: Strings that must never appear in messages (passwords, raw and percent-encoded).
    secrets: tuple[str, ...] = field(repr=False)
    #: Extra keyword options for redis-py.
    driver_options: dict[str, Any] = field(repr=False)


def _ttl_ms(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidOption(f"ttl must be seconds (int or float) or a timedelta, not {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidOption(f"ttl must be a positive number of seconds, not {value!r}")
    return max(1, math.ceil(seconds * 1000))


def _from_query(name: str, text: str) -> object:
    try:
        if name in _INTS:
            return int(text)
        if name in _FLOATS or name == "ttl":
            return float(text)
    except ValueError:
        raise InvalidOption(f"URL option {name}={text!r} is not a number") from None
    return text


def _parse_host(text: str, default_port: int = 6379) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):  # [IPv6]:port
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = text.rpartition(":") if ":" in text else (text, "", "")
    if not host:
        raise InvalidOption("a Redis URL needs a host name")
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise InvalidOption(f"invalid port {port_text!r} in the Redis URL") from None
    return host, port


def _tuning(ours: dict[str, object]) -> dict[str, Any]:
    """Validate chatkeep's own options, filling in the defaults."""
    key_prefix = ours.get("key_prefix", DEFAULT_KEY_PREFIX)
    if not isinstance(key_prefix, str):
        raise InvalidOption(f"key_prefix must be a str, not {type(key_prefix).__name__}")
    if "{" in key_prefix or "}" in key_prefix:
        raise InvalidOption(
            "the Redis key_prefix must not contain '{' or '}' (they would break the hash "
            f"tag that keeps a session on one cluster slot): {key_prefix!r}"
        )
    raw_namespace = ours.get("namespace")
    namespace = None if raw_namespace is None else check_namespace(raw_namespace)

    def number(name: str, default: float, minimum: float) -> float:
        value = ours.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidOption(f"{name} must be a number, not {value!r}")
        if not math.isfinite(value) or value < minimum:
            raise InvalidOption(f"{name} must be >= {minimum}, not {value!r}")
        return float(value)

    def integer(name: str, default: int, minimum: int) -> int:
        value = ours.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidOption(f"{name} must be an int, not {value!r}")
        if value < minimum:
            raise InvalidOption(f"{name} must be >= {minimum}, not {value!r}")
        return value

    return {
        "key_prefix": key_prefix,
        "namespace": namespace,
        "ttl_ms": _ttl_ms(ours.get("ttl")),
        "pool_size": integer("pool_size", 50, 1),
        "pool_timeout": number("pool_timeout", 20.0, 0.0),
        "socket_timeout": number("socket_timeout", 5.0, 0.001),
        "socket_connect_timeout": number("socket_connect_timeout", 5.0, 0.001),
        "retries": integer("retries", 3, 0),
        "retry_backoff": number("retry_backoff", 0.1, 0.0),
        "retry_backoff_max": number("retry_backoff_max", 2.0, 0.0),
        "scan_count": integer("scan_count", 1000, 1),
    }


def parse_settings(url: str, **options: Any) -> Settings:
    """Validate ``url`` and ``options`` and return the :class:`Settings` they describe."""
    if not isinstance(url, str):
        raise InvalidOption(f"the Redis URL must be a str, not {type(url).__name__}")
    redacted = redact_url(url)
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in SCHEMES:
        raise InvalidOption(
            f"not a Redis URL: {redacted!r} (use redis://, rediss://, redis+cluster:// or "
            "rediss+cluster://)"
        )
    cluster, tls = SCHEMES[scheme]
    parts = urlsplit("redis://" + rest)
    netloc = parts.netloc
    userinfo, at, hosts_text = netloc.rpartition("@")
    hosts = [host for host in hosts_text.split(",") if host.strip()] or ["127.0.0.1"]
    if len(hosts) > 1 and not cluster:
        raise InvalidOption(
            f"several hosts in {redacted!r}: a list of seed nodes needs redis+cluster://"
        )
    path = parts.path.strip("/")
    if path and not (path.isascii() and path.isdigit()):
        # redis-py would quietly fall back to database 0 for "/abc".
        raise InvalidOption(
            f"the Redis database in {redacted!r} must be a number such as /0, not {path!r}"
        )
    if cluster and path not in ("", "0"):
        raise InvalidOption(f"Redis Cluster has only database 0; {redacted!r} asks for {path!r}")

    # Split chatkeep's options from the driver's in the query string.
    ours: dict[str, object] = {}
    driver_query: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in OPTION_NAMES:
            ours[key] = _from_query(key, value)
        else:
            driver_query.append((key, value))
    unknown = set(options) - OPTION_NAMES
    driver_options = {key: options.pop(key) for key in unknown}
    ours.update(options)
    accepted = _driver_option_names(cluster)
    strangers = sorted(
        {key for key, _ in driver_query if key not in accepted and key != "password"}
        | {key for key in driver_options if key not in accepted}
    )
    if strangers:
        reserved = [key for key in strangers if key in _RESERVED_DRIVER_OPTIONS]
        hint = (
            f" ({', '.join(reserved)}: set by chatkeep itself)"
            if reserved
            else "; chatkeep's own options are " + ", ".join(sorted(OPTION_NAMES))
        )
        raise InvalidOption(
            f"unknown option(s) for the Redis backend: {', '.join(strangers)}{hint}"
        )

    secrets: list[str] = []
    if ":" in userinfo:
        raw = userinfo.split(":", 1)[1]
        secrets += [raw, unquote(raw)]
    for key, value in driver_query:
        if key == "password":
            secrets.append(value)
    for key in _SECRET_DRIVER_OPTIONS - {"username"}:
        given = driver_options.get(key)
        if isinstance(given, str):
            secrets.append(given)
    for key, text in driver_query:
        if key in _SECRET_DRIVER_OPTIONS - {"username"}:
            secrets.append(text)

    first = hosts[0]
    driver_url = (
        ("rediss" if tls else "redis")
        + "://"
        + (userinfo + at if at else "")
        + first
        + ("/" + path if path and not cluster else "")
        + ("?" + urlencode(driver_query) if driver_query else "")
    )
    seeds = tuple(_parse_host(host) for host in hosts[1:])
    _parse_host(first)  # validate now rather than on first use

    return Settings(
        cluster=cluster,
        driver_url=driver_url,
        seeds=seeds,
        redacted_url=redacted,
        **_tuning(ours),
        secrets=tuple(dict.fromkeys(secret for secret in secrets if secret)),
        driver_options=driver_options,
    )
