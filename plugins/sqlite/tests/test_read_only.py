"""Read-only handles (issue 13): ``sqlite:///path?mode=ro`` reads and lists, writes nothing,
creates nothing, and works where the file or its directory cannot be written."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import sqlite3
import stat
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chatkeep.core import (
    CapabilityMissing,
    InvalidOption,
    Record,
    StoreUnavailable,
    open_store,
)
from chatkeep.sqlite import IncompatibleSchema, SQLiteStore
from chatkeep.sqlite.errors import DatabaseNotFound, ReadOnlyStore

NOBODY = 65534


def fingerprint(directory: Path) -> dict[str, tuple[str, float]]:
    """Every file in ``directory`` with a digest of its bytes and its mtime."""
    return {
        entry.name: (hashlib.sha256(entry.read_bytes()).hexdigest(), entry.stat().st_mtime)
        for entry in sorted(directory.iterdir())
    }


def make_store(path: Path, journal_mode: str = "wal") -> None:
    with SQLiteStore(path, journal_mode=journal_mode) as store:
        store.append("alpha", [Record("a1", b"one"), Record("a2", b"two")])
        store.append("beta", [Record("b1", b"three")])


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path is private to its owner)."""
    directory = Path(tempfile.mkdtemp(prefix="chatkeep-ro-"))
    directory.chmod(0o755)
    yield directory
    for path in [directory, *directory.rglob("*")]:
        path.chmod(stat.S_IRWXU | (path.stat().st_mode & 0o777))
    shutil.rmtree(directory)


def unprivileged(work: Callable[[], Any]) -> Any:
    """Run ``work`` as a user the file permissions apply to: this process, or, when it is
    root (which ignores them), a forked child that drops to ``nobody`` first."""
    if os.geteuid() != 0:
        return work()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(reader)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            payload = pickle.dumps(("ok", work()))
        except BaseException:
            payload = pickle.dumps(("error", traceback.format_exc()))
        with os.fdopen(writer, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as source:
        payload = source.read()
    os.waitpid(pid, 0)
    status, value = pickle.loads(payload)
    if status != "ok":
        pytest.fail(f"in the unprivileged process:\n{value}")
    return value


# -- the handle ------------------------------------------------------------------------------


@pytest.mark.usefixtures("only_sqlite_plugin")
def test_the_url_spelling_opens_read_only(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    make_store(path)
    before = fingerprint(tmp_path)
    with open_store(f"sqlite:///{path}?mode=ro") as store:
        assert store.capabilities == {
            "list_sessions", "close", "ttl", "shared", "durable", "namespace", "recent", "fulltext"
        }  # fmt: skip
        assert sorted(store.list_sessions()) == ["alpha", "beta"]
        assert store.read("alpha") == [Record("a1", b"one"), Record("a2", b"two")]
        assert store.read("alpha", -1) == [Record("a2", b"two")]
        assert store.read("nobody") == []
        with pytest.raises(ReadOnlyStore, match=r"read-only \(mode=ro\).*append") as caught:
            store.append("alpha", [Record("a3", b"refused")])
        assert isinstance(caught.value, CapabilityMissing)
        assert str(path) in str(caught.value)
        with pytest.raises(CapabilityMissing):
            store.delete("alpha")
        with pytest.raises(CapabilityMissing):
            store.append_if("alpha", [Record("a3", b"refused")], after="a2")
        backend = store.backend
        assert isinstance(backend, SQLiteStore)
        assert "mode=ro" in repr(backend)
        for write in (
            lambda: backend.delete("alpha"),
            lambda: backend.append_if("alpha", [Record("a3", b"x")], after="a2"),
            backend.purge_expired,
        ):
            with pytest.raises(ReadOnlyStore):
                write()
        # A WAL reader needs SQLite's shared-memory file and an empty -wal while it reads...
        assert (tmp_path / "chats.db-wal").stat().st_size == 0
    after = fingerprint(tmp_path)
    assert after["chats.db"] == before["chats.db"]  # not a byte written
    assert set(after) == set(before)  # ...and removes them when it closes
    with SQLiteStore(path) as writer:
        assert [r.id for r in writer.read("alpha")] == ["a1", "a2"]


def test_the_keyword_spelling_and_other_threads(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    make_store(path)
    with SQLiteStore(path, mode="ro") as store:
        seen: list[list[Record]] = []
        worker = threading.Thread(target=lambda: seen.append(store.read("beta")))
        worker.start()
        worker.join()
        assert seen == [[Record("b1", b"three")]]
        with pytest.raises(ReadOnlyStore):
            store.append("beta", [Record("b2", b"x")])


def test_a_read_only_handle_sees_what_a_writer_appends(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    make_store(path)
    with SQLiteStore(path, mode="ro") as reader, SQLiteStore(path) as writer:
        writer.append("alpha", [Record("a3", b"later")])
        assert reader.read("alpha", -1) == [Record("a3", b"later")]


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_a_missing_file_is_never_created(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "missing.db"
    with pytest.raises(DatabaseNotFound, match="does not exist") as caught:
        SQLiteStore(path, mode=mode)
    assert isinstance(caught.value, StoreUnavailable)
    assert isinstance(caught.value, FileNotFoundError)
    assert str(path) in str(caught.value)
    with pytest.raises(DatabaseNotFound):
        open_store(f"sqlite:///{path}?mode={mode}")
    assert list(tmp_path.iterdir()) == []


def test_a_file_without_chatkeep_tables_lists_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    app = sqlite3.connect(path, isolation_level=None)
    app.execute("CREATE TABLE users (name TEXT)")
    app.execute("INSERT INTO users VALUES ('ada')")
    app.close()
    before = fingerprint(tmp_path)
    with SQLiteStore(path, mode="ro") as store:
        assert list(store.list_sessions()) == []
        assert store.read("anything") == []
        assert store.read("anything", -5, -1) == []
        assert fingerprint(tmp_path) == before
        # A writer adds chatkeep's tables later: the read-only handle notices.
        with SQLiteStore(path) as writer:
            writer.append("s", [Record("r", b"now")])
        assert store.read("s") == [Record("r", b"now")]
        assert list(store.list_sessions()) == ["s"]
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert ("users",) in tables


def test_an_empty_file_lists_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with SQLiteStore(path, mode="ro") as store:
        assert list(store.list_sessions()) == []
        assert store.read("s") == []
    assert path.stat().st_size == 0


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    make_store(path)
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("INSERT INTO chatkeep_schema VALUES (99, 'from the future', 0)")
    raw.close()
    with pytest.raises(IncompatibleSchema, match="version 99"):
        SQLiteStore(path, mode="ro")


def test_mode_rw_writes_but_never_creates(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    make_store(path)
    with open_store(f"sqlite:///{path}?mode=rw") as store:
        assert "delete" in store.capabilities
        store.append("alpha", [Record("a3", b"more")])
        store.delete("beta")
    with SQLiteStore(path, mode="ro") as reader:
        assert [r.id for r in reader.read("alpha")] == ["a1", "a2", "a3"]
        assert list(reader.list_sessions()) == ["alpha"]


def test_bad_modes_are_invalid_options(tmp_path: Path) -> None:
    with pytest.raises(InvalidOption, match=r"mode='memory'.*rwc, rw, ro"):
        SQLiteStore(tmp_path / "x.db", mode="memory")
    with pytest.raises(InvalidOption, match="mode"):
        open_store(f"sqlite:///{tmp_path / 'x.db'}?mode=")
    for mode in ("ro", "rw"):
        with pytest.raises(InvalidOption, match="needs a file"):
            open_store(f"sqlite://:memory:?mode={mode}")
    assert list(tmp_path.iterdir()) == []


# -- files the user cannot write ---------------------------------------------------------------


def _read_everything(path: Path) -> dict[str, Any]:
    """What a read-only handle sees of ``path``, and what its writes and a normal open do."""
    result: dict[str, Any] = {}
    with SQLiteStore(path, mode="ro") as store:
        result["sessions"] = sorted(store.list_sessions())
        result["alpha"] = [(r.id, r.data) for r in store.read("alpha", -1)]
        result["unknown"] = store.read("nobody")
        box: list[Any] = []
        worker = threading.Thread(target=lambda: box.append(store.read("beta")))
        worker.start()
        worker.join()
        result["thread"] = [(r.id, r.data) for r in box[0]]
        try:
            store.append("alpha", [Record("x", b"x")])
        except ReadOnlyStore as exc:
            result["append"] = type(exc).__name__
    try:
        SQLiteStore(path).append("alpha", [Record("x", b"x")])
    except StoreUnavailable as exc:
        result["read-write open"] = str(exc)
    return result


@pytest.mark.parametrize("journal_mode", ["wal", "delete"])
@pytest.mark.parametrize("where", ["file 0444", "directory 0555"])
def test_a_file_the_user_cannot_write(shared_dir: Path, journal_mode: str, where: str) -> None:
    path = shared_dir / "chats.db"
    make_store(path, journal_mode)
    path.chmod(0o444)
    # "file 0444": the directory is writable (SQLite may create the -shm a WAL reader needs);
    # "directory 0555": nothing can be created beside the file.
    shared_dir.chmod(0o777 if where == "file 0444" else 0o555)
    before = fingerprint(shared_dir)
    result = unprivileged(lambda: _read_everything(path))
    assert result["sessions"] == ["alpha", "beta"]
    assert result["alpha"] == [("a2", b"two")]
    assert result["unknown"] == []
    assert result["thread"] == [("b1", b"three")]
    assert result["append"] == "ReadOnlyStore"
    assert "read-write open" in result, "a normal open wrote to a file it may not write"
    assert str(path) in result["read-write open"]
    after = fingerprint(shared_dir)
    if where == "file 0444":
        # SQLite may leave an empty -shm/-wal pair beside a WAL file it read; the database
        # itself is untouched.
        after = {name: value for name, value in after.items() if name == "chats.db"}
        before = {name: value for name, value in before.items() if name == "chats.db"}
    assert after == before


def test_the_errors_cross_process_boundaries() -> None:
    """They pickle (a worker process's error re-raised in its parent keeps type and text)."""
    from chatkeep.core import errors as core_errors
    from chatkeep.sqlite.errors import DatabaseReplaced

    for error in (
        DatabaseNotFound("/data/chats.db", "ro"),
        ReadOnlyStore("/data/chats.db", "append"),
        DatabaseReplaced("/data/chats.db", "was deleted"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert str(copy) == str(error)
        assert "/data/chats.db" in str(copy)
    # The core's types, so callers need not know the backend.
    assert isinstance(DatabaseNotFound("/d.db", "ro"), core_errors.StoreNotFound)
    assert isinstance(DatabaseNotFound("/d.db", "ro"), FileNotFoundError)
    read_only = pickle.loads(pickle.dumps(ReadOnlyStore("/d.db", "append")))
    assert isinstance(read_only, core_errors.ReadOnlyStore)
    assert read_only.operation == "append" and read_only.backend == "sqlite"


def test_a_read_only_handle_leaves_no_wal_or_shm_files_behind(tmp_path: Path) -> None:
    # Issue 30: `sessions list` and `export` left an empty -wal and a -shm next to the file.
    path = tmp_path / "chats.db"
    make_store(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.db"]
    with open_store(f"sqlite:///{path}?mode=ro") as store:
        assert [r.id for r in store.read("alpha")] == ["a1", "a2"]
        list(store.list_sessions())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.db"]


def test_a_read_only_close_leaves_a_running_writers_log_alone(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    make_store(path)
    with SQLiteStore(path) as writer:
        writer.append("alpha", [Record("a3", b"three")])
        with open_store(f"sqlite:///{path}?mode=ro") as reader:
            assert len(reader.read("alpha")) == 3
        assert (tmp_path / "chats.db-wal").exists()
        writer.append("alpha", [Record("a4", b"four")])
        assert len(writer.read("alpha")) == 4
    with open_store(f"sqlite:///{path}?mode=ro") as reader:
        assert len(reader.read("alpha")) == 4


@pytest.mark.parametrize("mode", ["rwc", "ro"])
def test_a_directory_is_refused_as_a_database_path(tmp_path: Path, mode: str) -> None:
    # SQLite itself says "disk I/O error" (ro) or "unable to open database file" (rwc).
    with pytest.raises(InvalidOption, match="is a directory") as caught:
        open_store(f"sqlite:///{tmp_path}?mode={mode}")
    assert "chatkeep.db" in str(caught.value)
    assert list(tmp_path.iterdir()) == []
