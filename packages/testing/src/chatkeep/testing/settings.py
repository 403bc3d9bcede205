"""The suite's size knobs, from pytest options or an overridden fixture.

The defaults are chosen to catch the bugs the suite is about (a 10 MiB or 64 MiB size cap,
paging bugs around 100-, 500- and 1,000-entry pages, a tail read that scans the log) while
keeping a run over a remote store in the range of a minute. A slow store can lower them::

    pytest --pyargs chatkeep.testing.suite --chatkeep-url URL --chatkeep-volume-mib=0

or, in a backend's own test class, override the ``chatkeep_settings`` fixture::

    @pytest.fixture
    def chatkeep_settings(self) -> SuiteSettings:
        return SuiteSettings(volume_mib=16)

A test whose size is set to 0 is skipped, and the report shows its row as incomplete.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["DEFAULTS", "OPTIONS", "SuiteSettings"]


@dataclass(frozen=True)
class SuiteSettings:
    """How big the suite's volume, listing and cost tests are, and whether it cleans up."""

    #: MiB written to (and read back from) one session by the volume test; 0 skips it.
    volume_mib: int = 80
    #: Sessions created by the paging test (ids that extend one another); 0 skips it.
    listing_sessions: int = 2400
    #: Records in the long session of the tail-cost test; 0 skips it.
    tail_records: int = 20000
    #: Worker processes of the cross-process tests (at least 2).
    processes: int = 4
    #: Keep the sessions the suite wrote instead of deleting them afterwards.
    keep_sessions: bool = False


DEFAULTS = SuiteSettings()

#: pytest option (without ``--chatkeep-``) -> (field, help).
OPTIONS: dict[str, tuple[str, str]] = {
    "volume-mib": (
        "volume_mib",
        f"MiB the volume test writes to one session (default {DEFAULTS.volume_mib}; 0 skips it)",
    ),
    "listing-sessions": (
        "listing_sessions",
        f"sessions the listing-pages test creates (default {DEFAULTS.listing_sessions}; "
        "0 skips it)",
    ),
    "tail-records": (
        "tail_records",
        f"records in the tail-cost test's long session (default {DEFAULTS.tail_records}; "
        "0 skips it)",
    ),
    "processes": (
        "processes",
        f"worker processes of the cross-process tests (default {DEFAULTS.processes})",
    ),
}


def from_options(values: dict[str, Any]) -> SuiteSettings:
    """Settings from parsed option values (``None`` keeps a default)."""
    known = {f.name for f in fields(SuiteSettings)}
    given = {name: value for name, value in values.items() if name in known and value is not None}
    settings = SuiteSettings(**given)
    if settings.processes < 2:
        raise ValueError("--chatkeep-processes must be at least 2")
    for name in ("volume_mib", "listing_sessions", "tail_records"):
        if getattr(settings, name) < 0:
            raise ValueError(f"--chatkeep-{name.replace('_', '-')} must not be negative")
    return settings
