"""Schema creation, the version table, migrations and the query plans of every read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from chatkeep.core import Record
from chatkeep.sqlite import IncompatibleSchema, SQLiteStore
from chatkeep.sqlite import store as store_module
from chatkeep.sqlite.migrations import (
    LATEST_VERSION,
    MIGRATIONS,
    Migration,
    migrate,
    schema_version,
)
from chatkeep.sqlite.sql import read_positions_statement
from chatkeep.sqlite.store import read_statement


def test_new_file_gets_the_schema_and_a_version_row(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    db = sqlite_utils.Database(db_path)
    assert {"chatkeep_schema", "chatkeep_sessions", "chatkeep_records"} <= set(db.table_names())
    rows = list(db["chatkeep_schema"].rows)
    assert [row["version"] for row in rows] == [1, 2, 3] == [1, 2, LATEST_VERSION]
    assert rows[0]["description"] and rows[0]["applied_at"] > 0
    records = db.table("chatkeep_records")
    assert [column.name for column in records.columns] == ["id", "session", "record_id", "data"]
    assert records.pks == ["id"]
    [index] = records.indexes
    assert (index.name, index.columns, index.unique) == (
        "chatkeep_records_record_id",
        ["session", "record_id"],
        1,
    )
    db.close()


def test_reopening_is_idempotent(db_path: Path, raw: sqlite3.Connection) -> None:
    SQLiteStore(db_path).close()
    before = raw.execute("SELECT * FROM chatkeep_schema").fetchall()
    schema = raw.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()
    for _ in range(3):
        SQLiteStore(db_path).close()
    assert raw.execute("SELECT * FROM chatkeep_schema").fetchall() == before
    assert raw.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall() == schema


def test_file_is_in_wal_mode_with_full_sync(store: SQLiteStore, raw: sqlite3.Connection) -> None:
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    connection = store._handle().connection
    assert connection.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL: survives power loss
    assert connection.execute("PRAGMA secure_delete").fetchone() == (1,)
    assert connection.isolation_level is None


def test_an_existing_file_shares_with_other_tables(db_path: Path) -> None:
    connection = sqlite3.connect(db_path)
    connection.execute("CREATE TABLE app_users (name TEXT)")
    connection.commit()
    connection.close()
    with SQLiteStore(db_path) as backend:
        backend.append("s", [Record("a", b"x")])
    assert "app_users" in sqlite_utils.Database(db_path).table_names()


def _in_memory() -> sqlite3.Connection:
    return sqlite3.connect(":memory:", isolation_level=None)


def test_later_migrations_apply_once_in_order() -> None:
    connection = _in_memory()
    assert schema_version(connection) == 0
    assert migrate(connection) == LATEST_VERSION
    applied: list[int] = []

    def add_column(db: sqlite_utils.Database) -> None:
        applied.append(2)
        db.execute("ALTER TABLE chatkeep_sessions ADD COLUMN note TEXT")

    later = LATEST_VERSION + 1
    extended = (*MIGRATIONS, Migration(later, "session notes", add_column))
    assert migrate(connection, extended) == later
    assert migrate(connection, extended) == later
    assert applied == [2]
    assert [row[0] for row in connection.execute("SELECT version FROM chatkeep_schema")] == [
        *range(1, later + 1)
    ]


def test_a_failing_migration_changes_nothing() -> None:
    connection = _in_memory()
    migrate(connection)

    def broken(db: sqlite_utils.Database) -> None:
        db.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        migrate(connection, (*MIGRATIONS, Migration(LATEST_VERSION + 1, "broken", broken)))
    assert schema_version(connection) == LATEST_VERSION
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    assert "half_done" not in tables
    assert not connection.in_transaction


def test_a_newer_schema_is_refused(db_path: Path, raw: sqlite3.Connection) -> None:
    SQLiteStore(db_path).close()
    raw.execute("INSERT INTO chatkeep_schema VALUES (99, 'from the future', 0)")
    with pytest.raises(IncompatibleSchema, match=r"version 99.*upgrade chatkeep-sqlite"):
        SQLiteStore(db_path)


# -- query plans -----------------------------------------------------------------------------


def _plan(connection: sqlite3.Connection, sql: str, parameters: tuple[object, ...]) -> list[str]:
    return [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + sql, parameters)]


@pytest.fixture
def populated(store: SQLiteStore) -> sqlite3.Connection:
    for session in range(3):
        for batch in range(20):
            store.append(f"s{session}", [Record(f"{batch}-{i}", b"x" * 300) for i in range(50)])
    connection = store._handle().connection
    connection.execute("ANALYZE")  # statistics must not tempt the planner into a scan
    return connection


SLICES = {
    "head": (0, 50),
    "full": (0, None),
    "tail": (-50, None),
    "from start": (10, None),
    "middle": (10, 60),
    "tail window": (-60, -10),
    "mixed": (10, -10),
    "mixed reversed": (-60, 900),
}


@pytest.mark.parametrize("name", SLICES)
def test_every_read_is_one_indexed_range(populated: sqlite3.Connection, name: str) -> None:
    start, stop = SLICES[name]
    sql, bounds = read_statement(start, stop)
    plan = _plan(populated, sql, ("s1", 0.0, *bounds))
    searches = [step for step in plan if step.startswith("SEARCH")]
    assert searches == [
        "SEARCH chatkeep_sessions USING INDEX sqlite_autoindex_chatkeep_sessions_1 (session_id=?)",
        "SEARCH chatkeep_records USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)",
    ], plan
    # The only scans are of the one-row session header the statement materialises.
    assert all(step == "SCAN s" for step in plan if "SCAN" in step), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


@pytest.mark.parametrize("name", SLICES)
def test_the_positioned_read_is_one_indexed_range(populated: sqlite3.Connection, name: str) -> None:
    start, stop = SLICES[name]
    sql, bounds = read_positions_statement(start, stop)
    plan = _plan(populated, sql, ("s1", 0.0, *bounds))
    assert len(plan) == 2, plan
    assert plan[0].startswith("SEARCH s USING INDEX sqlite_autoindex_chatkeep_sessions_1")
    assert plan[1] == "SEARCH r USING INTEGER PRIMARY KEY (rowid>? AND rowid<?) LEFT-JOIN"


@pytest.mark.parametrize("name", SLICES)
def test_both_read_statements_return_the_same_slice(store: SQLiteStore, name: str) -> None:
    store.append("s", [Record(f"r{i}", b"%d" % i) for i in range(100)])
    connection = store._handle().connection
    start, stop = SLICES[name]
    sql, bounds = read_statement(start, stop)
    header, *rows = connection.execute(sql, ("s", 0.0, *bounds)).fetchall()
    positioned, positioned_bounds = read_positions_statement(start, stop)
    expected = [Record(f"r{i}", b"%d" % i) for i in range(100)][start:stop]
    assert header == (100, None)
    assert rows == [tuple(record) for record in expected]
    full = connection.execute(positioned, ("s", 0.0, *positioned_bounds)).fetchall()
    assert [(row[0], row[1]) for row in full if row[0] is not None] == rows
    assert store.read("s", start, stop) == expected


def _steps(connection: sqlite3.Connection, sql: str, parameters: tuple[object, ...]) -> int:
    """How many SQLite VM instructions a statement executes."""
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0

    connection.set_progress_handler(tick, 1)
    try:
        connection.execute(sql, parameters).fetchall()
    finally:
        connection.set_progress_handler(None, 1)
    return count


def test_tail_read_costs_the_window_not_the_log(store: SQLiteStore) -> None:
    store.append("short", [Record(f"r{i}", b"x") for i in range(60)])
    for batch in range(20):
        store.append("long", [Record(f"{batch}-{i}", b"x") for i in range(500)])
    connection = store._handle().connection
    sql, bounds = read_statement(-50, None)
    short = _steps(connection, sql, ("short", 0.0, *bounds))
    long = _steps(connection, sql, ("long", 0.0, *bounds))
    full_sql, full_bounds = read_statement(0, None)
    full = _steps(connection, full_sql, ("long", 0.0, *full_bounds))
    assert abs(long - short) <= short // 10, (short, long)  # 60 vs 10,000 records: same cost
    assert full > 50 * long  # while reading everything does scale with the log


@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("bounded", [True, False])
def test_listing_walks_the_session_index(
    populated: sqlite3.Connection, inclusive: bool, bounded: bool
) -> None:
    sql = store_module._LIST_SQL[inclusive, bounded]
    parameters: tuple[object, ...] = ("s", "t", 0.0, 10) if bounded else ("s", 0.0, 10)
    plan = _plan(populated, sql, parameters)
    assert plan == [
        "SEARCH s USING INDEX sqlite_autoindex_chatkeep_sessions_1 (session_id>?"
        + (" AND session_id<?)" if bounded else ")")
    ]


def test_purge_walks_the_expiry_index(populated: sqlite3.Connection) -> None:
    plan = _plan(populated, store_module._SELECT_EXPIRED, (0.0, 100))
    assert plan == [
        "SEARCH chatkeep_sessions USING COVERING INDEX chatkeep_sessions_expires_at (expires_at<?)"
    ]


def test_append_and_delete_statements_search(populated: sqlite3.Connection) -> None:
    for sql, parameters in [
        (store_module._SELECT_SESSION, ("s1",)),
        (store_module._DELETE_RECORDS, (1 << 32, 2 << 32)),
    ]:
        plan = _plan(populated, sql, parameters)
        assert len(plan) == 1 and plan[0].startswith("SEARCH"), (sql, plan)
