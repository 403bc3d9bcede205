"""Which redis-py errors are worth retrying, and the one table that maps the others to
chatkeep's typed errors (:class:`~chatkeep.core.backend.ErrorMap`).

Messages name the server without credentials and are scrubbed of every secret the store
was given (passwords from the URL, its query or keywords) and of anything that looks like
one (:func:`~chatkeep.core.backend.redact_text`).
"""

from __future__ import annotations

import redis.exceptions as redis_errors
from chatkeep.core.backend import ErrorMap, StoreUnavailable, redact_text

__all__ = ["FATAL", "RETRYABLE", "Faults"]


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
FATAL: tuple[type[BaseException], ...] = _exceptions(
    "AuthenticationError", "AuthorizationError", "NoPermissionError"
)


class Faults:
    """The error table of one store: ``describe`` is the server's address without
    credentials, ``secrets`` the strings that must never appear in a message."""

    __slots__ = ("describe", "errors", "secrets")

    def __init__(self, describe: str, secrets: tuple[str, ...] = ()) -> None:
        self.describe = describe
        self.secrets = secrets
        table = {error: self._refused_credentials for error in FATAL}
        table[redis_errors.ResponseError] = self._rejected
        table[redis_errors.RedisError] = self._rejected
        self.errors = ErrorMap(table, scrub=self.scrub)

    def scrub(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return redact_text(text)

    def explain(self, error: BaseException) -> str:
        """``"ExceptionType: message"``, scrubbed."""
        return self.errors.describe(error)

    def cause(self, error: BaseException) -> BaseException | None:
        """``error`` to chain as the cause, unless its text (or its causes') shows a secret."""
        chain: BaseException | None = error
        while chain is not None:
            text = str(chain) + repr(chain.args)
            if any(secret and secret in text for secret in self.secrets):
                return None
            chain = chain.__cause__ or chain.__context__
        return error

    def given_up(self, operation: str, error: BaseException, attempts: int) -> StoreUnavailable:
        """The error after ``attempts`` failed tries of a retryable ``operation``."""
        if operation.startswith("append"):
            advice = "Nothing of a failed append is stored; retrying the same call later is safe."
        else:  # a read: the append advice would only puzzle (`sessions list` wrote nothing)
            advice = "Check that the server is running and reachable; retrying later is safe."
        return StoreUnavailable(
            f"Redis at {self.describe} is unavailable: {operation} failed {attempts} time(s) "
            f"({self.explain(error)}). {advice}"
        )

    def _refused_credentials(self, error: BaseException) -> StoreUnavailable:
        return StoreUnavailable(
            f"Redis at {self.describe} refused the connection ({self.explain(error)}); "
            "check the credentials and ACL permissions in the URL."
        )

    def _rejected(self, error: BaseException) -> StoreUnavailable:
        if str(error).startswith("WRONGTYPE"):
            advice = "a key of this namespace holds another type: is something else using it?"
        else:
            advice = "the server refused the command"
        return StoreUnavailable(
            f"Redis at {self.describe} rejected the command ({self.explain(error)}); {advice}."
        )
