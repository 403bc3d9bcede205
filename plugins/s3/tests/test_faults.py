"""Every botocore failure becomes a typed chatkeep error, with a scrubbed message and no
chained driver exception; credentials never reach botocore's log lines."""

from __future__ import annotations

import logging

import pytest
from botocore import exceptions as boto  # type: ignore[import-untyped]

from chatkeep.core import InvalidOption, StoreUnavailable
from chatkeep.s3 import scrubbing
from chatkeep.s3.faults import faults_for

FAULTS = faults_for("s3://bucket/prefix")


def _client_error(code: str, status: int) -> Exception:
    error: Exception = boto.ClientError(
        {
            "Error": {"Code": code, "Message": "secret=hunter2"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "PutObject",
    )
    return error


@pytest.mark.parametrize(
    ("error", "kind", "text"),
    [
        (_client_error("NoSuchBucket", 404), StoreUnavailable, "create the bucket first"),
        (_client_error("AccessDenied", 403), StoreUnavailable, "IAM policy"),
        (_client_error("ExpiredToken", 400), StoreUnavailable, "session token has expired"),
        (_client_error("Weird", 400), StoreUnavailable, "PutObject failed on s3://bucket/prefix"),
        (boto.NoCredentialsError(), StoreUnavailable, "no AWS credentials"),
        (
            boto.PartialCredentialsError(provider="env", cred_var="x"),
            InvalidOption,
            "misconfigured",
        ),
        (boto.ParamValidationError(report="bad Key"), InvalidOption, "misconfigured"),
        (boto.EndpointConnectionError(endpoint_url="http://h:1"), StoreUnavailable, "h:1"),
        (boto.ReadTimeoutError(endpoint_url="http://h:1"), StoreUnavailable, "ReadTimeoutError"),
    ],
)
def test_driver_errors_are_mapped(error: Exception, kind: type[Exception], text: str) -> None:
    with pytest.raises(kind, match=text) as caught, FAULTS.mapped():
        raise error
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert "hunter2" not in str(caught.value)


def test_other_exceptions_pass_through() -> None:
    with pytest.raises(KeyError), FAULTS.mapped():
        raise KeyError("not botocore's")


def test_log_lines_are_scrubbed_of_signed_headers_and_known_secrets() -> None:
    scrubbing.protect("my-own-secret-value")
    record_args = (
        "botocore.endpoint",
        logging.DEBUG,
        __file__,
        1,
        "Sending %s",
        (
            "{'X-Amz-Security-Token': b'TOKENVALUE', 'Authorization': b'AWS4-HMAC-SHA256 "
            "Credential=AKIAEXAMPLE/20261201/us-east-1/s3/aws4_request, "
            "SignedHeaders=host, Signature=0123abcd'} x-amz-security-token:TOKENVALUE "
            "my-own-secret-value http://u:pw@h/",
        ),
        None,
    )
    record = logging.getLogRecordFactory()(*record_args)  # what Logger.makeRecord calls
    message = record.getMessage()
    for secret in ("TOKENVALUE", "AKIAEXAMPLE", "0123abcd", "my-own-secret-value", ":pw@"):
        assert secret not in message, message
    assert "Credential=***" in message
