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

from . import mixins

__all__ = ["StoreConformance"]


class StoreConformance(
    # the two required hooks
    mixins.OrderTests,
    mixins.SliceTests,
    mixins.ModelTests,
    mixins.AtomicBatchTests,
    mixins.RetryTests,
    mixins.RecordIdempotencyTests,
    mixins.ThreadConcurrencyTests,
    mixins.PayloadTests,
    mixins.MutationSafetyTests,
    mixins.HostileIdTests,
    mixins.InvalidIdTests,
    mixins.AsyncApiTests,
    mixins.ClosedHandleTests,
    mixins.OptionTests,
    mixins.TailCostTests,
    mixins.VolumeTests,
    # optional capabilities (gated by chatkeep.testing.requirements.REQUIREMENTS)
    mixins.DeleteTests,
    mixins.DeleteListingTests,
    mixins.ListSessionsTests,
    mixins.ListingPagesTests,
    mixins.LongPrefixTests,
    mixins.HostileIdListingTests,
    mixins.CloseTests,
    mixins.DurabilityTests,
    mixins.DurableDeleteTests,
    mixins.CrashDurabilityTests,
    mixins.SharedStoreTests,
    mixins.CrossHandleTests,
    mixins.CrossHandleDeleteTests,
    mixins.KeptSessionTests,
    mixins.KeptSessionDeleteTests,
    mixins.ProcessOrderTests,
    mixins.CrossProcessRetryTests,
    mixins.TtlTests,
    mixins.ConditionalAppendTests,
    mixins.ConditionalProcessTests,
    mixins.NamespaceTests,
    mixins.RecentSessionsTests,
    mixins.RecentDeleteTests,
    mixins.RecentSharedTests,
    mixins.RecentTtlTests,
    mixins.RecentTieTests,
    # log views and the lifecycle, which the core builds on the two hooks
    mixins.ForkTests,
    mixins.UndoTests,
    mixins.CheckpointTests,
    mixins.EditTests,
    mixins.CorruptRecordTests,
    mixins.SessionMetadataTests,
    mixins.SessionListingTests,
    mixins.SearchTests,
    mixins.FulltextTests,
    mixins.ForkDeletionTests,
    mixins.ForkDeletionFaultTests,
    mixins.LifecycleTests,
    # optional test hooks (chatkeep.testing.hooks)
    mixins.DamageTests,
    mixins.ErasureTests,
    mixins.DurabilityClaimTests,
    mixins.TtlRetryTests,
):
    """The whole store conformance suite. Subclass it as ``Test...`` and override the
    ``chatkeep_url`` fixture (or pass ``--chatkeep-url``)."""
