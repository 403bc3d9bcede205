"""Mapping a driver's exceptions to chatkeep's errors, in one table per backend.

httpx's pattern: a backend lists, once, which foreign exception becomes which chatkeep
error, and wraps each driver call in ``with FAULTS.mapped(): ...``. The most specific
match wins (the first class in the exception's MRO that the table names); the new error
is raised ``from None`` so a driver message that echoed a credential is not chained, and
messages built with :meth:`ErrorMap.describe` are scrubbed of secrets. chatkeep's own
errors, and exceptions the table does not name, pass through unchanged::

    FAULTS = ErrorMap({
        ConnectionError: lambda exc: StoreUnavailable(FAULTS.describe(exc)),
        TimeoutError: lambda exc: StoreUnavailable(FAULTS.describe(exc)),
    })

    with FAULTS.mapped():
        client.rpush(key, *values)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Literal

from .errors import ChatkeepError
from .urls import redact_text

__all__ = ["ErrorMap"]

ErrorFactory = Callable[[BaseException], BaseException]


class ErrorMap:
    """A table from foreign exception classes to factories of chatkeep errors."""

    __slots__ = ("_mapped", "_scrub", "_table")

    def __init__(
        self,
        table: Mapping[type[BaseException], ErrorFactory],
        *,
        scrub: Callable[[str], str] = redact_text,
    ) -> None:
        self._table = dict(table)
        self._scrub = scrub
        self._mapped = _Mapped(self)

    def translate(self, error: BaseException) -> BaseException | None:
        """The chatkeep error for ``error`` (most specific match), or ``None``."""
        if isinstance(error, ChatkeepError):
            return None
        for klass in type(error).__mro__:
            factory = self._table.get(klass)
            if factory is not None:
                return factory(error)
        return None

    def describe(self, error: BaseException) -> str:
        """``"ExceptionType: message"`` with URLs' passwords and secret-looking values
        masked, for the text of the chatkeep error."""
        text = str(error).strip()
        name = type(error).__name__
        return self._scrub(f"{name}: {text}" if text else name)

    def mapped(self) -> _Mapped:
        """A context manager that raises the mapped error of anything escaping it."""
        return self._mapped


class _Mapped:
    """Reusable and reentrant: it keeps no state between uses."""

    __slots__ = ("_errors",)

    def __init__(self, errors: ErrorMap) -> None:
        self._errors = errors

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        if error is None:
            return False
        mapped = self._errors.translate(error)
        if mapped is None:
            return False
        raise mapped from None
