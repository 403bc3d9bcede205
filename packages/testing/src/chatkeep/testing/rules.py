"""The rule each conformance mixin checks, and where the documentation states it.

A failing test's line in the report names the rule it enforces (the first paragraph of its
mixin's docstring) and the section of the backend author's documentation that states it,
so an author learns why from the failure itself. When a rule changes, the change is
recorded in ``core/CHANGELOG.md`` under the version that made it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

__all__ = ["SECTIONS", "Rule", "rule_for"]

_BACKENDS = "core/BACKENDS.md"
_CORE = "core/README.md"
_IDS = f"{_BACKENDS}#3-ids"
_OPTIONS = f"{_BACKENDS}#2-urls-and-options"
_APPEND = f"{_BACKENDS}#4-appendsession_id-records"
_READ = f"{_BACKENDS}#5-readsession_id-start0-stopnone"
_CAPABILITIES = f"{_BACKENDS}#6-optional-hooks-and-capabilities"
_HOOKS = f"{_BACKENDS}#8-test-hooks-optional"
_VIEWS = f"{_CORE}#log-views-fork-undo-compaction"
_SEARCH = f"{_CORE}#search"
_FULLTEXT = f"{_BACKENDS}#6a-fulltext-an-index-for-search"

#: Mixin name -> the documentation section stating its rule (path#anchor, from the
#: repository root). Every mixin of ``StoreConformance`` has one (a test checks it, and
#: that each anchor is a heading of the file).
SECTIONS: dict[str, str] = {
    "OrderTests": _APPEND,
    "SliceTests": _READ,
    "ModelTests": _APPEND,
    "AtomicBatchTests": _APPEND,
    "RetryTests": _APPEND,
    "RecordIdempotencyTests": _APPEND,
    "ThreadConcurrencyTests": _APPEND,
    "PayloadTests": _APPEND,
    "MutationSafetyTests": _READ,
    "HostileIdTests": _IDS,
    "InvalidIdTests": _IDS,
    "AsyncApiTests": _CAPABILITIES,
    "ClosedHandleTests": _CAPABILITIES,
    "OptionTests": _OPTIONS,
    "TailCostTests": _READ,
    "VolumeTests": _APPEND,
    "DeleteTests": _CAPABILITIES,
    "DeleteListingTests": _CAPABILITIES,
    "ListSessionsTests": _CAPABILITIES,
    "ListingPagesTests": _CAPABILITIES,
    "LongPrefixTests": _CAPABILITIES,
    "HostileIdListingTests": _CAPABILITIES,
    "CloseTests": _CAPABILITIES,
    "DurabilityTests": _CAPABILITIES,
    "DurableDeleteTests": _CAPABILITIES,
    "CrashDurabilityTests": _CAPABILITIES,
    "SharedStoreTests": _CAPABILITIES,
    "CrossHandleTests": _CAPABILITIES,
    "CrossHandleDeleteTests": _CAPABILITIES,
    "KeptSessionTests": _CAPABILITIES,
    "KeptSessionDeleteTests": _CAPABILITIES,
    "ProcessOrderTests": _APPEND,
    "CrossProcessRetryTests": _APPEND,
    "TtlTests": _CAPABILITIES,
    "ConditionalAppendTests": _CAPABILITIES,
    "ConditionalProcessTests": _CAPABILITIES,
    "NamespaceTests": _OPTIONS,
    "RecentSessionsTests": _CAPABILITIES,
    "RecentDeleteTests": _CAPABILITIES,
    "RecentSharedTests": _CAPABILITIES,
    "RecentTtlTests": _CAPABILITIES,
    "RecentTieTests": _CAPABILITIES,
    "ForkTests": _VIEWS,
    "UndoTests": _VIEWS,
    "CheckpointTests": _VIEWS,
    "EditTests": _VIEWS,
    "CorruptRecordTests": _READ,
    "SessionMetadataTests": f"{_CORE}#session-metadata",
    "SessionListingTests": f"{_CORE}#session-metadata",
    "ForkDeletionTests": _VIEWS,
    "ForkDeletionFaultTests": _VIEWS,
    "LifecycleTests": f"{_CORE}#the-agent",
    "TtlRetryTests": _CAPABILITIES,
    "DamageTests": _HOOKS,
    "ErasureTests": _HOOKS,
    "DurabilityClaimTests": _HOOKS,
    "SearchTests": _SEARCH,
    "FulltextTests": _FULLTEXT,
}


@dataclass(frozen=True)
class Rule:
    """What a mixin checks (``text``) and where the documentation says so (``see``)."""

    mixin: str
    text: str
    see: str


def rule_for(mixin: str) -> Rule | None:
    """The rule the mixin named ``mixin`` checks, or ``None`` for a name not in the suite."""
    see = SECTIONS.get(mixin)
    if see is None:
        return None
    from . import mixins

    cls = getattr(mixins, mixin, None)
    doc = inspect.getdoc(cls) if cls is not None else None
    text = " ".join((doc or mixin).split("\n\n", 1)[0].split())
    return Rule(mixin, text.replace("``", "`").replace(":class:", ""), see)
