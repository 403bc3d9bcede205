"""Which database errors are worth retrying, the bounded backoff between attempts, and the
:class:`~chatkeep.core.StoreUnavailable` raised when attempts run out.

Retrying is safe for every operation: reads and deletes are idempotent, and an append whose
first attempt committed (but whose reply was lost) is skipped record by record on the retry.
"""

from __future__ import annotations

import random

import psycopg
from psycopg import errors as pg_errors

from chatkeep.core import StoreUnavailable

from .options import scrub

__all__ = ["backoff", "is_retryable", "safe_cause", "unavailable"]

# SQLSTATEs after which the same statement may well succeed on another connection:
# admin/crash shutdown, server starting up, too many connections, serialization/deadlock.
_RETRY_STATES = frozenset({"57P01", "57P02", "57P03", "53300", "40001", "40P01"})


def is_retryable(exc: BaseException) -> bool:
    """Whether ``exc`` means "try again shortly" (connection lost, server restarting...)."""
    if isinstance(exc, pg_errors.QueryCanceled):
        return False  # statement_timeout: the same statement would time out again
    if isinstance(exc, psycopg.InterfaceError):
        return True  # e.g. "the connection is closed"
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    # No SQLSTATE: client-side connection failure (refused, reset, pool timeout).
    return state is None or state.startswith("08") or state in _RETRY_STATES


def backoff(attempt: int) -> float:
    """Seconds to sleep before retry number ``attempt`` (1-based): 50 ms doubling, capped at
    1 s, with jitter so that many clients do not reconnect in lockstep."""
    base: float = min(0.05 * (2 ** (attempt - 1)), 1.0)
    return base * (0.5 + random.random() / 2)


def unavailable(
    exc: BaseException, *, where: str, action: str, attempts: int, secrets: tuple[str, ...]
) -> StoreUnavailable:
    """The :class:`StoreUnavailable` to raise for ``exc`` (which the caller chains only
    when its text is free of ``secrets``; see :func:`safe_cause`)."""
    reason = scrub(str(exc).strip().rstrip(".") or type(exc).__name__, secrets)
    if isinstance(exc, pg_errors.QueryCanceled):
        detail = f"{action} exceeded the statement timeout: {reason}"
    else:
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        detail = f"{action} failed after {tries}: {type(exc).__name__}: {reason}"
    hint = ""
    if action == "append":
        hint = " The batch is either fully stored or absent; retrying the same append is safe."
    return StoreUnavailable(f"PostgreSQL at {where} is unavailable: {detail}.{hint}")


def safe_cause(exc: BaseException, secrets: tuple[str, ...]) -> BaseException | None:
    """``exc`` if neither its text nor its chained causes mention a secret, else ``None``."""
    seen: BaseException | None = exc
    while seen is not None:
        text = f"{seen!s} {seen!r}"
        if any(secret and secret in text for secret in secrets):
            return None
        seen = seen.__cause__ or seen.__context__
    return exc
