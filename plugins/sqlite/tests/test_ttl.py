"""Retention: sliding ttl, expired sessions read as empty, lazy purge (with a fake clock)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from chatkeep.core import Record
from chatkeep.sqlite import InvalidOption, SQLiteStore


class FakeClock:
    """A settable clock (seconds, like time.time)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def rows(raw: sqlite3.Connection, table: str) -> int:
    return int(raw.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


@pytest.fixture
def expiring(db_path: Path, clock: FakeClock) -> Iterator[SQLiteStore]:
    backend = SQLiteStore(db_path, ttl=100, clock=clock)
    yield backend
    backend.close()


def test_session_expires_after_inactivity(expiring: SQLiteStore, clock: FakeClock) -> None:
    expiring.append("s", [Record("a", b"x")])
    clock.advance(99)
    assert expiring.read("s") == [Record("a", b"x")]
    assert list(expiring.list_sessions()) == ["s"]
    clock.advance(1)
    assert expiring.read("s") == []
    assert expiring.read("s", -1) == []
    assert list(expiring.list_sessions()) == []
    assert list(expiring.list_sessions("s")) == []


def test_append_refreshes_the_expiry(expiring: SQLiteStore, clock: FakeClock) -> None:
    expiring.append("s", [Record("a", b"x")])
    clock.advance(80)
    expiring.append("s", [Record("b", b"y")])
    clock.advance(80)  # 160 s after the first append, 80 s after the last
    assert [r.id for r in expiring.read("s")] == ["a", "b"]


def test_appending_to_an_expired_session_starts_it_over(
    expiring: SQLiteStore, clock: FakeClock
) -> None:
    expiring.append("s", [Record("a", b"old"), Record("b", b"old")])
    clock.advance(101)
    expiring.append("s", [Record("a", b"new")])  # the expired id is free again
    assert expiring.read("s") == [Record("a", b"new")]
    assert expiring.read("s", -1) == [Record("a", b"new")]


def test_expired_data_is_purged_lazily(
    expiring: SQLiteStore, clock: FakeClock, raw: sqlite3.Connection
) -> None:
    expiring.append("old", [Record("a", b"x"), Record("b", b"y")])
    clock.advance(50)
    expiring.append("young", [Record("a", b"x")])
    clock.advance(60)  # "old" expired 10 s ago; the purge interval (ttl) has passed
    assert rows(raw, "chatkeep_records") == 3  # reads hide it, nothing deleted yet
    expiring.append("young", [Record("b", b"y")])
    assert rows(raw, "chatkeep_sessions") == 1
    assert rows(raw, "chatkeep_records") == 2


def test_purge_expired_erases_everything_expired(
    expiring: SQLiteStore, clock: FakeClock, raw: sqlite3.Connection
) -> None:
    for i in range(250):  # more than one purge batch
        expiring.append(f"s{i}", [Record("a", b"x")])
    clock.advance(150)
    expiring.append("fresh", [Record("a", b"x")])  # a lazy purge takes the first batch
    assert expiring.purge_expired() == 150
    assert expiring.purge_expired() == 0
    assert sorted(expiring.list_sessions()) == ["fresh"]
    assert rows(raw, "chatkeep_records") == 1


def test_every_store_honours_stored_expiry(
    db_path: Path, expiring: SQLiteStore, clock: FakeClock
) -> None:
    plain = SQLiteStore(db_path, clock=clock)  # no ttl of its own
    expiring.append("s", [Record("a", b"x")])
    clock.advance(101)
    assert plain.read("s") == []
    assert list(plain.list_sessions()) == []
    plain.close()


def test_append_without_ttl_makes_the_session_permanent(
    db_path: Path, expiring: SQLiteStore, clock: FakeClock
) -> None:
    plain = SQLiteStore(db_path, clock=clock)
    expiring.append("s", [Record("a", b"x")])
    plain.append("s", [Record("b", b"y")])
    clock.advance(10_000)
    assert [r.id for r in expiring.read("s")] == ["a", "b"]
    plain.close()


def test_sessions_without_ttl_never_expire(store: SQLiteStore, raw: sqlite3.Connection) -> None:
    store.append("s", [Record("a", b"x")])
    assert raw.execute("SELECT expires_at FROM chatkeep_sessions").fetchall() == [(None,)]


def test_ttl_accepts_a_timedelta(db_path: Path, clock: FakeClock) -> None:
    backend = SQLiteStore(db_path, ttl=timedelta(minutes=2), clock=clock)
    backend.append("s", [Record("a", b"x")])
    clock.advance(119)
    assert backend.read("s") != []
    clock.advance(1)
    assert backend.read("s") == []
    backend.close()


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), True, "soon", timedelta(0)])
def test_invalid_ttl_is_refused(db_path: Path, ttl: object) -> None:
    with pytest.raises(InvalidOption, match="ttl"):
        SQLiteStore(db_path, ttl=ttl)  # type: ignore[arg-type]
