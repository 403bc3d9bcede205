"""The conformance mixins, one per concern; :class:`chatkeep.testing.StoreConformance`
inherits them all. Which capability (or test hook) each needs is declared in
:mod:`chatkeep.testing.requirements`."""

from ._base import ConformanceBase
from .async_api import AsyncApiTests
from .atomicity import AtomicBatchTests, RetryTests, ThreadConcurrencyTests
from .close import CloseTests
from .closed import ClosedHandleTests, OptionTests
from .conditional import ConditionalAppendTests, ConditionalProcessTests
from .costs import TailCostTests
from .delete import DeleteListingTests, DeleteTests
from .durability import DurabilityTests, DurableDeleteTests
from .faults import ForkDeletionFaultTests
from .hooked import DamageTests, DurabilityClaimTests, ErasureTests
from .idempotency import RecordIdempotencyTests
from .ids import HostileIdListingTests, HostileIdTests, InvalidIdTests
from .isolation import MutationSafetyTests
from .kept import KeptSessionDeleteTests, KeptSessionTests
from .listing import ListSessionsTests
from .metadata import SessionListingTests, SessionMetadataTests
from .model import ModelTests
from .namespaces import NamespaceTests
from .order import OrderTests, SliceTests
from .paging import ListingPagesTests, LongPrefixTests
from .payload import PayloadTests
from .recent import (
    RecentDeleteTests,
    RecentSessionsTests,
    RecentSharedTests,
    RecentTieTests,
    RecentTtlTests,
)
from .search import FulltextTests, SearchTests
from .shared import (
    CrashDurabilityTests,
    CrossHandleDeleteTests,
    CrossHandleTests,
    CrossProcessRetryTests,
    ProcessOrderTests,
    SharedStoreTests,
)
from .ttl import TtlRetryTests, TtlTests
from .views import (
    CheckpointTests,
    CorruptRecordTests,
    EditTests,
    ForkDeletionTests,
    ForkTests,
    LifecycleTests,
    UndoTests,
    ViewsAndLifecycleTests,
)
from .volume import VolumeTests

__all__ = [
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
    "EditTests",
    "ErasureTests",
    "ForkDeletionFaultTests",
    "ForkDeletionTests",
    "ForkTests",
    "FulltextTests",
    "HostileIdListingTests",
    "HostileIdTests",
    "InvalidIdTests",
    "KeptSessionDeleteTests",
    "KeptSessionTests",
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
    "RecentDeleteTests",
    "RecentSessionsTests",
    "RecentSharedTests",
    "RecentTieTests",
    "RecentTtlTests",
    "RecordIdempotencyTests",
    "RetryTests",
    "SearchTests",
    "SessionListingTests",
    "SessionMetadataTests",
    "SharedStoreTests",
    "SliceTests",
    "TailCostTests",
    "ThreadConcurrencyTests",
    "TtlRetryTests",
    "TtlTests",
    "UndoTests",
    "ViewsAndLifecycleTests",
    "VolumeTests",
]
