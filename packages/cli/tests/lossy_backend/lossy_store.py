"""``lossy://USER:PASSWORD@HOST/NAME``: a test backend that damages what it stores.

Records of sessions whose id starts with ``damaged-`` lose their last byte on the way in,
so a migration into it copies everything and then fails verification. In-process only (a
dict), which is all one ``chatkeep migrate`` needs. The URL carries a password so the test
can check that no output shows it. Put on ``PYTHONPATH`` together with the
``lossy_store-0.1.dist-info`` directory the test writes (its entry point registers it).
"""

from __future__ import annotations

from typing import Any, ClassVar

from chatkeep.core.backend import CLOSE, Record, hookimpl

DAMAGED_PREFIX = "damaged-"


class LossyStore:
    """Sessions as lists of records in a dict; damaged ones lose a byte per record."""

    capabilities: ClassVar[frozenset[str]] = frozenset({CLOSE})

    def __init__(self) -> None:
        self._logs: dict[str, list[Record]] = {}

    @classmethod
    def from_url(cls, url: str, **options: Any) -> LossyStore:
        """Any ``lossy://`` URL; its credentials are accepted and never kept."""
        return cls()

    def append(self, session_id: str, records: list[Record]) -> None:
        """Append the records whose ids are new, damaging those of damaged sessions."""
        log = self._logs.setdefault(session_id, [])
        known = {record.id for record in log}
        for record in records:
            if record.id in known:
                continue
            data = record.data[:-1] if session_id.startswith(DAMAGED_PREFIX) else record.data
            log.append(Record(record.id, data))
            known.add(record.id)

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        """The session's records ``[start:stop]``."""
        return list(self._logs.get(session_id, [])[start:stop])

    def close(self) -> None:
        """Nothing to release."""


@hookimpl
def chatkeep_register_backends(register: Any) -> None:
    """Make ``lossy://`` URLs open a :class:`LossyStore`."""
    register("lossy", LossyStore, schemes=["lossy"], description="damages what it stores")
