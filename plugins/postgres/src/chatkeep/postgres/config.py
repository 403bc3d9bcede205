"""Parsing and validating a ``postgresql://`` URL and the store's options.

Options come from keyword arguments or from the URL's query string (keywords win). chatkeep's
own query parameters are removed before the URL reaches libpq, which rejects names it does not
know; every other parameter (``sslmode``, ``host``, ``options``, ...) is passed through.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from chatkeep.core.backend import MAX_NAMESPACE_LENGTH, InvalidOption, check_namespace, redact_url

__all__ = [
    "MAX_NAMESPACE_LENGTH",
    "MAX_TABLE_PREFIX_LENGTH",
    "MODES",
    "PostgresOptions",
    "check_identifier",
    "parse_url",
    "password_forms",
    "scrub",
    "with_server_options",
    "with_statement_timeout",
]

#: Longest table prefix: PostgreSQL truncates identifiers at 63 bytes and the longest name
#: chatkeep derives from the prefix adds 25 characters.
MAX_TABLE_PREFIX_LENGTH = 32
# MAX_NAMESPACE_LENGTH (the kit's): a namespace is part of every index key; bounded so keys
# stay under btree's row limit.

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_PREFIX = re.compile(r"^(?:[a-z_][a-z0-9_]{0,31})?$")
#: Schemas the server owns besides every ``pg_*`` one (which PostgreSQL reserves): chatkeep
#: never creates tables there.
_RESERVED_SCHEMAS = frozenset({"information_schema"})
#: The values of the ``mode`` option: read-only, or read, write and create (the default).
MODES = ("ro", "rwc")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class PostgresOptions:
    """Every option the PostgreSQL backend understands, validated.

    ``schema`` / ``table_prefix``: where the tables live (``chatkeep.records`` by default).
    ``namespace``: a tenant key stored in every row; stores with different namespaces share
    tables but never see each other's sessions (``None``: the default namespace, stored as
    ``''``; others follow :func:`chatkeep.core.check_namespace`).
    ``ttl``: seconds of inactivity (no append) after which a session expires; ``None``
    keeps sessions forever.
    ``pool_min_size`` / ``pool_max_size`` / ``pool_timeout``: connection pool bounds and
    how long to wait for a connection.
    ``statement_timeout``: seconds, enforced by the server; ``None`` keeps the server's
    setting. ``connect_timeout``: seconds per connection attempt (libpq's option).
    ``retries``: extra attempts after a connection-level failure before ``StoreUnavailable``.
    ``migrate``: apply pending schema migrations on first use (else require them applied).
    ``list_page_size``: sessions fetched per round trip by ``list_sessions``.
    ``prepare_threshold``: psycopg's server-side prepare threshold; ``None`` disables
    prepared statements (PgBouncer in transaction mode before 1.21).
    ``application_name``: shown in ``pg_stat_activity`` unless the URL sets one.
    ``mode``: ``"rwc"`` (read, write, create the schema) or ``"ro"``: a read-only handle
    that never creates the schema, never migrates and never writes (its connections run
    read-only transactions, so the server refuses any write too).
    """

    schema: str = "chatkeep"
    table_prefix: str = ""
    namespace: str | None = None
    ttl: float | None = None
    pool_min_size: int = 1
    pool_max_size: int = 10
    pool_timeout: float = 5.0
    statement_timeout: float | None = None
    connect_timeout: int = 5
    retries: int = 3
    migrate: bool = True
    list_page_size: int = 500
    prepare_threshold: int | None = 5
    application_name: str = "chatkeep"
    mode: str = "rwc"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidOption(
                f"mode must be one of {', '.join(MODES)} (ro: a read-only handle), "
                f"not {self.mode!r}"
            )
        check_identifier(self.schema, "schema")
        check_identifier(self.table_prefix, "table_prefix")
        if self.namespace is not None:  # None: the default namespace (stored as "")
            check_namespace(self.namespace)
        if self.ttl is not None and not (self.ttl > 0 and math.isfinite(self.ttl)):
            raise InvalidOption(f"ttl must be a positive number of seconds or None, not {self.ttl}")
        if self.pool_min_size < 0 or self.pool_max_size < max(self.pool_min_size, 1):
            raise InvalidOption(
                "pool sizes must satisfy 0 <= pool_min_size <= pool_max_size and "
                f"pool_max_size >= 1 (got {self.pool_min_size} and {self.pool_max_size})"
            )
        for name in ("pool_timeout", "statement_timeout"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise InvalidOption(f"{name} must be a positive number of seconds")
        if self.connect_timeout < 1:
            raise InvalidOption("connect_timeout must be at least 1 second")
        if self.retries < 0:
            raise InvalidOption("retries must be >= 0")
        if self.list_page_size < 1:
            raise InvalidOption("list_page_size must be >= 1")
        if self.prepare_threshold is not None and self.prepare_threshold < 0:
            raise InvalidOption("prepare_threshold must be >= 0 or None")

    @property
    def read_only(self) -> bool:
        """Whether this is a read-only handle (``mode=ro``)."""
        return self.mode == "ro"


_FIELDS = {field.name: field for field in fields(PostgresOptions)}


def check_identifier(value: object, what: str) -> str:
    """Return ``value`` if it is a safe schema name or table prefix, else raise ValueError.

    Names are always quoted with ``psycopg.sql.Identifier`` as well; the pattern (lowercase
    ASCII letters, digits and ``_``) keeps them usable unquoted by a DBA.
    """
    pattern = _SCHEMA if what == "schema" else _PREFIX
    if not isinstance(value, str) or not pattern.match(value):
        limit = 63 if what == "schema" else MAX_TABLE_PREFIX_LENGTH
        empty = "" if what == "schema" else " or empty"
        raise InvalidOption(
            f"invalid {what} {value!r}: use lowercase ASCII letters, digits and '_', "
            f"starting with a letter or '_', at most {limit} characters{empty}"
        )
    if what == "schema" and (value.startswith("pg_") or value in _RESERVED_SCHEMAS):
        raise InvalidOption(
            f"invalid schema {value!r}: PostgreSQL reserves pg_* schemas and "
            "information_schema; choose another"
        )
    return value


def _coerce(name: str, value: Any) -> Any:
    """Convert a query-string or keyword value to the option's type."""
    if name == "ttl" and isinstance(value, timedelta):
        return value.total_seconds()
    if not isinstance(value, str):
        if name in ("ttl", "pool_timeout", "statement_timeout") and isinstance(value, int):
            return float(value)
        return value
    text = value.strip()
    if name in ("ttl", "statement_timeout", "prepare_threshold") and text.lower() in (
        "",
        "none",
    ):
        return None
    try:
        if name in ("ttl", "pool_timeout", "statement_timeout"):
            return float(text)
        if name in (
            "pool_min_size",
            "pool_max_size",
            "connect_timeout",
            "retries",
            "list_page_size",
            "prepare_threshold",
        ):
            return int(text)
    except ValueError:
        raise InvalidOption(f"option {name}={value!r} is not a number") from None
    if name == "migrate":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise InvalidOption(f"option migrate={value!r} must be true or false")
    return value


def _check_types(options: Mapping[str, Any]) -> None:
    numbers = {
        "ttl": (int, float),
        "pool_timeout": (int, float),
        "statement_timeout": (int, float),
        "pool_min_size": (int,),
        "pool_max_size": (int,),
        "connect_timeout": (int,),
        "retries": (int,),
        "list_page_size": (int,),
        "prepare_threshold": (int,),
    }
    for name, value in options.items():
        if name in numbers:
            if value is None and name in ("ttl", "statement_timeout", "prepare_threshold"):
                continue
            if isinstance(value, bool) or not isinstance(value, numbers[name]):
                raise InvalidOption(f"option {name} must be a number, not {type(value).__name__}")
        elif name == "migrate" and not isinstance(value, bool):
            raise InvalidOption("option migrate must be a bool")
        elif name == "namespace" and value is None:
            continue
        elif name in ("schema", "table_prefix", "namespace", "application_name", "mode") and not (
            isinstance(value, str)
        ):
            raise InvalidOption(f"option {name} must be a str, not {type(value).__name__}")


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every non-empty string of ``secrets`` replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def password_forms(url: str) -> tuple[str, ...]:
    """The password of ``url`` as written and percent-decoded (for scrubbing messages)."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return ()
    userinfo = netloc.rpartition("@")[0]
    if ":" not in userinfo:
        return ()
    raw = userinfo.split(":", 1)[1]
    return tuple({raw, unquote(raw), quote(unquote(raw), safe="")} - {""})


def parse_url(url: str, options: Mapping[str, Any]) -> tuple[dict[str, Any], PostgresOptions]:
    """Split ``url`` plus keyword ``options`` into libpq connection parameters and options.

    Raises ``ValueError`` for a malformed URL or option value and ``TypeError`` for an unknown
    keyword option. No message ever contains the URL's password.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    unknown = sorted(set(options) - set(_FIELDS))
    if unknown:
        raise InvalidOption(
            f"unknown PostgreSQL store option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(_FIELDS))}"
        )
    secrets = password_forms(url)
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidOption(f"invalid PostgreSQL URL {shown}: {scrub(str(exc), secrets)}") from None
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        raise InvalidOption(f"not a PostgreSQL URL (postgresql:// or postgres://): {shown}")
    ours: dict[str, Any] = {}
    passed: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _FIELDS:
            ours[key] = _coerce(key, value)
        else:
            passed.append((key, value))
    for key, value in options.items():
        ours[key] = _coerce(key, value)
    _check_types(ours)
    settings = PostgresOptions(**ours)
    # libpq understands both schemes; normalise so its URI parser always accepts the URL.
    # Percent-encode (libpq's URI parser does not read '+' as a space, as in `options`).
    libpq_url = urlunsplit(
        ("postgresql", parts.netloc, parts.path, urlencode(passed, quote_via=quote), "")
    )
    from psycopg.conninfo import conninfo_to_dict

    try:
        params: dict[str, Any] = dict(conninfo_to_dict(libpq_url))
    except Exception as exc:  # psycopg.ProgrammingError; its text may quote the password
        raise InvalidOption(f"invalid PostgreSQL URL {shown}: {scrub(str(exc), secrets)}") from None
    params.setdefault("application_name", settings.application_name)
    params.setdefault("connect_timeout", settings.connect_timeout)
    return params, settings


def with_statement_timeout(params: Mapping[str, Any], seconds: float | None) -> dict[str, Any]:
    """``params`` with libpq ``options`` extended to set ``statement_timeout`` (if given)."""
    result = dict(params)
    if seconds is not None:
        milliseconds = max(1, round(seconds * 1000))
        existing = str(result.get("options") or "")
        result["options"] = f"{existing} -c statement_timeout={milliseconds}".strip()
    return result


def with_server_options(
    params: Mapping[str, Any], *, statement_timeout: float | None, read_only: bool
) -> dict[str, Any]:
    """``params`` with libpq ``options`` extended for the store's session settings: the
    statement timeout (if given) and, for a read-only handle, read-only transactions by
    default (so the server itself refuses a write)."""
    result = with_statement_timeout(params, statement_timeout)
    if read_only:
        existing = str(result.get("options") or "")
        result["options"] = f"{existing} -c default_transaction_read_only=on".strip()
    return result
