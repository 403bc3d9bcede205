"""psycopg's errors and what the store raises instead: which failures are retried, and the one
table (:class:`~chatkeep.core.backend.ErrorMap`) mapping every other one to a chatkeep error.

Retrying is safe for every operation: reads and deletes are idempotent, and an append whose
first attempt committed (but whose reply was lost) is skipped record by record on the retry.
What cannot be retried, or is still failing when the attempts run out, goes through
:meth:`Faults.mapped`, the one context manager every database call runs in:

- the append functions' own SQLSTATEs become :class:`~chatkeep.core.RecordConflict`
  (``CK409``) and :class:`~chatkeep.core.AppendConflict` (``CK412``);
- a write refused by a read-only transaction becomes :class:`ReadOnlyStore`;
- connection failures and timeouts become :class:`~chatkeep.core.StoreUnavailable`, and so
  does any other error the server answers with (a missing privilege, a dropped table...).

No message shows a secret: the password forms the store was given are replaced by ``***``,
and a driver error is chained as the cause only when its text is free of them.
"""

from __future__ import annotations

import random
from contextvars import ContextVar
from types import TracebackType
from typing import Literal, NamedTuple

import psycopg
from psycopg import errors as pg_errors

from chatkeep.core.backend import (
    AppendConflict,
    ErrorMap,
    RecordConflict,
    StoreUnavailable,
    redact_text,
)
from chatkeep.core.backend import ReadOnlyStore as CoreReadOnlyStore

from .config import scrub
from .sql import APPEND_CONFLICT_STATE, RECORD_CONFLICT_STATE

__all__ = [
    "RETRYABLE",
    "Call",
    "Faults",
    "ReadOnlyStore",
    "backoff",
    "is_retryable",
    "safe_cause",
    "unavailable",
]

#: The errors that may be retried (when :func:`is_retryable` agrees): the connection or the
#: server failed, not the statement.
RETRYABLE: tuple[type[psycopg.Error], ...] = (psycopg.OperationalError, psycopg.InterfaceError)

# SQLSTATEs after which the same statement may well succeed on another connection:
# admin/crash shutdown, server starting up, too many connections, serialization/deadlock.
_RETRY_STATES = frozenset({"57P01", "57P02", "57P03", "53300", "40001", "40P01"})


class ReadOnlyStore(CoreReadOnlyStore):
    """A write (``append``, ``append_if``, ``delete``, ``purge_expired``, ``migrate``) on a
    handle opened with ``mode=ro``. Nothing was written; open another handle without
    ``mode=ro`` (or with ``mode=rwc``, the default) to write. A
    :class:`chatkeep.core.ReadOnlyStore` (so a :class:`chatkeep.core.CapabilityMissing`)."""

    def __init__(self, action: str) -> None:
        super().__init__("postgres", action)
        self.action = action
        self.args = (action,)  # what __init__ takes, so the error pickles (spawned workers)

    def __str__(self) -> str:
        return (
            f"this PostgreSQL store was opened read-only (mode=ro): {self.action} is refused "
            "and nothing was written; open it without mode=ro to write"
        )


class Call(NamedTuple):
    """What a store operation was doing, for the error it may end in (a tuple: one is made
    per call, so it must be cheap)."""

    #: ``append``, ``read``, ``delete``, ``list_sessions``, ``purge_expired``, ``connecting``.
    action: str
    #: The session the call is about (``None``: not one session).
    session_id: str | None = None
    #: ``append_if``'s expected last record id.
    after: str | None = None
    #: Attempts made so far (for the message when they run out).
    attempts: int = 1


# The call being mapped: the table's factories take only the exception, so the context
# manager publishes the call here for the duration of one translation.
_CALL: ContextVar[Call] = ContextVar("chatkeep_postgres_call")


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


class Faults:
    """The error table of one store: ``where`` is its URL without the password, ``secrets``
    the strings that must never appear in a message."""

    __slots__ = ("errors", "secrets", "where")

    def __init__(self, where: str, secrets: tuple[str, ...] = ()) -> None:
        self.where = where
        self.secrets = secrets
        self.errors = ErrorMap(
            {
                pg_errors.ReadOnlySqlTransaction: self._read_only,
                psycopg.OperationalError: self._unavailable,
                psycopg.InterfaceError: self._unavailable,
                psycopg.Error: self._answered,
            },
            scrub=self.scrub,
        )

    def scrub(self, text: str) -> str:
        """``text`` with every secret (and anything that looks like one) masked."""
        return redact_text(scrub(text, self.secrets))

    def mapped(self, call: Call) -> _Mapped:
        """A context manager raising the mapped chatkeep error of any psycopg error that
        escapes it (chatkeep's own errors and foreign exceptions pass through)."""
        return _Mapped(self, call)

    def given_up(self, exc: BaseException, call: Call) -> StoreUnavailable:
        """The error once a retryable failure has used up its attempts."""
        return unavailable(
            exc, where=self.where, action=call.action, attempts=call.attempts, secrets=self.secrets
        )

    def _unavailable(self, exc: BaseException) -> BaseException:
        return self.given_up(exc, _CALL.get())

    def _read_only(self, exc: BaseException) -> BaseException:
        return ReadOnlyStore(_CALL.get().action)

    def _answered(self, exc: BaseException) -> BaseException:
        call = _CALL.get()
        state = getattr(exc, "sqlstate", None)
        if state == RECORD_CONFLICT_STATE and call.session_id is not None:
            diag = getattr(exc, "diag", None)
            return RecordConflict(call.session_id, getattr(diag, "message_detail", None) or "")
        if state == APPEND_CONFLICT_STATE and call.session_id is not None:
            return AppendConflict(call.session_id, call.after)
        return StoreUnavailable(
            f"PostgreSQL at {self.where} refused {call.action} "
            f"(SQLSTATE {state or 'unknown'}): {self.errors.describe(exc)}"
        )


class _Mapped:
    """The context of :meth:`Faults.mapped` for one call."""

    __slots__ = ("call", "faults")

    def __init__(self, faults: Faults, call: Call) -> None:
        self.faults = faults
        self.call = call

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        if error is None or not isinstance(error, psycopg.Error):
            return False
        token = _CALL.set(self.call)
        try:
            mapped = self.faults.errors.translate(error)
        finally:
            _CALL.reset(token)
        if mapped is None:
            return False
        cause = safe_cause(error, self.faults.secrets)
        if cause is None:
            # Raised inside ``__exit__``, the new error keeps ``error`` as its context (not
            # shown by tracebacks, but reachable): mask the secret in ``error`` itself too.
            error.args = tuple(
                self.faults.scrub(arg) if isinstance(arg, str) else arg for arg in error.args
            )
        if isinstance(mapped, (RecordConflict, AppendConflict, ReadOnlyStore)):
            raise mapped from None  # an answer, not a failure: the driver error adds nothing
        raise mapped from cause
