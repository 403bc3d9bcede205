"""Trust (issue 16): a file deleted or replaced under an open store refuses writes instead of
acknowledging appends that vanish, and ``delete`` erases the bytes from every file."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chatkeep.core import Record, StoreUnavailable
from chatkeep.sqlite import SQLiteStore
from chatkeep.sqlite.errors import DatabaseReplaced

JOURNAL_MODES = ["wal", "delete", "truncate", "persist"]


def files_of(path: Path) -> list[Path]:
    """The database and whichever journal files exist beside it."""
    candidates = [path, Path(f"{path}-wal"), Path(f"{path}-journal")]
    return [candidate for candidate in candidates if candidate.exists()]


def found_in(files: list[Path], data: bytes) -> list[str]:
    """The names of the files holding ``data``, read by another process (closing a
    descriptor of an open database here would drop this process's SQLite locks on it)."""
    code = (
        "import sys; data = sys.stdin.buffer.read(); "
        "print(' '.join(n for n in sys.argv[1:] if data in open(n, 'rb').read()))"
    )
    names = [str(file) for file in files]
    answer = subprocess.run(
        [sys.executable, "-c", code, *names], input=data, capture_output=True, check=True
    )
    return [Path(name).name for name in answer.stdout.decode().split()]


def in_files(path: Path, data: bytes) -> bool:
    return bool(found_in(files_of(path), data))


# -- the file vanishing under the store ----------------------------------------------------


@pytest.mark.parametrize("journal_mode", JOURNAL_MODES)
def test_a_deleted_file_refuses_writes(tmp_path: Path, journal_mode: str) -> None:
    path = tmp_path / "chats.db"
    store = SQLiteStore(path, journal_mode=journal_mode)
    store.append("s", [Record("a", b"before")])
    path.unlink()
    with pytest.raises(DatabaseReplaced, match="was deleted") as caught:
        store.append("s", [Record("b", b"after")])
    assert isinstance(caught.value, StoreUnavailable)
    assert str(path) in str(caught.value)
    with pytest.raises(DatabaseReplaced):
        store.append_if("s", [Record("b", b"after")], after="a")
    with pytest.raises(DatabaseReplaced):
        store.delete("s")
    # A thread that connects now would open a new, empty file at the path: refused too.
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            store.append("t", [Record("c", b"from a thread")])
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert len(errors) == 1
    assert isinstance(errors[0], DatabaseReplaced)
    store.close()
    if path.exists():  # the refused writes left nothing at the path
        with SQLiteStore(path) as again:
            assert again.read("s") == []
            assert again.read("t") == []


@pytest.mark.parametrize("journal_mode", JOURNAL_MODES)
def test_a_file_renamed_over_refuses_writes(tmp_path: Path, journal_mode: str) -> None:
    path, moved, other = tmp_path / "chats.db", tmp_path / "moved.db", tmp_path / "other.db"
    with SQLiteStore(other, journal_mode=journal_mode) as replacement:
        replacement.append("s", [Record("x", b"the other file")])
    store = SQLiteStore(path, journal_mode=journal_mode)
    store.append("s", [Record("a", b"acknowledged")])
    # In WAL mode the record is only in chats.db-wal, which the rename leaves behind: the
    # store folds it into the moved file when it notices.
    os.rename(path, moved)
    os.replace(other, path)
    with pytest.raises(DatabaseReplaced, match="replaced by another file"):
        store.append("s", [Record("b", b"refused")])
    with pytest.raises(DatabaseReplaced):
        store.delete("s")
    assert store.read("s") == [Record("a", b"acknowledged")]  # the open file still reads
    store.close()
    with SQLiteStore(moved) as original:
        assert original.read("s") == [Record("a", b"acknowledged")]
    with SQLiteStore(path) as now_there:
        assert now_there.read("s") == [Record("x", b"the other file")]


@pytest.mark.parametrize("journal_mode", ["wal", "delete"])
def test_no_acknowledged_append_is_lost_when_the_file_is_replaced_mid_stream(
    tmp_path: Path, journal_mode: str
) -> None:
    """A writer appends without pause while the file is moved away and another renamed over
    it: every append that returned is in the moved file, none that raised is anywhere."""
    path, moved, other = tmp_path / "chats.db", tmp_path / "moved.db", tmp_path / "other.db"
    with SQLiteStore(other, journal_mode=journal_mode) as replacement:
        replacement.append("unrelated", [Record("x", b"x")])
    store = SQLiteStore(path, journal_mode=journal_mode, synchronous="normal")
    acknowledged: list[str] = []
    refused: list[str] = []
    started = threading.Event()

    def writer() -> None:
        for n in range(100_000):
            record_id = f"r{n}"
            try:
                store.append("s", [Record(record_id, record_id.encode())])
            except DatabaseReplaced:
                refused.append(record_id)
                return
            acknowledged.append(record_id)
            if n == 50:
                started.set()

    thread = threading.Thread(target=writer)
    thread.start()
    assert started.wait(30)
    os.rename(path, moved)  # its -wal, if any, stays by the old name (the store holds it open)
    os.replace(other, path)
    thread.join(30)
    assert not thread.is_alive()
    assert refused, "an append went on being acknowledged after the file was replaced"
    store.close()  # checkpoints the WAL into the original inode, reachable as moved.db
    with SQLiteStore(moved) as original:
        stored = [record.id for record in original.read("s")]
    assert stored == acknowledged
    with SQLiteStore(path) as now_there:
        assert now_there.read("s") == []


def test_a_relative_path_keeps_naming_the_file_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    store = SQLiteStore("chats.db")
    store.append("s", [Record("1", b"one")])
    monkeypatch.chdir(tmp_path / "b")
    store.append("s", [Record("2", b"two")])  # same file, though the cwd changed
    errors: list[BaseException] = []
    worker = threading.Thread(target=lambda: errors.extend(_read_all(store)))
    worker.start()
    worker.join()
    assert errors == []
    store.close()
    assert not (tmp_path / "b" / "chats.db").exists()
    with SQLiteStore(tmp_path / "a" / "chats.db") as again:
        assert [r.id for r in again.read("s")] == ["1", "2"]


def _read_all(store: SQLiteStore) -> list[BaseException]:
    try:
        assert [r.id for r in store.read("s")] == ["1", "2"]
    except BaseException as exc:
        return [exc]
    return []


# -- delete erases the bytes ---------------------------------------------------------------


@pytest.mark.parametrize("journal_mode", JOURNAL_MODES)
def test_delete_erases_the_bytes_from_every_file(tmp_path: Path, journal_mode: str) -> None:
    path = tmp_path / "chats.db"
    marker, kept = os.urandom(16).hex().encode(), os.urandom(16).hex().encode()
    with SQLiteStore(path, journal_mode=journal_mode) as store:
        store.append("gone", [Record(f"m{n}", b"secret:" + marker * (n + 1)) for n in range(5)])
        store.append("gone", [Record("big", marker * 2000)])  # overflow pages too
        store.append("kept", [Record("k", b"kept:" + kept)])
        store.append("gone", [Record("late", b"late:" + marker)])
        assert store.chatkeep_storage_contains(marker)
        assert in_files(path, marker)
        store.delete("gone")
        assert store.read("gone") == []
        assert not store.chatkeep_storage_contains(marker)
        assert found_in(files_of(path), marker) == []
        assert store.chatkeep_storage_contains(kept)
        assert store.read("kept") == [Record("k", b"kept:" + kept)]


def test_the_hook_looks_in_the_write_ahead_log(tmp_path: Path) -> None:
    """The marker of a fresh append sits in the WAL only (not yet checkpointed): the hook
    must find it there, or it could not tell an erasure from a file it never read."""
    path = tmp_path / "chats.db"
    marker = os.urandom(16).hex().encode()
    with SQLiteStore(path) as store:
        store.append("s", [Record("m", marker)])
        assert found_in([path, Path(f"{path}-wal")], marker) == ["chats.db-wal"]
        assert store.chatkeep_storage_contains(marker)
        assert not store.chatkeep_storage_contains(os.urandom(16).hex().encode())


def test_purge_expired_erases_the_bytes(tmp_path: Path) -> None:
    now = [1_000_000.0]
    marker = os.urandom(16).hex().encode()
    with SQLiteStore(tmp_path / "chats.db", ttl=10, clock=lambda: now[0]) as store:
        store.append("s", [Record("m", marker)])
        now[0] += 60
        assert store.read("s") == []  # expired, but still in the file
        assert store.chatkeep_storage_contains(marker)
        assert store.purge_expired() == 1
        assert not store.chatkeep_storage_contains(marker)


def test_in_memory_storage_is_inspected_too() -> None:
    marker = os.urandom(16).hex().encode()
    with SQLiteStore(":memory:") as store:
        store.append("s", [Record("m", marker)])
        if sys.version_info < (3, 11):  # no Connection.serialize: the hook is absent
            assert not hasattr(store, "chatkeep_storage_contains")
            return
        assert store.chatkeep_storage_contains(marker)
        store.delete("s")
        assert not store.chatkeep_storage_contains(marker)
