"""Where sessions and records live in the file: table names, record rowids, session keys.

Tables (all prefixed ``chatkeep_`` so the file can be shared with an application's own tables)::

    chatkeep_schema    (version INTEGER PRIMARY KEY, description TEXT, applied_at REAL)
    chatkeep_sessions  (id INTEGER PRIMARY KEY, session_id TEXT UNIQUE, length INTEGER,
                        expires_at REAL)
    chatkeep_records   (id INTEGER PRIMARY KEY, session INTEGER, record_id TEXT, data BLOB)
        UNIQUE (session, record_id)  -- a retried record is skipped, never duplicated

A record's rowid is ``session << 32 | seq``, where ``seq`` numbers the session's records
0, 1, 2, ... without gaps and ``length`` is the next one. So a session's log is one contiguous
range of the table's own b-tree, and ``log[-k:]`` is the rowid range
``[session << 32 | length - k, session << 32 | length)``: no secondary index to consult, and
the rows read sit together on a few pages. Measured against a separate ``(session, seq)``
index (and against ``WITHOUT ROWID``, whose interior pages would copy whole rows), this is
the fastest for both appends and tail reads, with one session or many interleaved.
Limits: 2**32 records per session and 2**31 - 1 session rows.

Session keys: the ``session_id`` column holds the session id itself in the default namespace
and ``<namespace>\\0<session id>`` in a named one. Session ids and namespaces never contain
NUL, so tenants (nested and prefix-of ones included) and the default namespace are disjoint
key ranges of the one sessions table, and a namespace's listing is one index range.
"""

from __future__ import annotations

__all__ = [
    "MAX_RECORDS",
    "MAX_SESSIONS",
    "RECORDS_TABLE",
    "SEQ_BITS",
    "SESSIONS_TABLE",
    "TABLES",
    "VERSION_TABLE",
    "label",
    "record_rowid",
    "session_range",
    "tenant_prefix",
]

VERSION_TABLE = "chatkeep_schema"
SESSIONS_TABLE = "chatkeep_sessions"
RECORDS_TABLE = "chatkeep_records"
#: Every table chatkeep owns in a file.
TABLES = (VERSION_TABLE, SESSIONS_TABLE, RECORDS_TABLE)

#: A record's rowid is ``session << SEQ_BITS | seq``.
SEQ_BITS = 32
#: Records per session.
MAX_RECORDS = 1 << SEQ_BITS
#: Session row ids 1 .. 2**31 - 1 keep every record rowid inside a signed 64-bit integer.
MAX_SESSIONS = (1 << (63 - SEQ_BITS)) - 1

_NAMESPACE_END = "\x00"


def tenant_prefix(namespace: str | None) -> str:
    """What every session key of ``namespace`` starts with (``""`` for the default one)."""
    return "" if namespace is None else namespace + _NAMESPACE_END


def label(key: str) -> str:
    """The session id a stored key names (its namespace part, if any, dropped)."""
    return key.rpartition(_NAMESPACE_END)[2]


def record_rowid(session: int, seq: int) -> int:
    """The rowid of record ``seq`` of the session row ``session``."""
    return (session << SEQ_BITS) + seq


def session_range(session: int) -> tuple[int, int]:
    """The rowid range ``[first, last + 1)`` that every record of ``session`` falls in."""
    return session << SEQ_BITS, (session + 1) << SEQ_BITS
