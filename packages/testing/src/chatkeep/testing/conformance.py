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
    CloseTests,
    DeleteListingTests,
    DeleteTests,
    DurabilityTests,
    DurableDeleteTests,
    ForkDeletionTests,
    ForkTests,
    HostileIdListingTests,
    HostileIdTests,
    InvalidIdTests,
    LifecycleTests,
    ListSessionsTests,
    ModelTests,
    MutationSafetyTests,
    OrderTests,
    PayloadTests,
    RetryTests,
    SharedStoreTests,
    SliceTests,
    ThreadConcurrencyTests,
    UndoTests,
)

__all__ = ["StoreConformance"]


class StoreConformance(
    # the two required hooks
    OrderTests,
    SliceTests,
    ModelTests,
    AtomicBatchTests,
    RetryTests,
    ThreadConcurrencyTests,
    PayloadTests,
    MutationSafetyTests,
    HostileIdTests,
    InvalidIdTests,
    AsyncApiTests,
    # optional capabilities (gated by chatkeep.testing.requirements.REQUIREMENTS)
    DeleteTests,
    DeleteListingTests,
    ListSessionsTests,
    HostileIdListingTests,
    CloseTests,
    DurabilityTests,
    DurableDeleteTests,
    SharedStoreTests,
    # log views and the lifecycle, which the core builds on the two hooks
    ForkTests,
    UndoTests,
    CheckpointTests,
    ForkDeletionTests,
    LifecycleTests,
):
    """The whole store conformance suite. Subclass it as ``Test...`` and override the
    ``chatkeep_url`` fixture (or pass ``--chatkeep-url``)."""
