"""The backend author's kit: everything a chatkeep storage backend needs, in one import.

A backend is one class with ``append`` and ``read`` (see :mod:`chatkeep.core.store` for
the contract), one hookimpl and one entry-point line (``core/BACKENDS.md`` walks through
it). This module gathers what such a class uses, so a plugin imports from one place::

    from chatkeep.core.backend import (
        CLOSE, DELETE, LIST_SESSIONS, ErrorMap, Record, StoreUnavailable, hookimpl,
    )

A backend whose logic is worth writing once for its sync and async sides writes it as
sans-IO generators and drives them with :func:`run_program` / :func:`arun_program`
(:mod:`chatkeep.core.programs`), the runner the core's own log views use.

Nothing here imports a driver; every name is also importable where it is defined.
"""

from __future__ import annotations

from ._loop import LoopThread
from .errors import (
    AppendConflict,
    CapabilityMissing,
    CorruptRecord,
    InvalidOption,
    ReadOnlyStore,
    RecordConflict,
    StoreNotFound,
    StoreUnavailable,
)
from .faults import ErrorMap
from .hookspecs import RegisterBackend, hookimpl
from .namespaces import MAX_NAMESPACE_LENGTH, check_namespace
from .programs import Program, arun_program, run_program
from .records import (
    MAX_RECORD_ID_LENGTH,
    MAX_SESSION_ID_LENGTH,
    Record,
    check_records,
    check_session_id,
    prefix_upper_bound,
)
from .store import (
    CAPABILITIES,
    CLOSE,
    CONDITIONAL,
    DELETE,
    DURABLE,
    FULLTEXT,
    LIST_SESSIONS,
    NAMESPACE,
    RECENT,
    SHARED,
    TTL,
)
from .urls import redact_text, redact_url

__all__ = [
    "CAPABILITIES",
    "CLOSE",
    "CONDITIONAL",
    "DELETE",
    "DURABLE",
    "FULLTEXT",
    "LIST_SESSIONS",
    "MAX_NAMESPACE_LENGTH",
    "MAX_RECORD_ID_LENGTH",
    "MAX_SESSION_ID_LENGTH",
    "NAMESPACE",
    "RECENT",
    "SHARED",
    "TTL",
    "AppendConflict",
    "CapabilityMissing",
    "CorruptRecord",
    "ErrorMap",
    "InvalidOption",
    "LoopThread",
    "Program",
    "ReadOnlyStore",
    "Record",
    "RecordConflict",
    "RegisterBackend",
    "StoreNotFound",
    "StoreUnavailable",
    "arun_program",
    "check_namespace",
    "check_records",
    "check_session_id",
    "hookimpl",
    "prefix_upper_bound",
    "redact_text",
    "redact_url",
    "run_program",
]
