"""The few S3 requests the store makes, with their outcomes sorted into what they mean.

Besides success, a request ends in one of these:

* :class:`Conflict`: a conditional create lost (412 ``PreconditionFailed``, or 409
  ``ConditionalRequestConflict`` while another conditional write of the key is in flight);
* :class:`Changed`: a read conditioned on an ETag found another version, or none;
* :class:`UnknownOutcome`: a write whose result never arrived (a timeout, a 5xx after
  botocore's retries, a dropped connection): it may or may not have happened;
* a chatkeep error from the driver-error table (:mod:`chatkeep.s3.faults`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from botocore import exceptions as boto  # type: ignore[import-untyped]

from chatkeep.core.backend import InvalidOption, StoreUnavailable

from . import scrubbing
from .config import S3Options
from .faults import error_code, faults_for, http_status

__all__ = ["Bucket", "Changed", "Conflict", "Listed", "UnknownOutcome", "make_client"]

#: Folders (sessions) per delimiter LIST page of ``list_folders`` (S3's maximum, 1,000). The
#: repository's conformance run lowers it so its listing test crosses page boundaries with
#: a few hundred sessions instead of thousands.
FOLDER_PAGE = 1000

_TRANSIENT = (
    boto.HTTPClientError,
    boto.ConnectionError,
    boto.IncompleteReadError,
    boto.ChecksumError,
)
_UNKNOWN_CODES = frozenset({"RequestTimeout", "InternalError", "ServiceUnavailable", "SlowDown"})


class Conflict(Exception):
    """A conditional create lost: another writer holds the key (or is writing it)."""


class Changed(Exception):
    """An object is not the version an ``If-Match`` asked for (replaced or gone)."""


class UnknownOutcome(Exception):
    """A write failed in a way that leaves open whether it took effect."""


_sessions: dict[str | None, Any] = {}
_sessions_lock = threading.Lock()


def make_client(options: S3Options) -> Any:
    """A boto3 S3 client for ``options`` (or the client given in them)."""
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    scrubbing.protect(
        options.aws_access_key_id, options.aws_secret_access_key, options.aws_session_token
    )
    if options.client is not None:
        return options.client
    config: dict[str, Any] = {
        "retries": {"max_attempts": options.retries, "mode": options.retry_mode},
        "connect_timeout": options.connect_timeout,
        "read_timeout": options.read_timeout,
        # One connection per fetching thread, plus a few for appends from other threads.
        "max_pool_connections": options.max_workers + 4,
    }
    if options.addressing_style:
        config["s3"] = {"addressing_style": options.addressing_style}
    if options.checksum:
        config["request_checksum_calculation"] = options.checksum
        config["response_checksum_validation"] = options.checksum
    session = options.session
    with _sessions_lock:
        try:
            if session is None:
                # Sessions are slow to make (they load the service model) and hold no
                # per-store state: share one per profile. Explicit keys go to the client.
                session = _sessions.get(options.profile)
                if session is None:
                    session = boto3.session.Session(profile_name=options.profile)
                    _sessions[options.profile] = session
            # A boto3 session is not thread-safe; the clients it makes are.
            client = session.client(
                "s3",
                endpoint_url=options.endpoint_url,
                region_name=options.region,
                aws_access_key_id=options.aws_access_key_id,
                aws_secret_access_key=options.aws_secret_access_key,
                aws_session_token=options.aws_session_token,
                config=Config(**config),
            )
        except (boto.BotoCoreError, ValueError) as exc:
            # botocore's messages here name settings, never their secret values.
            raise InvalidOption(
                f"could not create the S3 client: {scrubbing.scrub(str(exc))}"
            ) from None
    scrubbing.protect()  # loggers of botocore modules imported while making the client
    return client


@dataclass(frozen=True, slots=True)
class Listed:
    """One object of a listing."""

    key: str
    etag: str
    size: int


class Bucket:
    """The bucket a store writes to, and the requests it makes there."""

    def __init__(self, client: Any, options: S3Options) -> None:
        self.client = client
        self.name = options.bucket
        self.where = options.describe()
        self.faults = faults_for(self.where)

    # -- listing ----------------------------------------------------------------------

    def list_page(
        self,
        prefix: str,
        *,
        start_after: str | None = None,
        token: str | None = None,
        max_keys: int = 1000,
    ) -> tuple[list[Listed], str | None]:
        """One page of objects under ``prefix`` in key order, and the next page's token."""
        kwargs: dict[str, Any] = {"Bucket": self.name, "Prefix": prefix, "MaxKeys": max_keys}
        if start_after:
            kwargs["StartAfter"] = start_after
        if token:
            kwargs["ContinuationToken"] = token
        with self.faults.mapped():
            page = self.client.list_objects_v2(**kwargs)
        items = [
            Listed(item["Key"], str(item.get("ETag", "")).strip('"'), int(item.get("Size", 0)))
            for item in page.get("Contents", ())
        ]
        following = page.get("NextContinuationToken")
        return items, (str(following) if page.get("IsTruncated") and following else None)

    def list_objects(self, prefix: str, *, start_after: str | None = None) -> Iterator[Listed]:
        """Every object under ``prefix`` (after ``start_after``), lazily, a page at a time."""
        token: str | None = None
        while True:
            items, token = self.list_page(prefix, start_after=start_after, token=token)
            yield from items
            if token is None:
                return

    def list_folders(self, prefix: str) -> Iterator[str]:
        """The ``/``-delimited common prefixes under ``prefix``, lazily, page by page."""
        kwargs: dict[str, Any] = {
            "Bucket": self.name,
            "Prefix": prefix,
            "Delimiter": "/",
            "MaxKeys": FOLDER_PAGE,
        }
        while True:
            with self.faults.mapped():
                page = self.client.list_objects_v2(**kwargs)
            for item in page.get("CommonPrefixes", ()):
                yield item["Prefix"]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return
            kwargs["ContinuationToken"] = token

    # -- reads ------------------------------------------------------------------------

    def get(
        self,
        key: str,
        *,
        etag: str | None = None,
        first: int | None = None,
        last: int | None = None,
    ) -> tuple[bytes, str] | None:
        """The object's bytes (``first..last`` inclusive when given) and ETag, or ``None``
        if there is no such object. With ``etag``, raises :class:`Changed` when the key
        holds another version or none."""
        kwargs: dict[str, Any] = {"Bucket": self.name, "Key": key}
        if etag:
            kwargs["IfMatch"] = f'"{etag}"'
        if first is not None:
            kwargs["Range"] = f"bytes={first}-{'' if last is None else last}"
        for attempt in range(3):
            with self.faults.mapped():
                try:
                    response = self.client.get_object(**kwargs)
                    body: bytes = response["Body"].read()
                    return body, str(response.get("ETag", "")).strip('"')
                except boto.ClientError as exc:
                    code, status = error_code(exc), http_status(exc)
                    if code in ("NoSuchKey", "404") or status == 404:
                        if etag:
                            raise Changed(key) from None
                        return None
                    if status == 412 or code == "PreconditionFailed":
                        raise Changed(key) from None
                    if status == 416 or code == "InvalidRange":
                        return b"", ""
                    if status < 500 or attempt == 2:
                        raise
                except _TRANSIENT:
                    # botocore retries connecting, not a body cut off while streaming.
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    # -- writes -----------------------------------------------------------------------

    def create(self, key: str, body: bytes) -> str:
        """Write ``key`` only if it does not exist yet (``If-None-Match: *``); its ETag.

        Raises :class:`Conflict` if another writer has it and :class:`UnknownOutcome` if
        the answer never came.
        """
        with self.faults.mapped():
            try:
                response = self.client.put_object(
                    Bucket=self.name, Key=key, Body=body, IfNoneMatch="*"
                )
            except boto.ClientError as exc:
                code, status = error_code(exc), http_status(exc)
                if status in (409, 412) or code in (
                    "PreconditionFailed",
                    "ConditionalRequestConflict",
                ):
                    raise Conflict(key) from None
                if status >= 500 or code in _UNKNOWN_CODES:
                    raise UnknownOutcome(code or str(status)) from None
                raise
            except _TRANSIENT as exc:
                raise UnknownOutcome(type(exc).__name__) from None
        return str(response.get("ETag", "")).strip('"')

    def put(self, key: str, body: bytes) -> None:
        """Write ``key`` unconditionally (only for content that never differs)."""
        with self.faults.mapped():
            self.client.put_object(Bucket=self.name, Key=key, Body=body)

    def delete(self, keys: Sequence[str]) -> None:
        """Delete ``keys``, 1,000 per ``DeleteObjects`` request (the API's limit)."""
        for offset in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[offset : offset + 1000]]
            with self.faults.mapped():
                response = self.client.delete_objects(
                    Bucket=self.name, Delete={"Objects": batch, "Quiet": True}
                )
            errors = response.get("Errors") or []
            if errors:
                code = errors[0].get("Code", "error")
                raise StoreUnavailable(
                    f"S3 DeleteObjects failed for {len(errors)} keys on {self.where}: {code}"
                )

    def close(self) -> None:
        """Close the client's HTTP connections."""
        close = getattr(self.client, "close", None)
        if close is not None:
            close()
