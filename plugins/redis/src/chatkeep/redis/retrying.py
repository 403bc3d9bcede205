"""Bounded retries with backoff, and the mapping of driver errors to chatkeep's typed errors.

Every operation of the Redis store is safe to repeat: reads, SCAN pages and deletes are
idempotent, and an append skips the record ids its session already holds. So a connection
that drops between sending a command and reading its reply is handled the same way for all
of them: try again, a bounded number of times, then raise
:class:`~chatkeep.core.StoreUnavailable`. The driver's own retries are switched off so that
this policy is the only one.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import redis.exceptions as redis_errors
from chatkeep.core import StoreUnavailable

from .errors import InvalidOption

__all__ = ["RETRYABLE", "RetryPolicy"]

T = TypeVar("T")

logger = logging.getLogger("chatkeep.redis")


def _exceptions(*names: str) -> tuple[type[BaseException], ...]:
    # Some of these only exist in newer redis-py releases; take those that are there.
    found = (getattr(redis_errors, name, None) for name in names)
    return tuple(error for error in found if isinstance(error, type))


#: Errors after which the same command may succeed: the connection or the cluster topology
#: was at fault, not the command.
RETRYABLE: tuple[type[BaseException], ...] = _exceptions(
    "ConnectionError",  # includes BusyLoadingError and a full connection pool
    "TimeoutError",
    "ClusterDownError",
    "ClusterError",  # redirections exhausted while slots move
    "TryAgainError",
    "MasterDownError",
    "ReadOnlyError",  # a primary was demoted during failover
    "SlotNotCoveredError",
    "RedisClusterException",  # no reachable seed node (not a RedisError subclass)
)

#: Errors that retrying cannot fix: wrong credentials or missing permissions.
_FATAL: tuple[type[BaseException], ...] = _exceptions(
    "AuthenticationError", "AuthorizationError", "NoPermissionError"
)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry an operation that failed on the connection.

    ``retries`` further attempts follow the first; before attempt *n* the policy waits
    ``min(backoff_max, backoff * 2**(n-1))`` seconds, scaled by a random factor in
    [0.5, 1] so that many clients do not reconnect in lockstep. ``describe`` is the
    server's address without credentials, for messages; ``secrets`` are strings that must
    never appear in a message (the password), removed from driver error text.
    """

    retries: int = 3
    backoff: float = 0.1
    backoff_max: float = 2.0
    describe: str = "redis"
    secrets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if type(self.retries) is not int or self.retries < 0:
            raise InvalidOption(f"retries must be an int >= 0, not {self.retries!r}")
        if self.backoff < 0 or self.backoff_max < 0:
            raise InvalidOption("retry backoff times must be >= 0")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        base = min(self.backoff_max, self.backoff * 2.0 ** (attempt - 1))
        return base * random.uniform(0.5, 1.0)

    def run(self, operation: str, call: Callable[[], T]) -> T:
        """Run ``call``, retrying connection failures; raise StoreUnavailable when spent."""
        attempt = 0
        while True:
            try:
                return call()
            except _FATAL as exc:
                raise self._unavailable(operation, exc, fatal=True) from None
            except RETRYABLE as exc:
                attempt += 1
                if attempt > self.retries:
                    raise self._given_up(operation, exc, attempt) from self._cause(exc)
                wait = self.delay(attempt)
                self._log_retry(operation, exc, attempt, wait)
                time.sleep(wait)
            except redis_errors.RedisError as exc:
                raise self._unavailable(operation, exc) from self._cause(exc)

    async def arun(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        """Async :meth:`run`: ``call`` makes a fresh awaitable for each attempt."""
        attempt = 0
        while True:
            try:
                return await call()
            except _FATAL as exc:
                raise self._unavailable(operation, exc, fatal=True) from None
            except RETRYABLE as exc:
                attempt += 1
                if attempt > self.retries:
                    raise self._given_up(operation, exc, attempt) from self._cause(exc)
                wait = self.delay(attempt)
                self._log_retry(operation, exc, attempt, wait)
                await asyncio.sleep(wait)
            except redis_errors.RedisError as exc:
                raise self._unavailable(operation, exc) from self._cause(exc)

    # -- messages that never carry a secret ------------------------------------------------

    def scrub(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text

    def _explain(self, exc: BaseException) -> str:
        return f"{type(exc).__name__}: {self.scrub(str(exc))}"

    def _cause(self, exc: BaseException) -> BaseException | None:
        """``exc`` as the chained cause, unless its text would show a secret."""
        chain: BaseException | None = exc
        while chain is not None:
            text = str(chain) + repr(chain.args)
            if any(secret and secret in text for secret in self.secrets):
                return None
            chain = chain.__cause__ or chain.__context__
        return exc

    def _log_retry(self, operation: str, exc: BaseException, attempt: int, wait: float) -> None:
        logger.warning(
            "chatkeep redis %s on %s failed (%s); retry %d of %d in %.2fs",
            operation,
            self.describe,
            self._explain(exc),
            attempt,
            self.retries,
            wait,
        )

    def _given_up(self, operation: str, exc: BaseException, attempts: int) -> StoreUnavailable:
        return StoreUnavailable(
            f"Redis at {self.describe} is unavailable: {operation} failed {attempts} time(s) "
            f"({self._explain(exc)}). Nothing of a failed append is stored; retrying the "
            "same call later is safe."
        )

    def _unavailable(
        self, operation: str, exc: BaseException, *, fatal: bool = False
    ) -> StoreUnavailable:
        if fatal:
            advice = "check the credentials and ACL permissions in the URL"
        elif str(exc).startswith("WRONGTYPE"):
            advice = "a key of this namespace holds another type: is something else using it?"
        else:
            advice = "the server refused the command"
        return StoreUnavailable(
            f"Redis at {self.describe} rejected {operation} ({self._explain(exc)}); {advice}."
        )
