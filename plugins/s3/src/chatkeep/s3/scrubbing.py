"""Keeping credentials out of botocore's (and urllib3's) log lines.

At ``DEBUG`` botocore logs every request it sends: the ``Authorization`` header (with the
access key id), the ``X-Amz-Security-Token`` header (a session token, which is a secret),
and the canonical request it signs. Every record of those loggers is rewritten as it is
made, before any filter or handler sees it: the values of those headers, and every
credential a store was given as an option, become ``***``.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

from chatkeep.core.backend import redact_text

__all__ = ["protect", "scrub"]

_LOGGER_ROOTS = ("botocore", "boto3", "s3transfer", "urllib3")
_PATTERNS = [
    # Authorization: AWS4-HMAC-SHA256 Credential=AKID/date/..., Signature=...
    (re.compile(r"(Credential=)[^\s,'\"/]+", re.IGNORECASE), r"\1***"),
    (re.compile(r"(Signature=)[0-9a-fA-F]+", re.IGNORECASE), r"\1***"),
    # Header dicts ('X-Amz-Security-Token': b'...') and canonical requests (name:value).
    (
        re.compile(r"(x-amz-security-token['\"]?\s*[:=]\s*b?['\"]?)[^'\"\s,}]+", re.IGNORECASE),
        r"\1***",
    ),
    (
        re.compile(r"((?:X-Amz-Credential|X-Amz-Security-Token)=)[^&\s'\"]+", re.IGNORECASE),
        r"\1***",
    ),
]
_secrets: set[str] = set()
_lock = threading.Lock()


def scrub(text: str) -> str:
    """``text`` without credentials: known secret values, signed-request headers, and
    passwords in URLs."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        text = text.replace(secret, "***")
    return redact_text(text)


_previous_factory: Callable[..., logging.LogRecord] | None = None


def _scrubbing_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
    assert _previous_factory is not None
    record = _previous_factory(*args, **kwargs)
    if record.name.split(".")[0] in _LOGGER_ROOTS:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to logging's own error handling
            return record
        record.msg, record.args = scrub(message), None
    return record


def protect(*secrets: str | None) -> None:
    """Remember ``secrets`` (credential values a store was given), and make every log
    record of botocore, boto3, s3transfer and urllib3 scrubbed as it is made (a record
    factory: it covers loggers created later too, and costs nothing unless those loggers
    are enabled at the record's level)."""
    global _previous_factory
    with _lock:
        _secrets.update(secret for secret in secrets if secret and len(secret) >= 4)
        if _previous_factory is None:
            _previous_factory = logging.getLogRecordFactory()
            logging.setLogRecordFactory(_scrubbing_factory)
