"""Many threads and many processes on one file."""

from __future__ import annotations

import multiprocessing
import os
import runpy
import sqlite3
import threading
import time
import warnings
from pathlib import Path

import pytest

from chatkeep.core import Record, StoreUnavailable
from chatkeep.sqlite import SQLiteStore

WORKER_SCRIPT = Path(__file__).with_name("_first_open_worker.py")


def assert_batches_whole(records: list[Record], batch_size: int) -> None:
    """Every batch of ``batch_size`` records is contiguous and in order."""
    assert len(records) % batch_size == 0
    for start in range(0, len(records), batch_size):
        batch = [record.id for record in records[start : start + batch_size]]
        prefix = batch[0].rsplit("-", 1)[0]
        assert batch == [f"{prefix}-{i}" for i in range(batch_size)], batch


def test_threads_share_one_store(store: SQLiteStore) -> None:
    errors: list[BaseException] = []
    snapshots: list[list[Record]] = []

    def writer(worker: int) -> None:
        try:
            for batch in range(25):
                store.append(
                    "shared", [Record(f"{worker}-{batch}-{i}", b"x" * 100) for i in range(4)]
                )
                store.append(f"own-{worker}", [Record(str(batch), b"y")])
        except BaseException as exc:
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(50):
                snapshots.append(store.read("shared"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    shared = store.read("shared")
    assert len(shared) == 8 * 25 * 4
    assert_batches_whole(shared, 4)
    for worker in range(8):
        mine = [r.id for r in shared if r.id.startswith(f"{worker}-")]
        assert mine == [f"{worker}-{b}-{i}" for b in range(25) for i in range(4)]
        assert [r.id for r in store.read(f"own-{worker}")] == [str(b) for b in range(25)]
    for snapshot in snapshots:  # readers only ever saw whole batches
        assert_batches_whole(snapshot, 4)


def test_lock_timeout_raises_store_unavailable_and_stores_nothing(
    db_path: Path, raw: sqlite3.Connection
) -> None:
    backend = SQLiteStore(db_path, timeout=0.2)
    backend.append("s", [Record("a", b"x")])
    raw.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"timeout=0.2s; retrying is safe"):
        backend.append("s", [Record("b", b"y")])
    assert time.monotonic() - started < 5
    assert backend.read("s") == [Record("a", b"x")]  # WAL: reads go on meanwhile
    raw.execute("ROLLBACK")
    backend.append("s", [Record("b", b"y")])  # and the retry completes it
    assert [r.id for r in backend.read("s")] == ["a", "b"]
    backend.close()


def test_a_waiting_writer_gets_the_lock_when_it_frees(db_path: Path) -> None:
    backend = SQLiteStore(db_path, timeout=10)
    blocker = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    threading.Timer(0.2, lambda: blocker.execute("COMMIT")).start()
    backend.append("s", [Record("a", b"x")])
    assert backend.read("s") == [Record("a", b"x")]
    backend.close()
    blocker.close()


@pytest.mark.timeout(120)
def test_four_processes_open_a_new_file_at_once(db_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    processes = [
        context.Process(
            target=runpy.run_path,
            args=(str(WORKER_SCRIPT),),
            kwargs={
                "init_globals": {"DB_PATH": str(db_path), "WORKER": w, "BARRIER": barrier},
                "run_name": "chatkeep_sqlite_first_open_worker",
            },
        )
        for w in range(4)
    ]
    assert not db_path.exists()
    for process in processes:
        process.start()
    for process in processes:
        process.join(90)
    assert [process.exitcode for process in processes] == [0, 0, 0, 0]
    with SQLiteStore(db_path) as backend:
        shared = backend.read("shared")
        assert len(shared) == 4 * 10 * 3
        assert_batches_whole(shared, 3)
        assert sorted(backend.list_sessions()) == ["own-0", "own-1", "own-2", "own-3", "shared"]
        connection = backend._handle().connection
        assert connection.execute("SELECT version FROM chatkeep_schema").fetchall() == [
            (1,),
            (2,),
            (3,),
        ]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_opens_its_own_connection(store: SQLiteStore) -> None:
    store.append("s", [Record("parent-1", b"x")])
    parent_connection = store._handle().connection

    def child() -> None:
        assert store._handle().connection is not parent_connection
        store.append("s", [Record("child", b"y")])
        assert [r.id for r in store.read("s")] == ["parent-1", "child"]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads alive
        process = multiprocessing.get_context("fork").Process(target=child)
        process.start()
    process.join(60)
    assert process.exitcode == 0
    assert store._handle().connection is parent_connection  # the parent's is untouched
    store.append("s", [Record("parent-2", b"z")])
    assert [r.id for r in store.read("s")] == ["parent-1", "child", "parent-2"]


def test_stores_of_one_process_queue_their_writes_to_a_file(db_path: Path) -> None:
    """Writers of one process wait in one queue per file, not in SQLite's polling busy
    handler (where, under load, a thread could lose every race until its timeout)."""
    first = SQLiteStore(db_path, timeout=0.2)
    second = SQLiteStore(str(db_path))
    other = SQLiteStore(db_path.with_name("other.db"))
    try:
        assert first._writers is second._writers
        assert first._writers is not other._writers
        with first._writers.lock:  # a write of this process in progress
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match=r"timeout=0.2s; retrying is safe"):
                first.append("s", [Record("a", b"x")])
            assert 0.15 < time.monotonic() - started < 5
            other.append("s", [Record("a", b"x")])  # another file: not in that queue
        second.append("s", [Record("b", b"y")])
        assert first.read("s") == [Record("b", b"y")]
    finally:
        for backend in (first, second, other):
            backend.close()


def test_threads_appending_at_once_all_land_in_order(db_path: Path) -> None:
    backend = SQLiteStore(db_path, synchronous="normal")
    try:
        errors: list[BaseException] = []

        def writer(worker: int) -> None:
            try:
                for n in range(50):
                    backend.append("shared", [Record(f"{worker}-{n}", b"x")])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        ids = [r.id for r in backend.read("shared")]
        assert len(ids) == 300
        for worker in range(6):
            assert [i for i in ids if i.startswith(f"{worker}-")] == [
                f"{worker}-{n}" for n in range(50)
            ]
    finally:
        backend.close()
