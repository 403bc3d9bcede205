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
    CloseTests,
    DeleteListingTests,
    DeleteTests,
    DurabilityTests,
    DurableDeleteTests,
    HostileIdListingTests,
    HostileIdTests,
    InvalidIdTests,
    ListSessionsTests,
    ModelTests,
    MutationSafetyTests,
    OrderTests,
    PayloadTests,
    RetryTests,
    SharedStoreTests,
    SliceTests,
    ThreadConcurrencyTests,
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
):
    """The whole store conformance suite. Subclass it as ``Test...`` and override the
    ``chatkeep_url`` fixture (or pass ``--chatkeep-url``)."""
