"""The ``recent`` capability on SQLite: schema version 2's ``updated_at`` column and index,
the migration of a version-1 file, read-only handles of one, and what a listing reads."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from chatkeep.core import AgentSession, HistoryProvider, Message, Record, Store, new_id, open_store
from chatkeep.core.memory import MemoryStore
from chatkeep.core.metadata import list_session_infos
from chatkeep.sqlite import SQLiteStore
from chatkeep.sqlite.layout import record_rowid
from chatkeep.sqlite.migrations import MIGRATIONS, migrate, schema_version
from chatkeep.sqlite.sql import RECENT_SQL


def chat(store: Store, session_id: str, text: str) -> None:
    """One turn stored the way the agent does (stamped with the storage time)."""
    provider = HistoryProvider(store)
    session = AgentSession(session_id)

    async def run() -> None:
        sent = await provider.invoking(session, [Message.user(text, message_id=new_id())])
        await provider.invoked(session, sent, [Message.assistant("ok", message_id=new_id())])

    asyncio.run(run())


class Clock:
    """A settable clock for the store."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _ids(store: Store, prefix: str | None = None) -> list[str]:
    return [session_id for session_id, _ in store.recent_sessions(prefix)]


def test_order_retry_and_ties(db_path: Path) -> None:
    clock = Clock()
    store = Store(SQLiteStore(db_path, clock=clock))
    for name in ("b", "a", "c"):
        clock.now += 1
        store.append(name, [Record("r1", b"x")])
    assert _ids(store) == ["c", "a", "b"]
    assert dict(store.recent_sessions())["a"] == datetime.fromtimestamp(
        1_700_000_002.0, timezone.utc
    )
    clock.now += 1
    store.append("b", [Record("r1", b"x")])  # a retry that stores nothing
    assert _ids(store) == ["c", "a", "b"]
    store.append("b", [Record("r1", b"x"), Record("r2", b"y")])  # stores r2
    assert _ids(store) == ["b", "c", "a"]
    store.append("a", [Record("r2", b"y")])  # same time as b: ties by id, descending
    assert _ids(store) == ["b", "a", "c"]
    store.close()


def test_ttl_expiry_and_delete(db_path: Path) -> None:
    clock = Clock()
    store = Store(SQLiteStore(db_path, clock=clock, ttl=60))
    store.append("old", [Record("r", b"x")])
    clock.now += 30
    store.append("new", [Record("r", b"x")])
    store.append("gone", [Record("r", b"x")])
    store.delete("gone")
    assert _ids(store) == ["new", "old"]
    clock.now += 40  # "old" is 70 s idle, past its ttl; nothing purged it yet
    assert _ids(store) == ["new"]
    store.close()


def test_namespaces_and_prefixes_in_pages(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import chatkeep.core.store as store_module

    monkeypatch.setattr(store_module, "RECENT_PAGE", 4)
    clock = Clock()
    plain = Store(SQLiteStore(db_path, clock=clock))
    tenant = Store(SQLiteStore(db_path, clock=clock, namespace="t"))
    for n in range(10):
        clock.now += 1
        plain.append(f"p-{n}", [Record("r", b"x")])
        tenant.append(f"p-{n}", [Record("r", b"x")])  # newer: the default's walk skips them
        tenant.append(f"q-{n}", [Record("r", b"x")])
    newest = [f"p-{n}" for n in reversed(range(10))]
    assert _ids(plain) == newest
    assert _ids(tenant, "p-") == newest
    assert _ids(tenant) == [name for n in reversed(range(10)) for name in (f"q-{n}", f"p-{n}")]
    assert [s for s, _ in tenant.recent_sessions(limit=5)] == _ids(tenant)[:5]
    plain.close()
    tenant.close()


def test_a_page_walks_the_index_backwards(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    for n in range(100):
        store.append(f"s{n}", [Record("r", b"x")])
    connection = store._handle().connection
    connection.execute("ANALYZE")
    for bounded in (True, False):
        plan = connection.execute(
            "EXPLAIN QUERY PLAN " + RECENT_SQL[bounded, True], (1e18, "", "a", "b", 0.0, 10)
        ).fetchall()
        assert [row[3] for row in plan] == [
            "SEARCH chatkeep_sessions USING INDEX chatkeep_sessions_updated_at "
            "((updated_at,session_id)<(?,?))"
        ]
    store.close()


def test_listing_the_newest_reads_only_those_shown(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"sqlite:///{db_path}")
    for n in range(60):
        chat(store, f"chat-{n:03d}", f"question {n}")
    read: list[str] = []
    real_read = SQLiteStore.read

    def counting(self: SQLiteStore, session_id: str, *args: int | None) -> list[Record]:
        read.append(session_id)
        return real_read(self, session_id, *args)

    monkeypatch.setattr(SQLiteStore, "read", counting)
    store = open_store(f"sqlite:///{db_path}")  # a Store bound to the counting read
    listed = [info.id for info in list_session_infos(store, limit=3)]
    assert listed == ["chat-059", "chat-058", "chat-057"]
    assert set(read) == set(listed)
    assert len(read) <= 3 * 3
    store.close()


# -- a file written by the previous schema -------------------------------------------------


def _version_1_file(path: Path) -> dict[str, float | None]:
    """A schema-1 file (no updated_at) holding sessions the core wrote, one of them with a
    record that carries no storage time; returns each session's last stamp."""
    source = Store(MemoryStore())
    stamps: dict[str, float | None] = {}
    for name in ("older", "newer", "newest"):
        chat(source, name, f"about {name}")
    source.append("unstamped", [Record("u1", b'{"type": "message", "role": "user"}')])
    connection = sqlite3.connect(path, isolation_level=None)
    migrate(connection, MIGRATIONS[:1])
    assert schema_version(connection) == 1
    for row, name in enumerate(("older", "newer", "newest", "unstamped"), start=1):
        records = source.read(name)
        connection.execute(
            "INSERT INTO chatkeep_sessions (id, session_id, length) VALUES (?, ?, ?)",
            (row, name, len(records)),
        )
        for seq, record in enumerate(records):
            connection.execute(
                "INSERT INTO chatkeep_records VALUES (?, ?, ?, ?)",
                (record_rowid(row, seq), row, record.id, record.data),
            )
    connection.close()
    from chatkeep.core.views import read_log

    for name in ("older", "newer", "newest", "unstamped"):
        at = read_log(source, name)[-1].stored_at
        stamps[name] = None if at is None else at.timestamp()
    return stamps


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_version_1_file_is_migrated_with_its_records_times(db_path: Path) -> None:
    stamps = _version_1_file(db_path)
    store = Store(SQLiteStore(db_path))
    assert schema_version(store.backend._handle().connection) == 3  # type: ignore[attr-defined]
    pairs = list(store.recent_sessions())
    assert [name for name, _ in pairs] == ["newest", "newer", "older", "unstamped"]
    for name, updated in pairs:
        assert updated.timestamp() == pytest.approx(stamps[name] or 0.0, abs=1e-6)
    # Listings agree with the index, and a new append moves a session to the top.
    assert [i.id for i in list_session_infos(store)] == [name for name, _ in pairs]
    store.append("older", [Record("o9", b'{"type": "message", "role": "user"}')])
    assert _ids(store)[0] == "older"
    store.close()


def test_a_read_only_handle_of_a_version_1_file_lists_without_migrating(
    db_path: Path,
) -> None:
    _version_1_file(db_path)
    before = _digest(db_path)
    store = open_store(f"sqlite:///{db_path}?mode=ro")
    assert not store.supports("recent")
    listed = [info.id for info in list_session_infos(store)]  # the tail-read fallback
    assert listed == ["newest", "newer", "older", "unstamped"]
    store.close()
    assert _digest(db_path) == before
    connection = sqlite3.connect(db_path)
    assert schema_version(connection) == 1
    connection.close()


@pytest.fixture
def empty_ro(tmp_path: Path) -> Iterator[Store]:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    store = open_store(f"sqlite:///{path}?mode=ro")
    yield store
    store.close()


def test_a_read_only_handle_of_a_file_without_tables_lists_nothing(empty_ro: Store) -> None:
    assert empty_ro.supports("recent")
    assert list(empty_ro.recent_sessions()) == []
