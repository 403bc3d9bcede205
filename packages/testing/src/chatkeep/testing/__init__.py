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
    from .mixins import (
        AsyncApiTests,
        AtomicBatchTests,
        CheckpointTests,
        CloseTests,
        ClosedHandleTests,
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
        ErasureTests,
        ForkDeletionFaultTests,
        ForkDeletionTests,
        ForkTests,
        HostileIdListingTests,
        HostileIdTests,
        InvalidIdTests,
        LifecycleTests,
        ListSessionsTests,
        ListingPagesTests,
        LongPrefixTests,
        ModelTests,
        MutationSafetyTests,
        NamespaceTests,
        OptionTests,
        OrderTests,
        PayloadTests,
        ProcessOrderTests,
        RecordIdempotencyTests,
        RetryTests,
        SharedStoreTests,
        SliceTests,
        TailCostTests,
        ThreadConcurrencyTests,
        TtlTests,
        UndoTests,
        VolumeTests,
    )
    from .report import CapabilityResult, ConformanceReport, TestOutcome
    from .requirements import REQUIREMENTS, Requirement, needs
    from .runner import run_conformance
    from .settings import SuiteSettings

__all__ = [
    "REQUIREMENTS",
    "AsyncApiTests",
    "AtomicBatchTests",
    "CapabilityResult",
    "CheckpointTests",
    "CloseTests",
    "ClosedHandleTests",
    "ConditionalAppendTests",
    "ConditionalProcessTests",
    "ConformanceBase",
    "ConformanceReport",
    "CorruptRecordTests",
    "CrashDurabilityTests",
    "CrossHandleDeleteTests",
    "CrossHandleTests",
    "CrossProcessRetryTests",
    "DamageTests",
    "DeleteListingTests",
    "DeleteTests",
    "DurabilityClaimTests",
    "DurabilityTests",
    "DurableDeleteTests",
    "ErasureTests",
    "ForkDeletionFaultTests",
    "ForkDeletionTests",
    "ForkTests",
    "HostileIdListingTests",
    "HostileIdTests",
    "InvalidIdTests",
    "LifecycleTests",
    "ListSessionsTests",
    "ListingPagesTests",
    "LongPrefixTests",
    "ModelTests",
    "MutationSafetyTests",
    "NamespaceTests",
    "OptionTests",
    "OrderTests",
    "PayloadTests",
    "ProcessOrderTests",
    "RecordIdempotencyTests",
    "Requirement",
    "RetryTests",
    "SharedStoreTests",
    "SliceTests",
    "StoreConformance",
    "SuiteSettings",
    "TailCostTests",
    "TestOutcome",
    "ThreadConcurrencyTests",
    "TtlTests",
    "UndoTests",
    "VolumeTests",
    "needs",
    "run_conformance",
]

_EXPORTS = {
    "StoreConformance": "conformance",
    "CapabilityResult": "report",
    "ConformanceReport": "report",
    "TestOutcome": "report",
    "REQUIREMENTS": "requirements",
    "Requirement": "requirements",
    "needs": "requirements",
    "run_conformance": "runner",
    "SuiteSettings": "settings",
    **{
        name: "mixins"
        for name in (
            "AsyncApiTests",
            "AtomicBatchTests",
            "CheckpointTests",
            "CloseTests",
            "ClosedHandleTests",
            "ConditionalAppendTests",
            "ConditionalProcessTests",
            "ConformanceBase",
            "CorruptRecordTests",
            "CrashDurabilityTests",
            "CrossHandleDeleteTests",
            "CrossHandleTests",
            "CrossProcessRetryTests",
            "DamageTests",
            "DeleteListingTests",
            "DeleteTests",
            "DurabilityClaimTests",
            "DurabilityTests",
            "DurableDeleteTests",
            "ErasureTests",
            "ForkDeletionFaultTests",
            "ForkDeletionTests",
            "ForkTests",
            "HostileIdListingTests",
            "HostileIdTests",
            "InvalidIdTests",
            "LifecycleTests",
            "ListSessionsTests",
            "ListingPagesTests",
            "LongPrefixTests",
            "ModelTests",
            "MutationSafetyTests",
            "NamespaceTests",
            "OptionTests",
            "OrderTests",
            "PayloadTests",
            "ProcessOrderTests",
            "RecordIdempotencyTests",
            "RetryTests",
            "SharedStoreTests",
            "SliceTests",
            "TailCostTests",
            "ThreadConcurrencyTests",
            "TtlTests",
            "UndoTests",
            "VolumeTests",
        )
    },
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'chatkeep.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
