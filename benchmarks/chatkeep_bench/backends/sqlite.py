"""SQLite: chatkeep on a file vs hand-written ``sqlite3`` vs the peers.

Every variant has a file of its own in the run's temporary folder, with the same settings
chatkeep uses by default (WAL, ``synchronous=FULL``), so no variant's checkpoints or
locks land on another's turns.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from chatkeep.core import new_id

from ..adapters import adapter_rows
from ..peers import AgentsSessions, LangChainHistories, MafProvider, optional
from ..variants import (
    AnyVariant,
    ChatkeepBackend,
    ChatkeepFullLoad,
    ChatkeepFullLoadAsync,
    ChatkeepHistoryProvider,
    ChatkeepStore,
    ChatkeepSyncMessages,
    Kind,
    Level,
    Unavailable,
    Variant,
    batches,
    role_of,
)
from ..workload import WINDOW, encode_dict, exchange, message_dict, payload
from . import BackendRun, Context

__all__ = ["RawSQLite", "setup"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID
"""
_TAIL = "SELECT message_id, data FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT ?"
# The exchange is one statement, so autocommit makes it one transaction; its positions are
# read inside it (under the write lock), so concurrent writers cannot collide.
_APPEND_EXCHANGE = (
    "WITH last(seq) AS (SELECT coalesce(max(seq), -1) FROM messages WHERE session_id = ?1) "
    "INSERT INTO messages (session_id, seq, message_id, data) "
    "SELECT ?1, seq + 1, ?2, ?3 FROM last UNION ALL SELECT ?1, seq + 2, ?4, ?5 FROM last"
)
_ALL = "SELECT message_id, data FROM messages WHERE session_id = ? ORDER BY seq"
_LAST_SEQ = "SELECT coalesce(max(seq), -1) FROM messages WHERE session_id = ?"
_INSERT = "INSERT INTO messages (session_id, seq, message_id, data) VALUES (?, ?, ?, ?)"


class RawSQLite(Variant):
    """The best hand-written turn on ``sqlite3``: a table clustered on
    ``(session_id, seq)`` (WITHOUT ROWID), so the last 50 rows of a session are adjacent
    and found by one index descent; the append is one statement (one implicit
    transaction) that takes the next two positions from the index's end. No idempotency
    (a retried batch duplicates), no session table, no TTL. One connection per thread.

    ``decode=True`` is the messages level: rows go through ``json.loads`` and the new
    messages are dicts encoded with ``json.dumps``.
    """

    kind: Kind = "raw"

    def __init__(self, path: Path, *, decode: bool, full: bool = False) -> None:
        self.name = "raw sqlite3 + json" if decode else "raw sqlite3"
        self.level: Level = "messages" if decode else "records"
        self._full = full
        if full:  # the full level: the whole session decoded, no append
            self.name, self.level, decode = "raw sqlite3 + json (whole session)", "full", True
        self._path = str(path)
        self._decode = decode
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(
                self._path, isolation_level=None, check_same_thread=False, timeout=30
            )
            connection.execute("PRAGMA journal_mode = wal")
            connection.execute("PRAGMA synchronous = full")
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    def open(self) -> None:
        self._connection().execute(_SCHEMA)

    def fill(self, session_id: str, count: int) -> None:
        connection = self._connection()
        for part in batches(count):
            connection.execute("BEGIN IMMEDIATE")
            (last,) = connection.execute(_LAST_SEQ, (session_id,)).fetchone()
            connection.executemany(
                _INSERT,
                [
                    (session_id, last + 1 + i, new_id(), payload(role_of(n), n))
                    for i, n in enumerate(part)
                ],
            )
            connection.execute("COMMIT")

    def _rows(self, number: int) -> list[tuple[str, bytes]]:
        if self._decode:
            rows = []
            for kind in exchange(number):
                message_id = new_id()
                rows.append((message_id, encode_dict(message_dict(kind, number, message_id))))
            return rows
        return [(new_id(), payload(kind, number % 128)) for kind in exchange(number)]

    def load(self, session_id: str) -> object:
        if self._full:
            return [json.loads(data) for _, data in self._connection().execute(_ALL, (session_id,))]
        rows = self._connection().execute(_TAIL, (session_id, WINDOW)).fetchall()
        rows.reverse()
        if self._decode:
            return [json.loads(data) for _, data in rows]
        return rows

    def turn(self, session_id: str, number: int) -> None:
        self.load(session_id)
        if self._full:
            return
        (first_id, first), (second_id, second) = self._rows(number)
        self._connection().execute(
            _APPEND_EXCHANGE, (session_id, first_id, first, second_id, second)
        )

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()


def _peers(folder: Path, token: str) -> list[AnyVariant | Unavailable]:
    def agents_sqlite() -> AnyVariant:
        from agents import SQLiteSession

        path = folder / "agents.db"
        return AgentsSessions("Agents SQLiteSession", lambda sid: SQLiteSession(sid, path))

    def agents_sqlalchemy() -> AnyVariant:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(f"sqlite+aiosqlite:///{folder / 'agents_sa.db'}")

        async def dispose() -> None:
            await engine.dispose()

        return AgentsSessions(
            "Agents SQLAlchemySession (aiosqlite)",
            lambda sid: SQLAlchemySession(sid, engine=engine, create_tables=True),
            after=dispose,
        )

    def langchain_sql() -> AnyVariant:
        from langchain_community.chat_message_histories import SQLChatMessageHistory
        from sqlalchemy import create_engine

        engine = create_engine(f"sqlite:///{folder / 'langchain.db'}")
        return LangChainHistories(
            "LangChain SQLChatMessageHistory",
            lambda sid: SQLChatMessageHistory(session_id=sid, connection=engine),
            after=engine.dispose,
            note="no tail read: loads the whole session, then keeps the last 50",
        )

    def maf_file() -> AnyVariant:
        from agent_framework import FileHistoryProvider

        return MafProvider(
            "MAF FileHistoryProvider (JSONL file)",
            lambda: FileHistoryProvider(folder / "maf"),
            note="a JSON Lines file per session, not SQLite; loads the whole file twice a turn",
            elsewhere=True,
        )

    def maf_memory() -> AnyVariant:
        from agent_framework import InMemoryHistoryProvider

        return MafProvider(
            "MAF InMemoryHistoryProvider (no storage)",
            InMemoryHistoryProvider,
            note="a list in the session's state: no storage at all, for scale",
            elsewhere=True,
        )

    return [
        optional("Agents SQLiteSession", ["agents"], "openai-agents", agents_sqlite),
        optional(
            "Agents SQLAlchemySession (aiosqlite)",
            ["agents", "sqlalchemy", "aiosqlite"],
            "openai-agents[sqlalchemy] aiosqlite",
            agents_sqlalchemy,
        ),
        optional(
            "LangChain SQLChatMessageHistory",
            ["langchain_community", "sqlalchemy"],
            "langchain-community",
            langchain_sql,
        ),
        optional(
            "MAF FileHistoryProvider (JSONL file)",
            ["agent_framework"],
            "agent-framework-core",
            maf_file,
        ),
        optional(
            "MAF InMemoryHistoryProvider (no storage)",
            ["agent_framework"],
            "agent-framework-core",
            maf_memory,
        ),
    ]


def setup(context: Context) -> BackendRun:
    """chatkeep on ``sqlite:///<tmp>/chatkeep*.db`` and the rest on files beside it."""
    folder = context.workdir / "sqlite"
    folder.mkdir()
    variants: list[AnyVariant | Unavailable] = [
        RawSQLite(folder / "raw.db", decode=False),
        ChatkeepStore(f"sqlite:///{folder / 'chatkeep.db'}"),
        ChatkeepBackend(f"sqlite:///{folder / 'chatkeep_backend.db'}"),
        RawSQLite(folder / "raw_json.db", decode=True),
        ChatkeepHistoryProvider(f"sqlite:///{folder / 'chatkeep_provider.db'}"),
        ChatkeepHistoryProvider(f"sqlite:///{folder / 'chatkeep_resumed.db'}", resumed=True),
        ChatkeepSyncMessages(f"sqlite:///{folder / 'chatkeep_view.db'}"),
        RawSQLite(folder / "raw_full.db", decode=True, full=True),
        ChatkeepFullLoad(f"sqlite:///{folder / 'chatkeep_full.db'}"),
        ChatkeepFullLoadAsync(f"sqlite:///{folder / 'chatkeep_full_async.db'}"),
    ]
    if context.peers:
        variants += _peers(folder, context.token)
        variants += adapter_rows(lambda tag: f"sqlite:///{folder / f'adapter_{tag}.db'}")
    return BackendRun(
        "sqlite",
        "one file per variant in a temporary folder (WAL, synchronous=FULL)",
        variants,
    )
