"""The ``fulltext`` capability on SQLite: an FTS5 table of the words the core hands over.

The core extracts each record's words (``chatkeep.core.search_text.record_words``: folded,
space-separated; the backend never parses a record) and appends through
:meth:`FulltextHooks.fulltext_append`, which runs the plain append and writes the words of
the records it stored into ``chatkeep_fulltext`` in the same ``BEGIN IMMEDIATE``
transaction: an acknowledged append is searchable, a rolled-back one is not. The FTS5 row
id is the record's own row id (``session << 32 | position``), so a session's words are one
row-id range and go with it on delete.

A file that held records before the table existed (schema version 3 added it) has a
backlog, one row per such session with the positions still to index;
``chatkeep index build`` (``chatkeep.core.search_index.build_index``) works it off in
batches, each its own transaction, so a build stopped part way goes on from there. Until
the backlog is empty, ``fulltext_pending`` says how many records it holds and a search
scans instead of using the index.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from chatkeep.core.backend import Record

from .layout import RECORDS_TABLE, SEQ_BITS, SESSIONS_TABLE, session_range

if TYPE_CHECKING:
    import sqlite_utils

__all__ = [
    "BACKLOG_TABLE",
    "CREATE_V3",
    "FULLTEXT_TABLE",
    "FULLTEXT_VERSION",
    "FulltextHooks",
    "add_fulltext",
    "create_v3",
    "delete_words",
    "match_expression",
]

#: The FTS5 table: one row per indexed record, its row id the record's.
FULLTEXT_TABLE = "chatkeep_fulltext"
#: Sessions whose records from before version 3 are not indexed yet.
BACKLOG_TABLE = "chatkeep_fulltext_backlog"
#: The schema version that adds the index.
FULLTEXT_VERSION = 3

#: Version 3: the index and the backlog of what was stored before it.
CREATE_V3: tuple[str, ...] = (
    # unicode61 folds case and (remove_diacritics 2) accents as the core's words already
    # are; it only matters for words the core did not fold the same way.
    f"CREATE VIRTUAL TABLE {FULLTEXT_TABLE} USING fts5("
    "words, tokenize = 'unicode61 remove_diacritics 2')",
    f"CREATE TABLE {BACKLOG_TABLE} ("
    "session INTEGER PRIMARY KEY, done INTEGER NOT NULL, upto INTEGER NOT NULL)",
    f"INSERT INTO {BACKLOG_TABLE} (session, done, upto) "  # noqa: S608
    f"SELECT id, 0, length FROM {SESSIONS_TABLE} WHERE length > 0",
)

_INSERT_WORDS = f"INSERT OR REPLACE INTO {FULLTEXT_TABLE} (rowid, words) VALUES (?, ?)"  # noqa: S608
_DELETE_WORDS = f"DELETE FROM {FULLTEXT_TABLE} WHERE rowid >= ? AND rowid < ?"  # noqa: S608
_SESSION_END = f"SELECT id, length FROM {SESSIONS_TABLE} WHERE session_id = ?"  # noqa: S608
_TAIL_IDS = f"SELECT id, record_id FROM {RECORDS_TABLE} WHERE id >= ? AND id < ?"  # noqa: S608
_PENDING = f"SELECT coalesce(sum(upto - done), 0) FROM {BACKLOG_TABLE}"  # noqa: S608
_BACKLOG_ROWS = f"SELECT session, done, upto FROM {BACKLOG_TABLE} ORDER BY session LIMIT ?"  # noqa: S608
_BACKLOG_RECORDS = (
    f"SELECT r.id, s.session_id, r.record_id, r.data FROM {RECORDS_TABLE} AS r "  # noqa: S608
    f"JOIN {SESSIONS_TABLE} AS s ON s.id = r.session WHERE r.id >= ? AND r.id < ? "
    "ORDER BY r.id LIMIT ?"
)
_BACKLOG_DONE = f"UPDATE {BACKLOG_TABLE} SET done = max(done, ?) WHERE session = ?"  # noqa: S608
_BACKLOG_DROP = f"DELETE FROM {BACKLOG_TABLE} WHERE done >= upto OR session = ?"  # noqa: S608
_BACKLOG_FORGET = f"DELETE FROM {BACKLOG_TABLE} WHERE session = ?"  # noqa: S608
#: The sessions (newest first, as ``recent_sessions``) holding a record that matches ?7.
_SESSIONS = (
    f"SELECT session_id, updated_at FROM {SESSIONS_TABLE} "  # noqa: S608
    f"WHERE id IN (SELECT rowid >> 32 FROM {FULLTEXT_TABLE} WHERE {FULLTEXT_TABLE} MATCH ?7) "
    "AND (updated_at, session_id) < (?1, ?2) AND session_id >= ?3{before} "
    "AND (expires_at IS NULL OR expires_at > ?5) "
    "ORDER BY updated_at DESC, session_id DESC LIMIT ?6"
)
_SESSIONS_SQL = {
    bounded: _SESSIONS.format(before=" AND session_id < ?4" if bounded else "")
    for bounded in (True, False)
}
# What FTS5 would cut a word into: quoting each piece keeps every character literal.
_PIECE = re.compile(r"[^\W_]+")


def create_v3(db: sqlite_utils.Database) -> None:
    """The migration to version 3 (see :data:`CREATE_V3`)."""
    for statement in CREATE_V3:
        db.execute(statement)
    # SQLite 3.44+: a deleted row's words leave the index's pages at once, not at the next
    # merge (a persistent setting of the table). Older libraries lack it: see SECURITY.md.
    with contextlib.suppress(sqlite3.OperationalError):
        db.execute(
            f"INSERT INTO {FULLTEXT_TABLE} ({FULLTEXT_TABLE}, rank) VALUES ('secure-delete', 1)"  # noqa: S608
        )


def match_expression(groups: Sequence[Sequence[str]]) -> str | None:
    """The FTS5 query for ``groups`` (a record matches when, for one group, each word is
    the start of one of its words); ``None`` when no group has a word."""
    alternatives = []
    for group in groups:
        pieces = [piece for word in group for piece in _PIECE.findall(word)]
        if pieces:
            alternatives.append("(" + " AND ".join(f'"{piece}"*' for piece in pieces) + ")")
    return " OR ".join(alternatives) if alternatives else None


def add_fulltext(
    connection: sqlite3.Connection,
    session_id: str,
    records: Sequence[Record],
    words: Sequence[str],
    first: int | None = None,
) -> None:
    """Index the words of ``records`` just appended to ``session_id`` (in its transaction).

    ``first``: the row id the append stored the whole batch from, in order (what
    ``_append`` returns); then nothing is looked up. Otherwise (a retry) the batch's stored
    records are the session's last ``len(records)`` positions at most; those whose id is in
    the batch get their words (a retry writes the same words again)."""
    if first is not None:
        connection.executemany(
            _INSERT_WORDS,
            [(first + offset, text) for offset, text in enumerate(words) if text],
        )
        return
    row = connection.execute(_SESSION_END, (session_id,)).fetchone()
    if row is None:
        return
    session, length = row
    base = session << SEQ_BITS
    wanted = {record.id: text for record, text in zip(records, words, strict=True) if text}
    if not wanted:
        return
    tail = connection.execute(_TAIL_IDS, (base + max(length - len(records), 0), base + length))
    connection.executemany(
        _INSERT_WORDS,
        [(rowid, wanted[record_id]) for rowid, record_id in tail if record_id in wanted],
    )


def delete_words(connection: sqlite3.Connection, session: int) -> None:
    """Drop the index rows and the backlog of the session with row id ``session``."""
    connection.execute(_DELETE_WORDS, session_range(session))
    connection.execute(_BACKLOG_FORGET, (session,))


T = TypeVar("T")


class FulltextHooks:
    """The ``fulltext`` hooks of :class:`~chatkeep.sqlite.SQLiteStore` (a mixin)."""

    _tenant: str
    _ttl: float | None
    _next_purge: float
    _no_tables: bool
    read_only: bool
    path: str

    if TYPE_CHECKING:
        _faults: Any

        def _write(self, work: Callable[..., T], *arguments: Any) -> T: ...
        def _key(self, session_id: str) -> str: ...
        def _key_range(self, prefix: str | None) -> tuple[str, str | None] | None: ...
        def _check_open(self) -> None: ...
        def _handle(self) -> Any: ...
        def _tables_missing(self, connection: sqlite3.Connection) -> bool: ...
        def _purge_some(self, now: float) -> None: ...
        def _refuse_writes(self, operation: str) -> None: ...
        def _append_bodies(
            self,
        ) -> tuple[Callable[..., int | None], Callable[..., int | None]]: ...
        def _clock(self) -> float: ...

    def fulltext_append(self, session_id: str, records: list[Record], words: list[str]) -> None:
        """``append``, and the records' words into the index in the same transaction."""
        self._refuse_writes("append")
        append, _ = self._append_bodies()
        self._indexed_write(append, session_id, records, words)

    def fulltext_append_if(
        self, session_id: str, records: list[Record], after: str | None, words: list[str]
    ) -> None:
        """``append_if``, and the records' words into the index in the same transaction."""
        self._refuse_writes("append_if")
        _, append_if = self._append_bodies()
        body = functools.partial(append_if, after=after)
        self._indexed_write(body, session_id, records, words)

    def _indexed_write(
        self,
        body: Callable[..., int | None],
        session_id: str,
        records: list[Record],
        words: list[str],
    ) -> None:
        now = self._clock()
        expires_at = None if self._ttl is None else now + self._ttl
        self._write(_indexed, body, self._key(session_id), records, now, expires_at, words)
        if now >= self._next_purge:
            self._purge_some(now)

    def _query(self, sql: str, parameters: Sequence[Any]) -> list[Any]:
        self._check_open()
        handle = self._handle()
        with handle.lock, self._faults.mapped():
            if self._no_tables and self._tables_missing(handle.connection):
                return []
            rows: list[Any] = handle.connection.execute(sql, parameters).fetchall()
            return rows

    def fulltext_sessions(
        self,
        groups: list[list[str]],
        prefix: str | None,
        before: tuple[float, str] | None,
        limit: int,
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` live sessions holding a record that matches one of ``groups``,
        in ``recent_sessions``'s order and paging."""
        expression = match_expression(groups)
        bounds = self._key_range(prefix)
        if expression is None or bounds is None:
            return []
        lower, upper = bounds
        tenant = self._tenant
        cursor = (float("inf"), "") if before is None else (before[0], tenant + before[1])
        found: list[tuple[str, float]] = []
        while len(found) < limit:
            want = limit - len(found)
            parameters = (*cursor, lower, upper, self._clock(), want, expression)
            page = self._query(_SESSIONS_SQL[upper is not None], parameters)
            for key, updated in page:
                if tenant or "\x00" not in key:  # the default namespace: skip tenants' keys
                    found.append((key[len(tenant) :], updated))
            if len(page) < want:
                break
            cursor = (page[-1][1], page[-1][0])
        return found

    def fulltext_pending(self) -> int:
        """How many records stored before the index existed are not indexed yet."""
        rows = self._query(_PENDING, ())
        return int(rows[0][0]) if rows else 0

    def fulltext_backlog(self, limit: int) -> list[tuple[int, str, Record]]:
        """Up to ``limit`` records not indexed yet, as ``(row id, session id, record)``,
        in row-id order; drops backlog rows with nothing left to index."""
        if self.read_only:
            return []
        return self._write(_backlog, limit)

    def fulltext_backfill(self, entries: list[tuple[int, str]]) -> None:
        """Index ``(row id, words)`` of records :meth:`fulltext_backlog` returned, and move
        the backlog past them, in one transaction."""
        self._write(_backfill, entries)


def _indexed(  # noqa: PLR0917 (SQLiteStore._write hands a body its arguments positionally)
    connection: sqlite3.Connection,
    body: Callable[..., int | None],
    key: str,
    records: list[Record],
    now: float,
    expires_at: float | None,
    words: list[str],
) -> None:
    first = body(connection, key, records, now, expires_at)
    add_fulltext(connection, key, records, words, first)


def _backlog(connection: sqlite3.Connection, limit: int) -> list[tuple[int, str, Record]]:
    """The backlog's next records; the session of each is its stored key (the index is the
    file's, every namespace's: ``chatkeep index build`` is an operation on the file)."""
    found: list[tuple[int, str, Record]] = []
    for session, done, upto in connection.execute(_BACKLOG_ROWS, (limit,)).fetchall():
        base = session << SEQ_BITS
        rows = connection.execute(
            _BACKLOG_RECORDS, (base + done, base + upto, limit - len(found))
        ).fetchall()
        if not rows:  # deleted, expired or cut short since: nothing left to index
            connection.execute(_BACKLOG_FORGET, (session,))
            continue
        found += [(rowid, key, Record(rid, bytes(data))) for rowid, key, rid, data in rows]
        if len(found) >= limit:
            break
    return found


def _backfill(connection: sqlite3.Connection, entries: list[tuple[int, str]]) -> None:
    connection.executemany(_INSERT_WORDS, [(rowid, words) for rowid, words in entries if words])
    ends: dict[int, int] = {}
    for rowid, _ in entries:
        session, position = rowid >> SEQ_BITS, rowid & ((1 << SEQ_BITS) - 1)
        ends[session] = max(ends.get(session, 0), position + 1)
    for session, end in ends.items():
        connection.execute(_BACKLOG_DONE, (end, session))
    connection.execute(_BACKLOG_DROP, (-1,))
