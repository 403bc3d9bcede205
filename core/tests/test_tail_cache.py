"""TailCache: the reusable tail-validated cache (chatkeep.core.tail_cache)."""

from __future__ import annotations

import asyncio

import pytest

from chatkeep.core import Record, TailCache, new_id, open_store
from chatkeep.core.store import Store


def _records(*texts: str) -> list[Record]:
    return [Record(new_id(), text.encode()) for text in texts]


def _filled(store: Store, session_id: str, **options: object) -> TailCache[str]:
    cache: TailCache[str] = TailCache(id_of=lambda item: item, **options)  # type: ignore[arg-type]
    records = store.read(session_id)
    tail = records[-1] if records else None
    kept = cache.fill(
        store,
        session_id,
        [record.id for record in records],
        tail_id=tail and tail.id,
        tail_data=tail and tail.data,
        nbytes=sum(len(r.data) for r in records),
    )
    assert kept
    return cache


def test_a_cache_is_trusted_only_while_the_tail_is_unchanged() -> None:
    store = open_store("memory://tail-cache-1")
    store.append("s", _records("a", "b"))
    cache = _filled(store, "s")
    assert cache.check(store, "s") == [r.id for r in store.read("s")]
    # its own append, taken in: still trusted, and the ids follow
    mine = _records("c", "d")
    store.append("s", mine)
    assert cache.extend(mine, [r.id for r in mine])
    assert cache.check(store, "s") == [r.id for r in store.read("s")]
    assert cache.ids() == {r.id for r in store.read("s")}
    # another writer's append: not trusted, and emptied
    store.append("s", _records("e"))
    assert cache.check(store, "s") is None
    assert len(cache) == 0 and cache.check(store, "s") is None


def test_a_write_between_the_check_and_the_append_is_noticed() -> None:
    store = open_store("memory://tail-cache-2")
    store.append("s", _records("a"))
    cache = _filled(store, "s")
    assert cache.check(store, "s") is not None
    store.append("s", _records("theirs"))  # lands between this turn's load and its save
    mine = _records("mine")
    store.append("s", mine)
    cache.extend(mine, [r.id for r in mine])
    assert cache.check(store, "s") is None


def test_a_deleted_and_recreated_log_is_noticed() -> None:
    store = open_store("memory://tail-cache-3")
    first = _records("a", "b")
    store.append("s", first)
    cache = _filled(store, "s")
    store.delete("s")
    assert cache.check(store, "s") is None
    cache = _filled(store, "s")  # the empty log
    assert cache.check(store, "s") == []
    store.append("s", _records("new"))
    assert cache.check(store, "s") is None


def test_the_cache_is_bounded_by_bytes() -> None:
    store = open_store("memory://tail-cache-4")
    store.append("s", _records("x" * 60, "y" * 60))
    with pytest.raises(AssertionError):
        _filled(store, "s", max_bytes=100)  # 120 bytes: not kept
    cache = _filled(store, "s", max_bytes=150)
    more = _records("z" * 60)
    store.append("s", more)
    assert not cache.extend(more, [r.id for r in more])  # 180 bytes: let go
    assert cache.check(store, "s") is None
    with pytest.raises(ValueError, match="max_bytes"):
        TailCache(max_bytes=-1)


def test_a_window_keeps_its_length_and_other_keys_miss() -> None:
    store = open_store("memory://tail-cache-5")
    records = _records("a", "b", "c")
    store.append("s", records)
    cache: TailCache[str] = TailCache()
    cache.fill(
        store,
        "s",
        [r.id for r in records[-2:]],
        tail_id=records[-1].id,
        nbytes=2,
        key=2,
        limit=2,
    )
    assert cache.check(store, "s") is None  # another key (a whole load)
    cache.fill(
        store, "s", [r.id for r in records[-2:]], tail_id=records[-1].id, nbytes=2, key=2, limit=2
    )
    other = open_store("memory://tail-cache-5b")
    assert cache.check(other, "s", 2) is None  # another store
    cache.fill(
        store, "s", [r.id for r in records[-2:]], tail_id=records[-1].id, nbytes=2, key=2, limit=2
    )
    more = _records("d")
    store.append("s", more)
    cache.extend(more, [more[0].id])
    assert asyncio.run(cache.acheck(store, "s", 2)) == [records[-1].id, more[0].id]


def test_overlapping_turns_can_only_miss() -> None:
    store = open_store("memory://tail-cache-6")
    store.append("s", _records("a"))
    cache = _filled(store, "s")
    assert cache.check(store, "s") is not None  # turn A's load
    store.append("s", _records("theirs"))  # a third writer
    first, second = _records("A"), _records("B")
    store.append("s", first)  # turn A's save
    store.append("s", second)  # turn B's save (B loaded with A, before "theirs")
    cache.extend(first, [first[0].id])
    cache.extend(second, [second[0].id])
    assert cache.check(store, "s") is None  # "theirs" is between the anchor and A


def test_several_own_appends_between_checks_are_trusted() -> None:
    store = open_store("memory://tail-cache-7")
    store.append("s", _records("a"))
    cache = _filled(store, "s")
    for text in ("b", "c", "d"):  # an SDK saving input and output in separate calls
        mine = _records(text)
        store.append("s", mine)
        assert cache.extend(mine, [mine[0].id])
    assert cache.tail_span == 4
    assert cache.check(store, "s") == [r.id for r in store.read("s")]
    assert cache.tail_span == 1  # the newest record is the anchor now


def test_fill_records_anchors_on_the_last_record_and_counts_its_bytes() -> None:
    store = open_store("memory://tail-cache-fill-records")
    store.append("s", _records("a", "bb", "ccc"))
    records = store.read("s")
    cache: TailCache[Record] = TailCache()
    assert cache.fill_records(store, "s", records, records, key=2, limit=2, count=3)
    assert (cache.anchor_id, cache.anchor_data) == (records[-1].id, b"ccc")
    assert (cache.nbytes, cache.key, cache.limit, cache.count) == (6, 2, 2, 3)
    assert cache.check(store, "s", 2) == records
    assert cache.check(store, "s", None) is None  # another key: not this cache's load
    # an empty log: no anchor, nothing counted, and trusted until something lands
    empty: TailCache[Record] = TailCache()
    assert empty.fill_records(store, "none", [], [])
    assert (empty.anchor_id, empty.anchor_data, empty.nbytes) == (None, None, 0)
    assert empty.check(store, "none") == []
    store.append("none", _records("x"))
    assert empty.check(store, "none") is None
    # the bound is the records' bytes
    small: TailCache[Record] = TailCache(5)
    assert not small.fill_records(store, "s", records, records)
    assert small.check(store, "s") is None
