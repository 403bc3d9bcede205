"""The portable ``namespace=`` option: one rule for every backend (tenants of one store)."""

from __future__ import annotations

import re

from .errors import InvalidOption

__all__ = ["MAX_NAMESPACE_LENGTH", "check_namespace"]

#: A namespace is at most this many characters.
MAX_NAMESPACE_LENGTH = 128

_SEGMENT = re.compile(r"[A-Za-z0-9._:-]+")


def check_namespace(value: object) -> str:
    """Return ``value`` if it is a valid namespace, else raise
    :class:`~chatkeep.core.errors.InvalidOption`.

    A namespace is 1-128 characters from ``A-Z a-z 0-9 . _ - :``, with ``/`` separating
    non-empty segments (``acme``, ``acme/eu``, ``app:prod``); no segment is ``.`` or ``..``.
    It is kept literally, never decoded or normalised, so every backend stores the same
    name. Namespaces are disjoint: ``acme``, ``acme/eu`` and ``acmecorp`` never see each
    other's sessions, nor does a handle without a namespace.
    """
    if not isinstance(value, str):
        raise InvalidOption(f"namespace must be a str, not {type(value).__name__}")
    if not value or len(value) > MAX_NAMESPACE_LENGTH:
        raise InvalidOption(
            f"namespace must be 1 to {MAX_NAMESPACE_LENGTH} characters long, not {len(value)}"
        )
    for segment in value.split("/"):
        if not _SEGMENT.fullmatch(segment) or segment in (".", ".."):
            shown = repr(value) if len(value) <= 60 else repr(value[:57] + "...")
            raise InvalidOption(
                f"invalid namespace {shown}: use letters, digits and . _ - : with '/' "
                "between non-empty segments (no '.' or '..' segment)"
            )
    return value
