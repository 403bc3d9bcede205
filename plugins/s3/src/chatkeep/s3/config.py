"""Options of the S3 store: parsed from ``s3://bucket/prefix?...`` and keyword arguments.

Credentials come from boto3's usual chain (environment, shared config and credentials
files, SSO, instance or container roles). They may also be given as keyword arguments,
never in the URL: URLs end up in logs and process listings.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from chatkeep.core import InvalidOption, redact_url

__all__ = ["S3Options", "make_options", "parse_url"]

_CREDENTIAL_NAMES = frozenset(
    {"aws_access_key_id", "aws_secret_access_key", "aws_session_token", "client", "session"}
)


@dataclass(frozen=True)
class S3Options:
    """Everything that configures an :class:`~chatkeep.s3.store.S3Store`.

    Every field but the credentials may appear in the URL query (``region`` also as
    ``region_name``, ``profile`` also as ``profile_name``).
    """

    bucket: str
    #: Key prefix all sessions live under (``""`` for the bucket root).
    prefix: str = ""
    #: Endpoint of an S3-compatible store (MinIO, Ceph, R2, moto, ...); ``None`` for AWS.
    endpoint_url: str | None = None
    region: str | None = None
    #: A named profile of the shared AWS config files.
    profile: str | None = None
    #: Threads fetching segments in parallel (also the HTTP connection pool size).
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
    #: Bytes of decoded segments kept in memory; segments never change, so a cached one
    #: saves its GET on every later read.
    cache_bytes: int = 64 * 1024 * 1024
    #: Chunks larger than this are read with ranged GETs when only part is needed.
    range_threshold: int = 512 * 1024
    #: How many times one append retries after losing a position to another writer.
    max_conflicts: int = 200
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)
    aws_session_token: str | None = field(default=None, repr=False)
    #: A ready ``boto3`` S3 client (wins over every connection option above).
    client: Any = field(default=None, repr=False, compare=False)
    #: A ``boto3.Session`` to make the client from.
    session: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.bucket:
            raise InvalidOption("the S3 store needs a bucket: s3://BUCKET/prefix")
        if self.max_workers < 1:
            raise InvalidOption("max_workers must be at least 1")
        if self.retries < 1:
            raise InvalidOption("retries must be at least 1")
        if self.max_conflicts < 1:
            raise InvalidOption("max_conflicts must be at least 1")
        if self.addressing_style not in (None, "path", "virtual", "auto"):
            raise InvalidOption("addressing_style must be 'path', 'virtual' or 'auto'")
        if self.checksum not in (None, "when_supported", "when_required"):
            raise InvalidOption("checksum must be 'when_supported' or 'when_required'")
        if self.cache_bytes < 0 or self.range_threshold < 0:
            raise InvalidOption("cache_bytes and range_threshold must not be negative")

    def describe(self) -> str:
        """A credential-free description for reprs and error messages."""
        where = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        if self.endpoint_url:
            where += f" at {redact_url(self.endpoint_url)}"
        return where


_ALIASES = {"region_name": "region", "profile_name": "profile"}
_FIELDS = {f.name: f for f in dataclasses.fields(S3Options)}
_URL_FIELDS = sorted(set(_FIELDS) - _CREDENTIAL_NAMES - {"bucket", "prefix"})


def _coerce(name: str, raw: str) -> Any:
    default = _FIELDS[name].default
    try:
        if isinstance(default, bool):
            return raw.lower() in ("1", "true", "yes", "on")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        raise InvalidOption(f"S3 URL option {name!r} must be a number") from None
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
    values: dict[str, Any] = {"bucket": parts.netloc, "prefix": parts.path.strip("/")}
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
    (aliases allowed; unknown names raise ``TypeError``)."""
    values = dict(base)
    for raw_name, value in options.items():
        name = _ALIASES.get(raw_name, raw_name)
        if name not in _FIELDS:
            raise InvalidOption(f"unknown S3 store option {raw_name!r}")
        values[name] = value
    return S3Options(**values)
