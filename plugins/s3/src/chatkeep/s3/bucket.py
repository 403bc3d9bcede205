"""The few S3 requests the store makes, with their failures sorted into what they mean.

botocore already retries throttling, 5xx answers and dropped connections (``retries``
option). What reaches this module is final, and falls in one of these buckets:

* :class:`Conflict`: a conditional write lost (412 ``PreconditionFailed``, or 409
  ``ConditionalRequestConflict`` while another conditional write of the key is in flight).
* :class:`Changed`: a read or guard write conditioned on an ETag found another object.
* :class:`UnknownOutcome`: a write whose result we never heard (timeout, 5xx, dropped
  connection); it may or may not have happened.
* :class:`~chatkeep.core.StoreUnavailable`: anything else (no bucket, access denied, the
  service unreachable on a read). Messages name the operation and bucket, never credentials.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from botocore import exceptions as boto_errors  # type: ignore[import-untyped]

from chatkeep.core import StoreUnavailable

from .config import S3Options

__all__ = [
    "Bucket",
    "Changed",
    "Conflict",
    "Listed",
    "UnknownOutcome",
    "make_client",
]

_TRANSIENT = (
    boto_errors.HTTPClientError,
    boto_errors.ConnectionError,
    boto_errors.IncompleteReadError,
    boto_errors.ChecksumError,
)
_UNKNOWN_CODES = frozenset({"RequestTimeout", "InternalError", "ServiceUnavailable", "SlowDown"})
_HINTS = {
    "NoSuchBucket": "create the bucket first (or fix the bucket name in the URL)",
    "AccessDenied": "check the IAM policy (see the chatkeep-s3 README for the actions needed)",
    "InvalidAccessKeyId": "check the AWS credentials in use",
    "SignatureDoesNotMatch": "check the AWS secret key and the region",
}


class Conflict(Exception):
    """A conditional create lost: another writer holds the key (or is writing it)."""


class Changed(Exception):
    """An object is not the version an ``If-Match`` asked for (replaced, guarded or gone)."""


class UnknownOutcome(Exception):
    """A write failed in a way that leaves open whether it took effect."""


_sessions: dict[str | None, Any] = {}
_sessions_lock = threading.Lock()


def make_client(options: S3Options) -> Any:
    """A boto3 S3 client for ``options`` (or the client given in them)."""
    if options.client is not None:
        return options.client
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

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
        if session is None:
            # Sessions are slow to make (they load the service model) and hold no
            # per-store state: share one per profile. Explicit keys go to the client.
            session = _sessions.get(options.profile)
            if session is None:
                try:
                    session = boto3.session.Session(profile_name=options.profile)
                except boto_errors.BotoCoreError as exc:
                    raise ValueError(f"could not create the S3 client: {exc}") from None
                _sessions[options.profile] = session
        # A boto3 session is not thread-safe; the clients it makes are.
        try:
            return session.client(
                "s3",
                endpoint_url=options.endpoint_url,
                region_name=options.region,
                aws_access_key_id=options.aws_access_key_id,
                aws_secret_access_key=options.aws_secret_access_key,
                aws_session_token=options.aws_session_token,
                config=Config(**config),
            )
        except (boto_errors.BotoCoreError, ValueError) as exc:
            # botocore's messages here name settings, never their secret values.
            raise ValueError(f"could not create the S3 client: {exc}") from None


def _status(exc: Any) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code") or "")


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
        self._where = options.describe()

    def unavailable(self, operation: str, exc: BaseException) -> StoreUnavailable:
        """A :class:`StoreUnavailable` naming the operation, without credentials."""
        if isinstance(exc, boto_errors.ClientError):
            code = _code(exc) or str(_status(exc))
            hint = _HINTS.get(code, "")
            detail = f"{code}" + (f"; {hint}" if hint else "")
        elif isinstance(exc, boto_errors.NoCredentialsError):
            detail = "no AWS credentials found (environment, profile or role)"
        else:
            detail = type(exc).__name__
        return StoreUnavailable(f"S3 {operation} failed on {self._where}: {detail}")

    # -- listing ----------------------------------------------------------------------

    def list_page(
        self,
        prefix: str,
        start_after: str | None = None,
        token: str | None = None,
        max_keys: int = 1000,
    ) -> tuple[list[Listed], str | None]:
        """One page (up to ``max_keys`` objects) under ``prefix``, and the next page's token."""
        kwargs: dict[str, Any] = {"Bucket": self.name, "Prefix": prefix, "MaxKeys": max_keys}
        if start_after:
            kwargs["StartAfter"] = start_after
        if token:
            kwargs["ContinuationToken"] = token
        try:
            page = self.client.list_objects_v2(**kwargs)
        except (boto_errors.ClientError, boto_errors.BotoCoreError) as exc:
            raise self.unavailable("ListObjectsV2", exc) from exc
        items = [
            Listed(item["Key"], str(item.get("ETag", "")), int(item.get("Size", 0)))
            for item in page.get("Contents", ())
        ]
        following = page.get("NextContinuationToken")
        return items, (str(following) if page.get("IsTruncated") and following else None)

    def list_objects(
        self, prefix: str, start_after: str | None = None, token: str | None = None
    ) -> Iterator[Listed]:
        """Every object under ``prefix`` after ``start_after`` (or from a continuation
        ``token``), in key order, one request per 1,000."""
        while True:
            items, token = self.list_page(prefix, start_after, token)
            yield from items
            if token is None:
                return

    def list_folders(self, prefix: str) -> Iterator[str]:
        """The ``/``-delimited common prefixes under ``prefix``, page by page."""
        kwargs: dict[str, Any] = {"Bucket": self.name, "Prefix": prefix, "Delimiter": "/"}
        while True:
            try:
                page = self.client.list_objects_v2(**kwargs)
            except (boto_errors.ClientError, boto_errors.BotoCoreError) as exc:
                raise self.unavailable("ListObjectsV2", exc) from exc
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
        if there is no such object.

        With ``etag``, raises :class:`Changed` when the key now holds another version.
        """
        kwargs: dict[str, Any] = {"Bucket": self.name, "Key": key}
        if etag:
            kwargs["IfMatch"] = etag
        if first is not None:
            kwargs["Range"] = f"bytes={first}-{'' if last is None else last}"
        for attempt in range(3):
            try:
                response = self.client.get_object(**kwargs)
                body: bytes = response["Body"].read()
                return body, str(response.get("ETag", ""))
            except boto_errors.ClientError as exc:
                code, status = _code(exc), _status(exc)
                if code in ("NoSuchKey", "404") or status == 404:
                    if etag:
                        raise Changed(key) from None
                    return None
                if status == 412 or code == "PreconditionFailed":
                    raise Changed(key) from None
                if status >= 500 and attempt < 2:
                    continue
                raise self.unavailable("GetObject", exc) from exc
            except _TRANSIENT as exc:
                # botocore retries connecting, but not a body cut off while streaming.
                if attempt < 2:
                    continue
                raise self.unavailable("GetObject", exc) from exc
            except boto_errors.BotoCoreError as exc:
                raise self.unavailable("GetObject", exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def exists(self, key: str, etag: str) -> bool:
        """Whether ``key`` still holds the version ``etag``."""
        try:
            self.client.head_object(Bucket=self.name, Key=key, IfMatch=etag)
        except boto_errors.ClientError as exc:
            if _status(exc) in (404, 412) or _code(exc) in ("NoSuchKey", "404", "412"):
                return False
            raise self.unavailable("HeadObject", exc) from exc
        except boto_errors.BotoCoreError as exc:
            raise self.unavailable("HeadObject", exc) from exc
        return True

    # -- writes -----------------------------------------------------------------------

    def create(self, key: str, body: bytes) -> str:
        """Write ``key`` only if it does not exist yet (``If-None-Match: *``); its ETag.

        Raises :class:`Conflict` if another writer has it and :class:`UnknownOutcome` if
        the answer never came.
        """
        try:
            response = self.client.put_object(Bucket=self.name, Key=key, Body=body, IfNoneMatch="*")
        except boto_errors.ClientError as exc:
            code, status = _code(exc), _status(exc)
            if status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise Conflict(key) from None
            if status >= 500 or code in _UNKNOWN_CODES:
                raise UnknownOutcome(code or str(status)) from exc
            raise self.unavailable("PutObject", exc) from exc
        except _TRANSIENT as exc:
            raise UnknownOutcome(type(exc).__name__) from exc
        except boto_errors.BotoCoreError as exc:
            raise self.unavailable("PutObject", exc) from exc
        return str(response.get("ETag", ""))

    def put(self, key: str, body: bytes) -> None:
        """Write ``key`` unconditionally (only for content that never differs)."""
        try:
            self.client.put_object(Bucket=self.name, Key=key, Body=body)
        except (boto_errors.ClientError, boto_errors.BotoCoreError) as exc:
            raise self.unavailable("PutObject", exc) from exc

    def replace(self, key: str, body: bytes, etag: str) -> bool:
        """Overwrite ``key`` only if it still holds ``etag``; whether it did.

        Raises :class:`NotImplementedError` when the store does not support ``If-Match``
        on writes (callers then leave the object as it is).
        """
        try:
            self.client.put_object(Bucket=self.name, Key=key, Body=body, IfMatch=etag)
        except boto_errors.ClientError as exc:
            code, status = _code(exc), _status(exc)
            if status in (404, 409, 412) or code in (
                "PreconditionFailed",
                "ConditionalRequestConflict",
                "NoSuchKey",
            ):
                return False
            if status == 501 or code == "NotImplemented":
                raise NotImplementedError("conditional overwrite") from None
            raise self.unavailable("PutObject", exc) from exc
        except boto_errors.BotoCoreError as exc:
            raise self.unavailable("PutObject", exc) from exc
        return True

    def delete(self, keys: Sequence[str]) -> None:
        """Delete ``keys``, 1,000 per ``DeleteObjects`` request (the API's limit)."""
        for offset in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[offset : offset + 1000]]
            try:
                response = self.client.delete_objects(
                    Bucket=self.name, Delete={"Objects": batch, "Quiet": True}
                )
            except (boto_errors.ClientError, boto_errors.BotoCoreError) as exc:
                raise self.unavailable("DeleteObjects", exc) from exc
            errors = response.get("Errors") or []
            if errors:
                code = errors[0].get("Code", "error")
                raise StoreUnavailable(
                    f"S3 DeleteObjects failed for {len(errors)} keys on {self._where}: {code}"
                )
