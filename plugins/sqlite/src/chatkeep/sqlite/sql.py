"""Every SQL statement of the SQLite backend, in one module.

Statements are assembled only from the fixed fragments below, never from caller input: every
value a caller gives (session ids, record ids, data, bounds, times) is a bound parameter.
Table names come from :mod:`chatkeep.sqlite.layout`; the rowid arithmetic ``s.id << 32``
is the record layout described there.
"""

from __future__ import annotations

from .layout import MAX_RECORDS, RECORDS_TABLE, SEQ_BITS, SESSIONS_TABLE, VERSION_TABLE

__all__ = [
    "CREATE_V1",
    "CREATE_V2",
    "CREATE_VERSION_TABLE",
    "DAMAGE",
    "DELETE_RECORDS",
    "DELETE_SESSION",
    "INSERT_RECORD",
    "INSERT_RECORDS",
    "INSERT_ROWS_MAX",
    "INSERT_SESSION",
    "INSERT_VERSION",
    "LIST_SQL",
    "READ_POSITIONS_SQL",
    "READ_SQL",
    "RECENT_SQL",
    "RESERVE_POSITIONS",
    "SELECT_EXPIRED",
    "SELECT_EXPIRY",
    "SELECT_LAST_RECORDS",
    "SELECT_RECORD_ID",
    "SELECT_SESSION",
    "SELECT_SESSION_ID",
    "SELECT_STORED",
    "SELECT_TABLE",
    "SELECT_VERSION",
    "SET_UPDATED_AT",
    "UPDATE_SESSION",
    "UPDATE_UPDATED_AT",
    "pragma",
    "read_positions_statement",
    "read_statement",
]

if SEQ_BITS != 32:  # pragma: no cover - the statements below spell the shift out
    raise ImportError("chatkeep.sqlite.sql assumes 32-bit record sequence numbers")

# -- the schema (chatkeep.sqlite.migrations applies it) ---------------------------------------

SELECT_TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
SELECT_VERSION = f"SELECT max(version) FROM {VERSION_TABLE}"  # noqa: S608
CREATE_VERSION_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} ("
    "version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at REAL NOT NULL)"
)
INSERT_VERSION = f"INSERT INTO {VERSION_TABLE} VALUES (?, ?, ?)"  # noqa: S608

#: Version 1: the sessions and records tables.
CREATE_V1: tuple[str, ...] = (
    f"""CREATE TABLE {SESSIONS_TABLE} (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL UNIQUE,
            length INTEGER NOT NULL,
            expires_at REAL
        )""",
    # Partial: sessions without a ttl never enter the index the lazy purge walks.
    f"CREATE INDEX {SESSIONS_TABLE}_expires_at ON {SESSIONS_TABLE} (expires_at) "
    "WHERE expires_at IS NOT NULL",
    f"""CREATE TABLE {RECORDS_TABLE} (
            id INTEGER PRIMARY KEY,
            session INTEGER NOT NULL,
            record_id TEXT NOT NULL,
            data BLOB NOT NULL
        )""",
    f"CREATE UNIQUE INDEX {RECORDS_TABLE}_record_id ON {RECORDS_TABLE} (session, record_id)",
)


#: Version 2: each session's last append time (the ``recent`` capability) and its index.
#: ``updated_at`` is seconds since the epoch (the store's clock); ``0`` until back-filled.
CREATE_V2: tuple[str, ...] = (
    f"ALTER TABLE {SESSIONS_TABLE} ADD COLUMN updated_at REAL NOT NULL DEFAULT 0",
    # Newest first, ties by key descending: one backward walk of this index per page.
    f"CREATE INDEX {SESSIONS_TABLE}_updated_at ON {SESSIONS_TABLE} (updated_at, session_id)",
)
#: The back-fill of version 2, a batch at a time: session row ids after ``?`` with their
#: last record's data.
SELECT_LAST_RECORDS = (
    f"SELECT s.id, r.data FROM {SESSIONS_TABLE} AS s JOIN {RECORDS_TABLE} AS r "  # noqa: S608
    "ON r.id = (s.id << 32) + s.length - 1 WHERE s.length > 0 AND s.id > ? "
    "ORDER BY s.id LIMIT ?"
)
UPDATE_UPDATED_AT = f"UPDATE {SESSIONS_TABLE} SET updated_at = ? WHERE id = ?"  # noqa: S608


def pragma(name: str, value: str | None = None) -> str:
    """``PRAGMA name`` or ``PRAGMA name = value``; both come from validated option choices."""
    return f"PRAGMA {name}" if value is None else f"PRAGMA {name} = {value}"


# -- sessions and records ---------------------------------------------------------------------

SELECT_SESSION = f"SELECT id, length, expires_at FROM {SESSIONS_TABLE} WHERE session_id = ?"  # noqa: S608
SELECT_SESSION_ID = f"SELECT id FROM {SESSIONS_TABLE} WHERE session_id = ?"  # noqa: S608
SELECT_EXPIRY = f"SELECT expires_at FROM {SESSIONS_TABLE} WHERE session_id = ?"  # noqa: S608
SET_UPDATED_AT = f"UPDATE {SESSIONS_TABLE} SET updated_at = ? WHERE session_id = ?"  # noqa: S608
INSERT_SESSION = (
    f"INSERT INTO {SESSIONS_TABLE} (session_id, length, expires_at, updated_at) "  # noqa: S608
    "VALUES (?, ?, ?, ?)"
)
# updated_at: the append's time, or NULL (kept as it was) when the append stored nothing.
UPDATE_SESSION = (
    f"UPDATE {SESSIONS_TABLE} SET length = ?, expires_at = ?, "  # noqa: S608
    "updated_at = coalesce(?, updated_at) WHERE id = ?"
)
#: The common append's first statement: reserve ``?1`` positions of a live session (its row
#: locked by the transaction) and return its row id and new length. No row: the session is
#: new, or expired and not purged yet (the slow path decides).
RESERVE_POSITIONS = (
    f"UPDATE {SESSIONS_TABLE} SET length = length + ?1, expires_at = ?2, updated_at = ?3 "  # noqa: S608
    "WHERE session_id = ?4 AND (expires_at IS NULL OR expires_at > ?3) RETURNING id, length"
)
DELETE_SESSION = f"DELETE FROM {SESSIONS_TABLE} WHERE id = ?"  # noqa: S608
INSERT_RECORD = (
    f"INSERT OR IGNORE INTO {RECORDS_TABLE} (id, session, record_id, data) VALUES (?, ?, ?, ?)"  # noqa: S608
)
#: The same for a batch of ``n`` records (``INSERT_RECORDS[n]``, n <= INSERT_ROWS_MAX) in one
#: statement: cheaper than ``executemany``, which runs the statement once per record.
INSERT_ROWS_MAX = 8
INSERT_RECORDS: tuple[str, ...] = (
    "",
    *(
        INSERT_RECORD.replace("(?, ?, ?, ?)", ", ".join(["(?, ?, ?, ?)"] * rows))
        for rows in range(1, INSERT_ROWS_MAX + 1)
    ),
)
SELECT_STORED = f"SELECT data FROM {RECORDS_TABLE} WHERE session = ? AND record_id = ? AND id < ?"  # noqa: S608
SELECT_RECORD_ID = f"SELECT record_id FROM {RECORDS_TABLE} WHERE id = ?"  # noqa: S608
DELETE_RECORDS = f"DELETE FROM {RECORDS_TABLE} WHERE id >= ? AND id < ?"  # noqa: S608
SELECT_EXPIRED = f"SELECT id FROM {SESSIONS_TABLE} WHERE expires_at <= ? LIMIT ?"  # noqa: S608

#: The test hook ``chatkeep_damage``: one statement per kind, on the record's rowid.
DAMAGE = {
    "garbage": f"UPDATE {RECORDS_TABLE} SET data = X'fe000102' WHERE id = ?",  # noqa: S608
    "truncated": (
        f"UPDATE {RECORDS_TABLE} SET data = substr(data, 1, max(length(data) - 3, 1)) "  # noqa: S608
        "WHERE id = ?"
    ),
    "missing": f"DELETE FROM {RECORDS_TABLE} WHERE id = ?",  # noqa: S608
}

# -- reads ------------------------------------------------------------------------------------

# One statement, so one snapshot: the session's row is looked up once (the CTE, on the unique
# session_id index) and the records are one rowid range of the records table, already in
# order - no scan, no sort, no join, whatever the statistics say.
# The first row is the session's header (its length, and NULL); every further row is a
# record's (record_id, data), so the driver hands back exactly the pairs a Record holds.
# "expires_at > ?2" takes the current time: expired sessions read as empty everywhere (no
# row at all, as for an unknown session). Both bounds stay inside the session's own range
# [s.id << 32, s.id << 32 | length), and rowids are unique, so the range is gap-free exactly
# when it returns (upper - lower) rows: the read compares that count with the slice's length
# instead of fetching each record's position.
_READ = (
    "WITH s AS (SELECT id << 32 AS base, length FROM {sessions} "
    "WHERE session_id = ?1 AND (expires_at IS NULL OR expires_at > ?2)) "
    "SELECT length, NULL FROM s UNION ALL "
    "SELECT record_id, data FROM {records} "
    "WHERE id >= (SELECT base + {lower} FROM s) AND id < (SELECT base + {upper} FROM s)"
)
# The same slice with each record's position, for the rare read whose count is short (a
# record missing from the file): it names the missing position. A LEFT JOIN also returns the
# session row when the range holds no record, so "empty" and "all missing" are told apart.
_READ_POSITIONS = (
    "SELECT r.record_id, r.data, r.id - (s.id << 32), s.length "  # noqa: S608
    f"FROM {SESSIONS_TABLE} AS s LEFT JOIN {RECORDS_TABLE} AS r "
    "ON r.id >= (s.id << 32) + {lower} AND r.id < (s.id << 32) + {upper} "
    "WHERE s.session_id = ?1 AND (s.expires_at IS NULL OR s.expires_at > ?2) ORDER BY r.id"
)
# Numbered parameters: ?1 session id, ?2 now, ?3 start, ?4 stop (when given).
# Lower bound: from the start (?), or from the end (length + ?, at least 0).
_LOWER_BOUNDS = ("?3", "max({s}length + ?3, 0)")
# Upper bound: the end (length), from the start (?, at most length), or from the end.
_UPPER_BOUNDS = ("{s}length", "min(?4, {s}length)", "{s}length + ?4")
#: Indexed [lower kind][upper kind].
READ_SQL = tuple(
    tuple(
        _READ.format(
            sessions=SESSIONS_TABLE,
            records=RECORDS_TABLE,
            lower=lower.format(s=""),
            upper=upper.format(s=""),
        )
        for upper in _UPPER_BOUNDS
    )
    for lower in _LOWER_BOUNDS
)
#: The positioned form of each of READ_SQL, indexed the same way.
READ_POSITIONS_SQL = tuple(
    tuple(
        _READ_POSITIONS.format(lower=lower.format(s="s."), upper=upper.format(s="s."))
        for upper in _UPPER_BOUNDS
    )
    for lower in _LOWER_BOUNDS
)


def _slice_kinds(start: int, stop: int | None) -> tuple[int, int, list[int]]:
    # Clamping to +-2**32 changes no result (a session holds at most 2**32 records) and keeps
    # the arithmetic inside the session's rowid range.
    lower = 0 if start >= 0 else 1
    parameters = [max(min(start, MAX_RECORDS), -MAX_RECORDS)]
    upper = 0
    if stop is not None:
        upper = 1 if stop >= 0 else 2
        parameters.append(max(min(stop, MAX_RECORDS), -MAX_RECORDS))
    return lower, upper, parameters


def read_statement(start: int, stop: int | None) -> tuple[str, list[int]]:
    """The SQL and slice parameters that read ``log[start:stop]``.

    The statement takes ``(session_id, now, *parameters)`` and returns no row for an unknown
    or expired session, else the session's header ``(length, None)`` then one
    ``(record_id, data)`` row per record, in order. Negative bounds are resolved against
    the session's stored ``length`` inside the query, so every slice (head, tail or middle)
    is one rowid range of the records table.
    """
    lower, upper, parameters = _slice_kinds(start, stop)
    return READ_SQL[lower][upper], parameters


def read_positions_statement(start: int, stop: int | None) -> tuple[str, list[int]]:
    """Like :func:`read_statement`, but each row is ``(record_id, data, position, length)``
    (one row of NULL records for a session whose range holds none): the diagnosis of a
    short read."""
    lower, upper, parameters = _slice_kinds(start, stop)
    return READ_POSITIONS_SQL[lower][upper], parameters


# -- listing ----------------------------------------------------------------------------------

_LIST = (
    f"SELECT session_id FROM {SESSIONS_TABLE} AS s WHERE session_id {{after}} ?{{before}} "  # noqa: S608
    "AND (s.expires_at IS NULL OR s.expires_at > ?) ORDER BY session_id LIMIT ?"
)
#: Keyed (inclusive lower bound, has an upper bound).
LIST_SQL = {
    (inclusive, bounded): _LIST.format(
        after=">=" if inclusive else ">", before=" AND session_id < ?" if bounded else ""
    )
    for inclusive in (True, False)
    for bounded in (True, False)
}


# -- the most recently updated sessions (the ``recent`` capability) ----------------------------

# One backward walk of the (updated_at, session_id) index from the cursor, keys inside the
# [lower, upper) range of the tenant and prefix, live sessions only. With a prefix the
# planner may instead take the prefix's key range and sort it (cheaper for a narrow prefix,
# whichever its statistics favour); a tenant's whole listing always walks the index.
_RECENT = (
    f"SELECT session_id, updated_at FROM {SESSIONS_TABLE} {{indexed}}"  # noqa: S608
    "WHERE (updated_at, session_id) < (?1, ?2) AND session_id >= ?3{before} "
    "AND (expires_at IS NULL OR expires_at > ?5) "
    "ORDER BY updated_at DESC, session_id DESC LIMIT ?6"
)
#: Keyed (the key range has an upper bound ?4, the index walk is forced).
RECENT_SQL = {
    (bounded, forced): _RECENT.format(
        before=" AND session_id < ?4" if bounded else "",
        indexed=f"INDEXED BY {SESSIONS_TABLE}_updated_at " if forced else "",
    )
    for bounded in (True, False)
    for forced in (True, False)
}
