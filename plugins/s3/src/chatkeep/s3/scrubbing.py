"""Keeping credentials out of botocore's (and urllib3's) log lines.

At ``DEBUG`` botocore logs every request it sends: the ``Authorization`` header (with the
access key id), the ``X-Amz-Security-Token`` header (a session token, which is a secret),
and the canonical request it signs. A filter on those loggers rewrites each record before
any handler sees it: the values of those headers, and every credential a store was given as
an option, become ``***``.
"""

from __future__ import annotations

import logging
import re
import threading

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


class _ScrubFilter(logging.Filter):
    """Rewrites a record's message with :func:`scrub` (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to logging's own error handling
            return True
        cleaned = scrub(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return True


_FILTER = _ScrubFilter()


def protect(*secrets: str | None) -> None:
    """Remember ``secrets`` (credential values a store was given) and make sure every
    botocore, boto3, s3transfer and urllib3 logger that exists now scrubs its records."""
    with _lock:
        _secrets.update(secret for secret in secrets if secret and len(secret) >= 4)
    manager = logging.Logger.manager
    names = [name for name in list(manager.loggerDict) if name.split(".")[0] in _LOGGER_ROOTS]
    for name in [*_LOGGER_ROOTS, *names]:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
