"""Bounded retries with backoff for the Redis store's operations.

Every operation of the store is safe to repeat: reads, index pages and deletes are
idempotent, and an append skips the record ids its session already holds. So a connection
that drops between sending a command and reading its reply is handled the same way for all
of them: try again, a bounded number of times, then raise
:class:`~chatkeep.core.backend.StoreUnavailable`. The driver's own retries are switched off
so that this policy is the only one. Errors retrying cannot fix go through the store's error
table (:mod:`chatkeep.redis.faults`) at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from chatkeep.core.backend import InvalidOption

from .faults import FATAL, RETRYABLE, Faults

__all__ = ["RetryPolicy"]

T = TypeVar("T")

logger = logging.getLogger("chatkeep.redis")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry an operation that failed on the connection.

    ``retries`` further attempts follow the first; before attempt *n* the policy waits
    ``min(backoff_max, backoff * 2**(n-1))`` seconds, scaled by a random factor in
    [0.5, 1] so that many clients do not reconnect in lockstep. ``faults`` turns what
    cannot be retried (and what is still failing at the end) into chatkeep errors.
    """

    retries: int = 3
    backoff: float = 0.1
    backoff_max: float = 2.0
    faults: Faults = field(default_factory=lambda: Faults("redis"))

    def __post_init__(self) -> None:
        if type(self.retries) is not int or self.retries < 0:
            raise InvalidOption(f"retries must be an int >= 0, not {self.retries!r}")
        if self.backoff < 0 or self.backoff_max < 0:
            raise InvalidOption("retry backoff times must be >= 0")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        base = min(self.backoff_max, self.backoff * 2.0 ** (attempt - 1))
        return base * random.uniform(0.5, 1.0)

    def scrub(self, text: str) -> str:
        """``text`` with the store's secrets masked."""
        return self.faults.scrub(text)

    def run(self, operation: str, call: Callable[[], T]) -> T:
        """Run ``call``, retrying connection failures; raise StoreUnavailable when spent."""
        attempt = 0
        with self.faults.errors.mapped():
            while True:
                try:
                    return call()
                except FATAL:
                    raise  # credentials: mapped at once, never retried
                except RETRYABLE as exc:
                    attempt += 1
                    if attempt > self.retries:
                        error = self.faults.given_up(operation, exc, attempt)
                        raise error from self.faults.cause(exc)
                    wait = self.delay(attempt)
                    self._log_retry(operation, exc, attempt, wait)
                    time.sleep(wait)

    async def arun(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        """Async :meth:`run`: ``call`` makes a fresh awaitable for each attempt."""
        attempt = 0
        with self.faults.errors.mapped():
            while True:
                try:
                    return await call()
                except FATAL:
                    raise
                except RETRYABLE as exc:
                    attempt += 1
                    if attempt > self.retries:
                        error = self.faults.given_up(operation, exc, attempt)
                        raise error from self.faults.cause(exc)
                    wait = self.delay(attempt)
                    self._log_retry(operation, exc, attempt, wait)
                    await asyncio.sleep(wait)

    def _log_retry(self, operation: str, exc: BaseException, attempt: int, wait: float) -> None:
        logger.warning(
            "chatkeep redis %s on %s failed (%s); retry %d of %d in %.2fs",
            operation,
            self.faults.describe,
            self.faults.explain(exc),
            attempt,
            self.retries,
            wait,
        )
