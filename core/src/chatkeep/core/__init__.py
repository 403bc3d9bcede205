"""chatkeep-core: the storage contract, plugin discovery, sessions, history and the agent loop.

Quick start::

    from chatkeep.core import open_store, Record

    store = open_store("memory://")
    store.append("session-1", [Record("m1", b"hello")])
    assert store.read("session-1") == [Record("m1", b"hello")]
"""

from .errors import (
    CapabilityMissing,
    ChatkeepError,
    CorruptRecord,
    InvalidRecord,
    InvalidSessionId,
    PluginError,
    StoreUnavailable,
    UnknownBackend,
)
from .hookspecs import hookimpl
from .ids import new_id
from .plugins import BackendInfo, backends, open_store, redact_url
from .records import Record, check_session_id
from .store import CAPABILITIES, Backend, Store

__all__ = [
    "CAPABILITIES",
    "Backend",
    "BackendInfo",
    "CapabilityMissing",
    "ChatkeepError",
    "CorruptRecord",
    "InvalidRecord",
    "InvalidSessionId",
    "PluginError",
    "Record",
    "Store",
    "StoreUnavailable",
    "UnknownBackend",
    "backends",
    "check_session_id",
    "hookimpl",
    "new_id",
    "open_store",
    "redact_url",
]
