"""Options of the S3 store: parsed from ``s3://bucket/prefix?...`` and keyword arguments.

One rule for names, as on every chatkeep backend: a ``%XX`` escape in the URL's path or
query is decoded once, by URL parsing (``s3://b/a%2Fb`` is the prefix ``a/b``); a keyword
argument is taken literally (``prefix="a%2Fb"`` is those five characters); a keyword wins
over the same option in the URL.

Credentials come from boto3's usual chain (environment, shared config and credentials
files, SSO, instance or container roles). They may also be given as keyword arguments,
never in a URL (not in the ``s3://`` URL, not in ``endpoint_url``): URLs end up in logs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from chatkeep.core.backend import InvalidOption, check_namespace, redact_url

from .layout import check_prefix

__all__ = ["S3Options", "make_options", "parse_url"]

_CREDENTIAL_NAMES = frozenset(
    {"aws_access_key_id", "aws_secret_access_key", "aws_session_token", "client", "session"}
)
_BAD_BUCKET_CHARACTERS = frozenset("/?#%@\\ \t\r\n")


@dataclass(frozen=True)
class S3Options:
    """Everything that configures an :class:`~chatkeep.s3.store.S3Store`.

    Every field but the credentials may appear in the URL query (``region`` also as
    ``region_name``, ``profile`` also as ``profile_name``).
    """

    bucket: str
    #: Key prefix all sessions live under (``""`` for the bucket root).
    prefix: str = ""
    #: Tenant of the store: sessions of different namespaces never see each other.
    namespace: str | None = None
    #: Endpoint of an S3-compatible store (MinIO, Ceph, R2, moto, ...); ``None`` for AWS.
    endpoint_url: str | None = None
    region: str | None = None
    #: A named profile of the shared AWS config files.
    profile: str | None = None
    #: Threads fetching objects in parallel (also the HTTP connection pool size).
    max_workers: int = 16
    #: Attempts per request made by botocore's retry handler (5xx, throttling, timeouts).
    retries: int = 5
    retry_mode: str = "standard"
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    #: ``"path"``, ``"virtual"`` or ``"auto"``; many S3-compatible stores need ``"path"``.
    addressing_style: str | None = None
    #: botocore's ``request_checksum_calculation``: ``"when_supported"`` (its default) or
    #: ``"when_required"`` for stores that reject the newer CRC checksums.
    checksum: str | None = None
    #: Bytes of decoded objects kept in memory; objects never change, so a cached one
    #: saves its GET on every later read.
    cache_bytes: int = 64 * 1024 * 1024
    #: Chunks larger than this are read with ranged GETs when only part is needed.
    range_threshold: int = 512 * 1024
    #: How many positions one append may lose to other writers before it gives up.
    max_conflicts: int = 200
    #: A new session rolls over (merges its newest segments into a chunk and writes a
    #: table of contents) every this many appends (at least 2).
    rollover_segments: int = 16
    #: Largest chunk a roll-over writes, in records and in bytes.
    max_chunk_records: int = 10_000
    max_chunk_bytes: int = 8 * 1024 * 1024
    #: Look for a session in the layout of chatkeep-s3 0.1 when it is empty in this one,
    #: and refuse to use it until it is migrated (one LIST per such session and handle).
    legacy_check: bool = True
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)
    aws_session_token: str | None = field(default=None, repr=False)
    #: A ready ``boto3`` S3 client (wins over every connection option above).
    client: Any = field(default=None, repr=False, compare=False)
    #: A ``boto3.Session`` to make the client from.
    session: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, kind in _TYPES.items():
            value = getattr(self, name)
            if value is not None and not _is(value, kind):
                raise InvalidOption(f"S3 option {name} must be {kind.__name__}")
        if not self.bucket or _BAD_BUCKET_CHARACTERS & set(self.bucket):
            raise InvalidOption(
                "the S3 store needs a bucket name without '/', '?', '#', '%' or spaces: "
                "s3://BUCKET/prefix"
            )
        object.__setattr__(self, "prefix", check_prefix(self.prefix))
        if self.namespace is not None:
            check_namespace(self.namespace)
        if self.endpoint_url is not None:
            _check_endpoint(self.endpoint_url)
        for name in ("max_workers", "retries", "max_conflicts", "max_chunk_bytes"):
            if getattr(self, name) < 1:
                raise InvalidOption(f"{name} must be at least 1")
        if self.max_chunk_records < 2:
            raise InvalidOption("max_chunk_records must be at least 2")
        if not 2 <= self.rollover_segments <= 10_000:
            raise InvalidOption("rollover_segments must be between 2 and 10,000")
        if self.addressing_style not in (None, "path", "virtual", "auto"):
            raise InvalidOption("addressing_style must be 'path', 'virtual' or 'auto'")
        if self.checksum not in (None, "when_supported", "when_required"):
            raise InvalidOption("checksum must be 'when_supported' or 'when_required'")
        if self.retry_mode not in ("standard", "adaptive", "legacy"):
            raise InvalidOption("retry_mode must be 'standard', 'adaptive' or 'legacy'")
        if self.cache_bytes < 0 or self.range_threshold < 0:
            raise InvalidOption("cache_bytes and range_threshold must not be negative")
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise InvalidOption("connect_timeout and read_timeout must be positive")

    def describe(self) -> str:
        """A credential-free description for reprs and error messages."""
        where = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        if self.namespace is not None:
            where += f" (namespace {self.namespace!r})"
        if self.endpoint_url:
            where += f" at {redact_url(self.endpoint_url)}"
        return where


_TYPES: dict[str, type] = {
    "bucket": str,
    "prefix": str,
    "namespace": str,
    "endpoint_url": str,
    "region": str,
    "profile": str,
    "max_workers": int,
    "retries": int,
    "retry_mode": str,
    "connect_timeout": float,
    "read_timeout": float,
    "addressing_style": str,
    "checksum": str,
    "cache_bytes": int,
    "range_threshold": int,
    "max_conflicts": int,
    "rollover_segments": int,
    "max_chunk_records": int,
    "max_chunk_bytes": int,
    "legacy_check": bool,
    "aws_access_key_id": str,
    "aws_secret_access_key": str,
    "aws_session_token": str,
}


def _is(value: object, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _check_endpoint(endpoint: str) -> None:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidOption("endpoint_url must be an http:// or https:// URL with a host")
    if "@" in parts.netloc:
        raise InvalidOption(
            "endpoint_url must not contain credentials (user:password@); S3 requests are "
            "signed with the AWS credentials (environment, profile, role or keyword options)"
        )
    if parts.query or parts.fragment:
        raise InvalidOption("endpoint_url must not have a query or fragment")


_ALIASES = {"region_name": "region", "profile_name": "profile"}
_FIELDS = {f.name: f for f in dataclasses.fields(S3Options)}
_URL_FIELDS = sorted(set(_FIELDS) - _CREDENTIAL_NAMES - {"bucket", "prefix"})


def _coerce(name: str, raw: str) -> Any:
    default = _FIELDS[name].default
    try:
        if isinstance(default, bool):
            lowered = raw.lower()
            if lowered not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                raise ValueError(raw)
            return lowered in ("1", "true", "yes", "on")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        kind = "true or false" if isinstance(default, bool) else "a number"
        raise InvalidOption(f"S3 URL option {name!r} must be {kind}") from None
    return raw


def parse_url(url: str, **options: Any) -> S3Options:
    """Build :class:`S3Options` from ``s3://bucket/prefix?option=value&...`` and keyword
    options (which win over the query).

    >>> parse_url("s3://chats/prod?region=eu-west-1&max_workers=8").max_workers
    8
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "s3":
        raise InvalidOption(f"not an s3:// URL: {redact_url(url)!r}")
    if "@" in parts.netloc:
        raise InvalidOption(
            "credentials do not belong in an s3:// URL; use the AWS credential chain "
            "(environment, profile, role) or keyword arguments"
        )
    if parts.fragment:
        raise InvalidOption("an s3:// URL has no #fragment")
    values: dict[str, Any] = {"bucket": unquote(parts.netloc), "prefix": unquote(parts.path)}
    for raw_name, raw_value in parse_qsl(parts.query, keep_blank_values=True):
        name = _ALIASES.get(raw_name, raw_name)
        if name in _CREDENTIAL_NAMES:
            raise InvalidOption(
                f"{raw_name!r} must not appear in the URL (URLs get logged); pass it as a "
                "keyword argument or use the AWS credential chain"
            )
        if name not in _URL_FIELDS:
            raise InvalidOption(
                f"unknown S3 URL option {raw_name!r}; known: {', '.join(_URL_FIELDS)}"
            )
        values[name] = _coerce(name, raw_value)
    return make_options(values, options)


def make_options(base: dict[str, Any], options: dict[str, Any]) -> S3Options:
    """:class:`S3Options` from ``base`` (already checked) updated with keyword ``options``
    (aliases allowed; an unknown name raises :class:`InvalidOption`)."""
    values = dict(base)
    for raw_name, value in options.items():
        name = _ALIASES.get(raw_name, raw_name)
        if name not in _FIELDS:
            raise InvalidOption(
                f"unknown S3 store option {raw_name!r}; known: {', '.join(sorted(_FIELDS))}"
            )
        values[name] = value
    return S3Options(**values)
