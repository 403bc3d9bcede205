"""The names of the contract additions (CONTRACT items 1-4), from ``chatkeep.core``.

Until a chatkeep-core that defines them is installed, stand-ins with the same names are
used: nothing raises them, so the tests that expect them fail, which is the truth about a
core without those promises.
"""

from __future__ import annotations

from typing import Any

from chatkeep.core import errors as _errors
from chatkeep.core.errors import ChatkeepError

__all__ = [
    "CONDITIONAL",
    "NAMESPACE",
    "AppendConflict",
    "RecordConflict",
    "StoreClosed",
    "core_has",
]

CONDITIONAL = "conditional"
NAMESPACE = "namespace"


def core_has(name: str) -> bool:
    """Whether the installed chatkeep-core defines error ``name``."""
    return hasattr(_errors, name)


class _Standins:
    class RecordConflict(ChatkeepError, ValueError):
        """Stand-in for ``chatkeep.core.errors.RecordConflict``."""

        def __init__(self, session_id: str, record_id: str) -> None:
            self.session_id, self.record_id = session_id, record_id
            super().__init__(f"record {record_id!r} of session {session_id!r} differs")

    class AppendConflict(ChatkeepError, RuntimeError):
        """Stand-in for ``chatkeep.core.errors.AppendConflict``."""

        def __init__(self, session_id: str, expected: str | None) -> None:
            self.session_id, self.expected = session_id, expected
            super().__init__(f"session {session_id!r} no longer ends at {expected!r}")

    class StoreClosed(ChatkeepError, RuntimeError):
        """Stand-in for ``chatkeep.core.errors.StoreClosed``."""


RecordConflict: Any = getattr(_errors, "RecordConflict", _Standins.RecordConflict)
AppendConflict: Any = getattr(_errors, "AppendConflict", _Standins.AppendConflict)
StoreClosed: Any = getattr(_errors, "StoreClosed", _Standins.StoreClosed)
