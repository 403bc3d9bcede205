""":class:`StoreConformance`: every conformance mixin in one class.

A backend's conformance test is one subclass that says which store to test::

    import pytest
    from chatkeep.testing import StoreConformance

    class TestMyStoreConformance(StoreConformance):
        @pytest.fixture
        def chatkeep_url(self, tmp_path):
            return f"mystore://{tmp_path}/data"
"""

from __future__ import annotations

from .mixins import (
    AsyncApiTests,
    AtomicBatchTests,
    CheckpointTests,
    ClosedHandleTests,
    CloseTests,
    ConditionalAppendTests,
    ConditionalProcessTests,
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
    TtlTests,
    UndoTests,
    VolumeTests,
)

__all__ = ["StoreConformance"]


class StoreConformance(
    # the two required hooks
    OrderTests,
    SliceTests,
    ModelTests,
    AtomicBatchTests,
    RetryTests,
    RecordIdempotencyTests,
    ThreadConcurrencyTests,
    PayloadTests,
    MutationSafetyTests,
    HostileIdTests,
    InvalidIdTests,
    AsyncApiTests,
    ClosedHandleTests,
    OptionTests,
    TailCostTests,
    VolumeTests,
    # optional capabilities (gated by chatkeep.testing.requirements.REQUIREMENTS)
    DeleteTests,
    DeleteListingTests,
    ListSessionsTests,
    ListingPagesTests,
    LongPrefixTests,
    HostileIdListingTests,
    CloseTests,
    DurabilityTests,
    DurableDeleteTests,
    CrashDurabilityTests,
    SharedStoreTests,
    CrossHandleTests,
    CrossHandleDeleteTests,
    KeptSessionTests,
    KeptSessionDeleteTests,
    ProcessOrderTests,
    CrossProcessRetryTests,
    TtlTests,
    ConditionalAppendTests,
    ConditionalProcessTests,
    NamespaceTests,
    RecentSessionsTests,
    RecentDeleteTests,
    RecentSharedTests,
    RecentTtlTests,
    # log views and the lifecycle, which the core builds on the two hooks
    ForkTests,
    UndoTests,
    CheckpointTests,
    EditTests,
    CorruptRecordTests,
    SessionMetadataTests,
    SessionListingTests,
    SearchTests,
    FulltextTests,
    ForkDeletionTests,
    ForkDeletionFaultTests,
    LifecycleTests,
    # optional test hooks (chatkeep.testing.hooks)
    DamageTests,
    ErasureTests,
    DurabilityClaimTests,
):
    """The whole store conformance suite. Subclass it as ``Test...`` and override the
    ``chatkeep_url`` fixture (or pass ``--chatkeep-url``)."""
