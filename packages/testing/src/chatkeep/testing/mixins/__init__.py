"""The conformance mixins, one per concern; :class:`chatkeep.testing.StoreConformance`
inherits them all. Which capability each needs is declared in
:mod:`chatkeep.testing.requirements`."""

from ._base import ConformanceBase
from .async_api import AsyncApiTests
from .atomicity import AtomicBatchTests, RetryTests, ThreadConcurrencyTests
from .close import CloseTests
from .delete import DeleteListingTests, DeleteTests
from .durability import DurabilityTests, DurableDeleteTests
from .ids import HostileIdListingTests, HostileIdTests, InvalidIdTests
from .isolation import MutationSafetyTests
from .listing import ListSessionsTests
from .model import ModelTests
from .order import OrderTests, SliceTests
from .payload import PayloadTests
from .shared import SharedStoreTests
from .views import (
    CheckpointTests,
    ForkDeletionTests,
    ForkTests,
    LifecycleTests,
    UndoTests,
    ViewsAndLifecycleTests,
)

__all__ = [
    "AsyncApiTests",
    "AtomicBatchTests",
    "CheckpointTests",
    "CloseTests",
    "ConformanceBase",
    "DeleteListingTests",
    "DeleteTests",
    "DurabilityTests",
    "DurableDeleteTests",
    "ForkDeletionTests",
    "ForkTests",
    "HostileIdListingTests",
    "HostileIdTests",
    "InvalidIdTests",
    "LifecycleTests",
    "ListSessionsTests",
    "ModelTests",
    "MutationSafetyTests",
    "OrderTests",
    "PayloadTests",
    "RetryTests",
    "SharedStoreTests",
    "SliceTests",
    "ThreadConcurrencyTests",
    "UndoTests",
    "ViewsAndLifecycleTests",
]
