"""The two hooks and the optional ones, on a real file."""

from __future__ import annotations

import gc
import sqlite3
import threading
from pathlib import Path
from typing import cast

import pytest

from chatkeep.core import CorruptRecord, Record, RecordConflict, StoreUnavailable
from chatkeep.sqlite import SQLiteStore, StoreFull
from chatkeep.sqlite import store as store_module
from chatkeep.sqlite.store import prefix_successor


def records(*ids: str) -> list[Record]:
    return [Record(record_id, f"data-{record_id}".encode()) for record_id in ids]


def seqs(raw: sqlite3.Connection, session_id: str) -> list[int]:
    return [
        row[0]
        for row in raw.execute(
            "SELECT r.id - (s.id << 32) FROM chatkeep_records r "
            "JOIN chatkeep_sessions s ON s.id = r.session WHERE s.session_id = ? ORDER BY r.id",
            (session_id,),
        )
    ]


def test_append_then_read_in_order(store: SQLiteStore) -> None:
    store.append("s", records("a", "b"))
    store.append("s", records("c"))
    assert store.read("s") == records("a", "b", "c")


def test_unknown_session_reads_empty(store: SQLiteStore) -> None:
    assert store.read("nobody") == []
    assert store.read("nobody", -5) == []


BOUNDS = [None, 0, 1, 3, 9, 10, 11, 50, -1, -3, -9, -10, -11, -50, 10**30, -(10**30)]


@pytest.mark.parametrize("start", [b for b in BOUNDS if b is not None])
@pytest.mark.parametrize("stop", BOUNDS)
def test_slices_match_python(store: SQLiteStore, start: int, stop: int | None) -> None:
    log = records(*(f"r{i}" for i in range(10)))
    store.append("s", log[:4])
    store.append("s", log[4:])
    assert store.read("s", start, stop) == log[start:stop]


def test_same_batch_retry_is_a_no_op(store: SQLiteStore, raw: sqlite3.Connection) -> None:
    batch = records("a", "b", "c")
    store.append("s", batch)
    store.append("s", batch)
    assert store.read("s") == batch
    assert seqs(raw, "s") == [0, 1, 2]


def test_individually_stored_ids_are_skipped(store: SQLiteStore, raw: sqlite3.Connection) -> None:
    store.append("s", records("a", "b"))
    store.append("s", records("x", "b", "y", "a", "z"))
    assert [r.id for r in store.read("s")] == ["a", "b", "x", "y", "z"]
    # seq stays gap-free, so negative slices remain exact after a partial retry.
    assert seqs(raw, "s") == [0, 1, 2, 3, 4]
    assert [r.id for r in store.read("s", -2)] == ["y", "z"]


def test_a_turns_append_is_two_statements_in_its_transaction(store: SQLiteStore) -> None:
    store.append("s", records("a"))
    statements: list[str] = []
    store._handle().connection.set_trace_callback(statements.append)
    store.append("s", records("b", "c"))
    # BEGIN, the session row's reservation (UPDATE ... RETURNING), one INSERT, COMMIT.
    assert len(statements) == 4, statements
    assert store.read("s") == records("a", "b", "c")


def test_a_retry_on_the_short_path_keeps_the_sessions_time(
    store: SQLiteStore, raw: sqlite3.Connection
) -> None:
    store.append("s", records("a", "b"))
    (before,) = raw.execute("SELECT updated_at FROM chatkeep_sessions").fetchone()
    store.append("s", records("b"))  # the reservation moved the row on: undone
    assert raw.execute("SELECT length, updated_at FROM chatkeep_sessions").fetchone() == (2, before)
    store.append("s", records("b", "c"))
    assert store.read("s") == records("a", "b", "c")
    assert seqs(raw, "s") == [0, 1, 2]


@pytest.mark.parametrize("size", [1, 2, 7, 8, 9, 20])
def test_batches_of_any_size_stay_gap_free_under_retries(
    store: SQLiteStore, raw: sqlite3.Connection, size: int
) -> None:
    # Up to INSERT_ROWS_MAX records are one multi-row INSERT, larger batches executemany:
    # both keep seq contiguous when a retried batch meets ids stored already.
    first = records(*(f"a{i}" for i in range(size)))
    store.append("s", first)
    mixed = records(*(f"b{i}" for i in range(size)))
    retry = [item for pair in zip(first, mixed, strict=True) for item in pair]  # old, new, ...
    store.append("s", retry[:size])
    new = [record for record in retry[:size] if record.id.startswith("b")]
    assert store.read("s") == first + new
    assert seqs(raw, "s") == list(range(size + len(new)))
    assert store.read("s", -1) == (first + new)[-1:]
    with pytest.raises(RecordConflict):
        store.append("s", [Record(f"c{i}", b"c") for i in range(size - 1)] + [Record("a0", b"?")])
    assert store.read("s") == first + new


def test_reads_return_records(store: SQLiteStore) -> None:
    store.append("s", records("a", "b", "c"))
    for result in (store.read("s"), store.read("s", -2), store.read("s", 1, 2)):
        assert result and all(type(record) is Record for record in result)
        assert [(record.id, record.data) for record in result] == [tuple(r) for r in result]
    assert store.read("s", 1, 2) == [Record("b", b"data-b")]


def test_a_missing_record_is_named_by_its_position(
    store: SQLiteStore, raw: sqlite3.Connection
) -> None:
    store.append("s", records(*(f"r{i}" for i in range(10))))
    raw.execute("DELETE FROM chatkeep_records WHERE record_id IN ('r4', 'r5')")
    for start, stop in ((0, None), (-7, None), (3, 8), (5, 6), (-6, -5)):
        with pytest.raises(CorruptRecord) as caught:
            store.read("s", start, stop)
        assert caught.value.position == max(range(10)[start:stop][0], 4), (start, stop)
        assert caught.value.session_id == "s"
    assert store.read("s", 0, 4) == records("r0", "r1", "r2", "r3")
    assert store.read("s", -4) == records("r6", "r7", "r8", "r9")
    assert store.read("s", 20) == []


def test_record_ids_are_unique_per_session_not_globally(store: SQLiteStore) -> None:
    store.append("one", records("a"))
    store.append("two", records("a"))
    assert store.read("two") == records("a")


def test_failed_batch_stores_nothing(store: SQLiteStore) -> None:
    store.append("s", records("a"))
    bad = [Record("b", b"fine"), Record("c", cast(bytes, object()))]  # sqlite3 cannot bind it
    with pytest.raises(sqlite3.Error):
        store.append("s", bad)
    assert store.read("s") == records("a")
    store.append("s", records("b"))  # the connection is not left inside a transaction
    assert [r.id for r in store.read("s")] == ["a", "b"]


def test_failed_first_batch_leaves_no_session(store: SQLiteStore) -> None:
    with pytest.raises(sqlite3.Error):
        store.append("new", [Record("a", b"x"), Record("b", cast(bytes, object()))])
    assert store.read("new") == []
    assert list(store.list_sessions()) == []


def test_a_full_session_refuses_more(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "MAX_RECORDS", 3)
    store.append("s", records("a", "b"))
    with pytest.raises(StoreFull, match="would exceed 3 records"):
        store.append("s", records("c", "d"))
    store.append("s", records("c"))
    assert [r.id for r in store.read("s")] == ["a", "b", "c"]


def test_a_full_file_refuses_new_sessions(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "MAX_SESSIONS", 2)
    store.append("one", records("a"))
    store.append("two", records("a"))
    with pytest.raises(StoreFull, match="maximum of 2 sessions"):
        store.append("three", records("a"))
    assert list(store.list_sessions()) == ["one", "two"]


def test_binary_and_large_records_round_trip(store: SQLiteStore) -> None:
    batch = [
        Record("empty", b""),
        Record("all-bytes", bytes(range(256)) * 4),
        Record("big", b"\x00\xff" * 1_000_000),
    ]
    store.append("s", batch)
    assert store.read("s") == batch


@pytest.mark.parametrize(
    "session_id",
    ["%", "_", "a%b", "'; DROP TABLE chatkeep_records; --", "../../etc", "x" * 512, "é🙂\u10ffff"],
)
def test_hostile_session_ids_stay_apart(store: SQLiteStore, session_id: str) -> None:
    store.append(session_id, records("mine"))
    store.append(session_id + "-other", records("theirs"))
    assert store.read(session_id) == records("mine")
    assert session_id in list(store.list_sessions())


def test_delete_erases_and_allows_reuse(store: SQLiteStore, raw: sqlite3.Connection) -> None:
    store.append("s", records("a", "b"))
    store.append("keep", records("k"))
    store.delete("s")
    store.delete("never-existed")
    assert store.read("s") == []
    assert list(store.list_sessions()) == ["keep"]
    assert raw.execute("SELECT count(*) FROM chatkeep_records").fetchone() == (1,)
    store.append("s", records("a"))  # the old ids are gone with the session
    assert store.read("s") == records("a")
    assert seqs(raw, "s") == [0]


def test_list_sessions_sorted_and_filtered_literally(store: SQLiteStore) -> None:
    for session_id in ["a%1", "a_2", "ab", "aX", "A%", "b", "a%"]:
        store.append(session_id, records("r"))
    assert list(store.list_sessions()) == sorted(["a%1", "a_2", "ab", "aX", "A%", "b", "a%"])
    assert list(store.list_sessions("a%")) == ["a%", "a%1"]
    assert list(store.list_sessions("a_")) == ["a_2"]
    assert list(store.list_sessions("A")) == ["A%"]  # case-sensitive, unlike SQLite's LIKE
    assert list(store.list_sessions("")) == list(store.list_sessions())
    assert list(store.list_sessions("zzz")) == []


def test_list_sessions_prefix_at_the_top_of_unicode(store: SQLiteStore) -> None:
    top = "\U0010ffff"
    for session_id in [top, top + "a", top + top, "\ud7ff", "\ue000x"]:
        store.append(session_id, records("r"))
    assert list(store.list_sessions(top)) == [top, top + "a", top + top]
    assert list(store.list_sessions("\ud7ff")) == ["\ud7ff"]
    assert list(store.list_sessions("\ud800")) == []  # lone surrogate: matches nothing


def test_prefix_successor() -> None:
    assert prefix_successor("ab") == "ac"
    assert prefix_successor("a\U0010ffff") == "b"
    assert prefix_successor("\ud7ff") == "\ue000"
    assert prefix_successor("\U0010ffff") is None


def test_list_sessions_pages_by_keyset(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "_LIST_PAGE", 3)
    ids = [f"p{i:02d}" for i in range(10)]
    for session_id in ids:
        store.append(session_id, records("r"))
    store.append("q", records("r"))
    queries: list[str] = []
    connection = store._handle().connection
    connection.set_trace_callback(queries.append)
    listing = store.list_sessions("p")
    assert next(listing) == "p00"
    assert len(queries) == 1  # lazy: one page fetched so far
    assert list(listing) == ids[1:]
    assert len(queries) == 4  # pages of 3, 3, 3, 1


def test_list_sessions_survives_deletes_between_pages(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "_LIST_PAGE", 2)
    for session_id in "abcdef":
        store.append(session_id, records("r"))
    seen = []
    for session_id in store.list_sessions():
        seen.append(session_id)
        if session_id == "b":
            store.delete("c")
    assert seen == ["a", "b", "d", "e", "f"]


def test_data_survives_close_and_reopen(db_path: Path) -> None:
    first = SQLiteStore(db_path)
    first.append("s", records("a", "b"))
    first.close()
    second = SQLiteStore(db_path)
    assert second.read("s") == records("a", "b")
    second.append("s", records("c"))
    assert [r.id for r in second.read("s", -2)] == ["b", "c"]
    second.close()


def test_close_is_idempotent_and_final(store: SQLiteStore) -> None:
    store.append("s", records("a"))
    store.close()
    store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        store.read("s")
    with pytest.raises(StoreUnavailable, match="closed"):
        store.append("s", records("b"))
    with pytest.raises(StoreUnavailable, match="closed"):
        list(store.list_sessions())


def test_close_closes_other_threads_connections(store: SQLiteStore) -> None:
    opened: list[sqlite3.Connection] = []
    ready, release = threading.Event(), threading.Event()

    def use() -> None:
        store.read("s")
        opened.append(store._handle().connection)
        ready.set()
        release.wait(10)  # stay alive: a live thread keeps its connection

    worker = threading.Thread(target=use)
    worker.start()
    ready.wait(10)
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        opened[0].execute("SELECT 1")
    release.set()
    worker.join()


def test_a_finished_threads_connection_is_released(store: SQLiteStore) -> None:
    worker = threading.Thread(target=store.read, args=("s",))
    worker.start()
    worker.join()
    gc.collect()
    assert len(store._handles) == 1  # only the opening thread's connection is left


def test_memory_store_is_private_and_not_durable() -> None:
    one, two = SQLiteStore(":memory:"), SQLiteStore(":memory:")
    one.append("s", records("a"))
    assert two.read("s") == []
    assert "shared" not in one.capabilities and "durable" not in one.capabilities
    assert {"delete", "list_sessions", "close", "ttl"} <= one.capabilities
    assert SQLiteStore.capabilities >= {"shared", "durable"}
    results: list[list[Record]] = []
    worker = threading.Thread(target=lambda: results.append(one.read("s")))
    worker.start()
    worker.join()
    assert results == [records("a")]  # every thread sees the one in-memory database
    one.close()
    two.close()


def test_repr_shows_path_and_ttl(db_path: Path) -> None:
    backend = SQLiteStore(db_path, ttl=90)
    assert repr(backend) == f"<SQLiteStore {str(db_path)!r} ttl=90s>"
    backend.close()
    assert repr(backend).endswith("closed>")
