"""chatkeep-testing: the conformance suite every chatkeep store backend passes.

* :class:`StoreConformance` gathers the test mixins (``OrderTests``, ``SliceTests``,
  ``DeleteTests``, ...); subclass it as ``Test...`` and override the ``chatkeep_url``
  fixture, or run ``pytest --pyargs chatkeep.testing.suite --chatkeep-url URL``.
* :mod:`chatkeep.testing.requirements` is the one table saying which capability each
  mixin needs; tests of undeclared capabilities are skipped as "not declared".
* :func:`run_conformance` runs the suite against a URL and returns a
  :class:`ConformanceReport` (also ``python -m chatkeep.testing URL``).

Names load lazily, so the pytest plugin (imported by every pytest run where this package is
installed) costs nothing until the suite is used.

(PYTEST_DONT_REWRITE: this file has no asserts; the marker stops pytest warning that it
was imported before a nested ``run_conformance`` session could rewrite it.)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._rewrite import register_assert_rewrite

# Before any mixin is imported: have pytest rewrite their asserts into helpful messages.
register_assert_rewrite()

if TYPE_CHECKING:
    from .conformance import StoreConformance
    from .hypothesis_examples import example_count
    from .mixins import (
        AsyncApiTests,
        AtomicBatchTests,
        CheckpointTests,
        ClosedHandleTests,
        CloseTests,
        ConditionalAppendTests,
        ConditionalProcessTests,
        ConformanceBase,
        CorruptRecordTests,
        CrashDurabilityTests,
        CrossHandleDeleteTests,
        CrossHandleTests,
        CrossProcessRetryTests,
        DamageTests,
        DeleteListingTests,
        DeleteTests,
        DurabilityClaimTests,
        DurabilityTests,
        DurableDeleteTests,
        EditTests,
        ErasureTests,
        ForkDeletionFaultTests,
        ForkDeletionTests,
        ForkTests,
        FulltextTests,
        HostileIdListingTests,
        HostileIdTests,
        InvalidIdTests,
        KeptSessionDeleteTests,
        KeptSessionTests,
        LifecycleTests,
        ListingPagesTests,
        ListSessionsTests,
        LongPrefixTests,
        ModelTests,
        MutationSafetyTests,
        NamespaceTests,
        OptionTests,
        OrderTests,
        PayloadTests,
        ProcessOrderTests,
        RecentDeleteTests,
        RecentSessionsTests,
        RecentSharedTests,
        RecentTieTests,
        RecentTtlTests,
        RecordIdempotencyTests,
        RetryTests,
        SearchTests,
        SessionListingTests,
        SessionMetadataTests,
        SharedStoreTests,
        SliceTests,
        TailCostTests,
        ThreadConcurrencyTests,
        TtlRetryTests,
        TtlTests,
        UndoTests,
        ViewsAndLifecycleTests,
        VolumeTests,
    )
    from .report import CapabilityResult, ConformanceReport, TestOutcome
    from .requirements import REQUIREMENTS, Requirement, needs
    from .runner import UnguardedMain, run_conformance
    from .settings import SuiteSettings

#: The one list of public names: name -> the submodule defining it (loaded on first use).
_EXPORTS: dict[str, str] = {
    "StoreConformance": "conformance",
    "example_count": "hypothesis_examples",
    "CapabilityResult": "report",
    "ConformanceReport": "report",
    "TestOutcome": "report",
    "REQUIREMENTS": "requirements",
    "Requirement": "requirements",
    "needs": "requirements",
    "run_conformance": "runner",
    "UnguardedMain": "runner",
    "SuiteSettings": "settings",
    "AsyncApiTests": "mixins",
    "AtomicBatchTests": "mixins",
    "CheckpointTests": "mixins",
    "EditTests": "mixins",
    "CloseTests": "mixins",
    "ClosedHandleTests": "mixins",
    "ConditionalAppendTests": "mixins",
    "ConditionalProcessTests": "mixins",
    "ConformanceBase": "mixins",
    "CorruptRecordTests": "mixins",
    "CrashDurabilityTests": "mixins",
    "CrossHandleDeleteTests": "mixins",
    "CrossHandleTests": "mixins",
    "CrossProcessRetryTests": "mixins",
    "DamageTests": "mixins",
    "DeleteListingTests": "mixins",
    "DeleteTests": "mixins",
    "DurabilityClaimTests": "mixins",
    "DurabilityTests": "mixins",
    "DurableDeleteTests": "mixins",
    "ErasureTests": "mixins",
    "ForkDeletionFaultTests": "mixins",
    "ForkDeletionTests": "mixins",
    "ForkTests": "mixins",
    "HostileIdListingTests": "mixins",
    "HostileIdTests": "mixins",
    "InvalidIdTests": "mixins",
    "KeptSessionDeleteTests": "mixins",
    "KeptSessionTests": "mixins",
    "LifecycleTests": "mixins",
    "ListSessionsTests": "mixins",
    "ListingPagesTests": "mixins",
    "LongPrefixTests": "mixins",
    "ModelTests": "mixins",
    "MutationSafetyTests": "mixins",
    "NamespaceTests": "mixins",
    "OptionTests": "mixins",
    "OrderTests": "mixins",
    "PayloadTests": "mixins",
    "ProcessOrderTests": "mixins",
    "RecentDeleteTests": "mixins",
    "RecentSessionsTests": "mixins",
    "RecentSharedTests": "mixins",
    "RecentTieTests": "mixins",
    "RecentTtlTests": "mixins",
    "RecordIdempotencyTests": "mixins",
    "RetryTests": "mixins",
    "SearchTests": "mixins",
    "FulltextTests": "mixins",
    "SessionListingTests": "mixins",
    "SessionMetadataTests": "mixins",
    "SharedStoreTests": "mixins",
    "SliceTests": "mixins",
    "TailCostTests": "mixins",
    "ThreadConcurrencyTests": "mixins",
    "TtlRetryTests": "mixins",
    "TtlTests": "mixins",
    "UndoTests": "mixins",
    "ViewsAndLifecycleTests": "mixins",
    "VolumeTests": "mixins",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (derived from the table above)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'chatkeep.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
