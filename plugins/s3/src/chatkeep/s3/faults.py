"""The driver-error table: which botocore failure becomes which chatkeep error.

botocore has already retried throttling, 5xx answers and dropped connections (the
``retries`` option) when an error reaches this table, so what is left is final. Messages
name the operation, the store (bucket, prefix, endpoint) and S3's error code with a hint,
never a credential: S3's own message text is not quoted, and everything else is scrubbed.
"""

from __future__ import annotations

from botocore import exceptions as boto  # type: ignore[import-untyped]

from chatkeep.core.backend import ErrorMap, InvalidOption, StoreUnavailable, redact_text

__all__ = ["HINTS", "error_code", "faults_for", "http_status"]

HINTS = {
    "NoSuchBucket": "create the bucket first (or fix the bucket name in the URL)",
    "AccessDenied": "check the IAM policy (the chatkeep-s3 README lists the actions needed)",
    "InvalidAccessKeyId": "check the AWS credentials in use",
    "SignatureDoesNotMatch": "check the AWS secret key and the region",
    "ExpiredToken": "the AWS session token has expired; refresh the credentials",
    "NotImplemented": "this S3-compatible store lacks a feature chatkeep needs "
    "(conditional writes: If-None-Match on PutObject)",
}


def http_status(error: BaseException) -> int:
    """The HTTP status of a ``ClientError`` (0 if unknown)."""
    response = getattr(error, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def error_code(error: BaseException) -> str:
    """S3's error code of a ``ClientError`` (``""`` if none)."""
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code") or "")


def faults_for(where: str) -> ErrorMap:
    """The table for a store described (without credentials) as ``where``."""

    def client_error(error: BaseException) -> BaseException:
        code = error_code(error) or str(http_status(error))
        operation = getattr(error, "operation_name", "request")
        hint = HINTS.get(code)
        return StoreUnavailable(
            f"S3 {operation} failed on {where}: {code}" + (f"; {hint}" if hint else "")
        )

    def no_credentials(error: BaseException) -> BaseException:
        return StoreUnavailable(
            f"no AWS credentials found for {where} (environment, shared files, profile, "
            "role, or the aws_access_key_id/aws_secret_access_key options)"
        )

    def bad_configuration(error: BaseException) -> BaseException:
        return InvalidOption(f"the S3 store {where} is misconfigured: {_describe(error)}")

    def unreachable(error: BaseException) -> BaseException:
        return StoreUnavailable(f"S3 request to {where} failed: {_describe(error)}")

    return ErrorMap(
        {
            boto.ClientError: client_error,
            boto.NoCredentialsError: no_credentials,
            boto.PartialCredentialsError: bad_configuration,
            boto.ProfileNotFound: bad_configuration,
            boto.ParamValidationError: bad_configuration,
            boto.BotoCoreError: unreachable,
        }
    )


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    name = type(error).__name__
    return redact_text(f"{name}: {text}" if text else name)
