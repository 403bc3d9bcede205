"""The one table that says which capabilities each conformance mixin needs.

SQLAlchemy's dialect suite keeps its requirements in one class instead of skips scattered
through the tests; this module is that place for chatkeep. A mixin listed here runs only
when the store under test declares every capability in its row; its tests are then
reported under the row's *group* (a line of the capability report). A mixin that is not
listed needs nothing and reports under ``core``.

Adding a mixin that needs nothing (for example ``LifecycleTests``) takes no row at all;
adding one that should appear as its own line of the report takes one row::

    "LifecycleTests": needs(group="lifecycle"),
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "CAPABILITY_ORDER",
    "CORE",
    "HOOK_GROUPS",
    "REQUIREMENTS",
    "Requirement",
    "defining_mixin",
    "needs",
    "requirement_for",
]

#: The report group of the two required hooks (append and read).
CORE = "core"

#: The order capability rows appear in a report (after ``core``).
CAPABILITY_ORDER: tuple[str, ...] = (
    "delete",
    "list_sessions",
    "close",
    "shared",
    "durable",
    "ttl",
    "conditional",
    "namespace",
    "recent",
    "fulltext",
)

#: Report rows of the optional test hooks (:mod:`chatkeep.testing.hooks`), after the rest.
HOOK_GROUPS: tuple[str, ...] = ("damage", "erasure", "durability", "expiry", "ties")


@dataclass(frozen=True)
class Requirement:
    """What a mixin needs from the store (``capabilities``, all of them, and test ``hooks``
    its backend must provide) and where its results are reported (``group``)."""

    group: str
    capabilities: frozenset[str] = frozenset()
    hooks: frozenset[str] = frozenset()


def needs(*capabilities: str, group: str | None = None, hooks: tuple[str, ...] = ()) -> Requirement:
    """A :class:`Requirement` for ``capabilities`` (and test ``hooks``), reported under
    ``group`` (by default the first capability named).

    ``needs("delete", "list_sessions")`` runs only on stores that declare both and reports
    under ``delete``; ``needs(group="lifecycle")`` needs nothing and gets its own row;
    ``needs(group="damage", hooks=("chatkeep_damage",))`` runs only where the backend has
    that test hook, and is reported ``not provided`` elsewhere.
    """
    if group is None:
        if not capabilities:
            raise ValueError("needs() without capabilities must name its group")
        group = capabilities[0]
    return Requirement(group=group, capabilities=frozenset(capabilities), hooks=frozenset(hooks))


#: Mixin class name -> what it needs. Unlisted mixins need nothing (group ``core``).
REQUIREMENTS: Mapping[str, Requirement] = MappingProxyType(
    {
        "DeleteTests": needs("delete"),
        "DeleteListingTests": needs("delete", "list_sessions"),
        "ListSessionsTests": needs("list_sessions"),
        "ListingPagesTests": needs("list_sessions"),
        "LongPrefixTests": needs("list_sessions"),
        "HostileIdListingTests": needs("list_sessions"),
        "CloseTests": needs("close"),
        "SharedStoreTests": needs("shared"),
        "CrossHandleTests": needs("shared"),
        "CrossHandleDeleteTests": needs("shared", "delete"),
        "KeptSessionTests": needs("shared"),
        "KeptSessionDeleteTests": needs("shared", "delete"),
        "ProcessOrderTests": needs("shared"),
        "CrossProcessRetryTests": needs("shared"),
        "DurabilityTests": needs("durable"),
        "DurableDeleteTests": needs("durable", "delete"),
        "CrashDurabilityTests": needs("durable", "shared"),
        "TtlTests": needs("ttl"),
        "ConditionalAppendTests": needs("conditional"),
        "ConditionalProcessTests": needs("conditional", "shared"),
        "NamespaceTests": needs("namespace"),
        "RecentSessionsTests": needs("recent"),
        "RecentDeleteTests": needs("recent", "delete"),
        "RecentSharedTests": needs("recent", "shared"),
        "RecentTtlTests": needs("recent", "ttl"),
        # log views and the history lifecycle, built by the core on the two hooks
        "ForkTests": needs(group="views"),
        "UndoTests": needs(group="views"),
        "CheckpointTests": needs(group="views"),
        "EditTests": needs(group="views"),
        "CorruptRecordTests": needs(group="views"),
        "SessionMetadataTests": needs(group="views"),
        "SessionListingTests": needs("list_sessions"),
        "SearchTests": needs("list_sessions"),
        "FulltextTests": needs("fulltext", "list_sessions"),
        "ForkDeletionTests": needs("delete"),
        "ForkDeletionFaultTests": needs("delete"),
        "LifecycleTests": needs(group="lifecycle"),
        # optional test hooks (chatkeep.testing.hooks): "not provided" where absent
        "DamageTests": needs(group="damage", hooks=("chatkeep_damage",)),
        "ErasureTests": needs("delete", group="erasure", hooks=("chatkeep_storage_contains",)),
        "DurabilityClaimTests": needs(group="durability", hooks=("chatkeep_durability",)),
        "TtlRetryTests": needs("ttl", "shared", group="expiry", hooks=("chatkeep_expiry",)),
        "RecentTieTests": needs("recent", group="ties", hooks=("chatkeep_set_updated",)),
    }
)

_CORE_REQUIREMENT = Requirement(group=CORE)


def defining_mixin(cls: type, test_name: str) -> type:
    """The class in ``cls``'s MRO that first introduced the test method ``test_name``.

    The deepest definer wins, so a backend's test class that overrides a test (to add an
    ``xfail``, say) still reports it under the mixin it came from.
    """
    definers = [klass for klass in cls.__mro__ if test_name in vars(klass)]
    if not definers:
        raise LookupError(f"{cls.__name__} has no test named {test_name!r}")
    return definers[-1]


def requirement_for(cls: type, test_name: str) -> Requirement:
    """The :class:`Requirement` of test method ``test_name`` of test class ``cls``."""
    mixin = defining_mixin(cls, test_name)
    return REQUIREMENTS.get(mixin.__name__, _CORE_REQUIREMENT)
