"""Roll-over: chunks and tables of contents written as part of appends, cheap to read, and
at every step (crashes, races, lost objects) a log that reads the same."""

from __future__ import annotations

import random
from typing import Any

import pytest

from chatkeep.core import InvalidOption, Record
from chatkeep.s3 import CompactionResult


def recs(count: int, tag: str = "r", start: int = 0, size: int = 0) -> list[Record]:
    pad = b"." * size
    return [Record(f"{tag}-{n}", f"{tag}:{n}".encode() + pad) for n in range(start, start + count)]


def kinds(store: Any, session: str = "s") -> dict[str, list[str]]:
    """The session's keys by kind: ``seg``, ``toc`` and ``chunk``."""
    folder = store.layout.folder(session)
    found: dict[str, list[str]] = {"seg": [], "toc": [], "chunk": []}
    for item in store.bucket.list_objects(folder):
        parsed = store.layout.parse(folder, item.key)
        if parsed is not None and parsed.kind in found:
            found[parsed.kind].append(item.key[len(folder) :])
    return found


def fill(store: Any, count: int, start: int = 0, tag: str = "r") -> list[Record]:
    log = []
    for n in range(start, start + count):
        batch = recs(1, tag, start=n)
        store.append("s", batch)
        log += batch
    return log


def test_every_rollover_segments_appends_write_a_chunk_and_a_table(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    store = open_s3(s3_url, rollover_segments=4)
    fill(store, 3)
    assert kinds(store)["toc"] == []
    requests = count_requests(store)
    log = recs(3) + fill(store, 1, start=3)
    # The append's PUT, a LIST of the segments to merge (to see them as they are now, not
    # as cached), the chunk, the table of contents: nothing else to read.
    assert dict(requests) == {"PutObject": 3, "ListObjectsV2": 1}
    assert kinds(store)["chunk"] == [f"chunk/{0:016d}-{4:016d}"]
    assert len(kinds(store)["toc"]) == 1
    log += fill(store, 4, start=4)
    # The second roll-over merges [0,4) and [4,8) and removes what it replaced.
    assert kinds(store)["chunk"] == [f"chunk/{0:016d}-{8:016d}"]
    assert len(kinds(store)["toc"]) == 1
    assert len(kinds(store)["seg"]) == 8  # segments are never rewritten or removed
    fresh = open_s3(s3_url)
    requests = count_requests(fresh)
    assert fresh.read("s") == log
    # One LIST (it reaches the table of contents), its GET, the chunk's.
    assert dict(requests) == {"ListObjectsV2": 1, "GetObject": 2}


def test_chunks_stay_within_their_limits(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url, rollover_segments=2, max_chunk_records=6)
    log = fill(store, 40)
    chunks = kinds(store)["chunk"]
    spans = [tuple(int(n) for n in name[6:].split("-")) for name in chunks]
    assert all(end - start <= 6 for start, end in spans)
    assert open_s3(s3_url).read("s") == log
    assert open_s3(s3_url).read("s", 7, 33) == log[7:33]


def test_compact_rolls_over_what_is_left_and_costs_what_it_merges(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    store = open_s3(s3_url, rollover_segments=8)
    log = fill(store, 8 * 30 + 5)
    compactor = open_s3(s3_url)
    requests = count_requests(compactor)
    result = compactor.compact("s")
    assert result.records_compacted >= 4 and result.chunks_written >= 1
    # The five segments since the last table of contents, not the 245 before it.
    assert sum(requests.values()) <= 12, dict(requests)
    assert compactor.compact("s") == CompactionResult()
    for reader in (open_s3(s3_url), compactor, store):
        assert reader.read("s") == log
        assert reader.read("s", -7) == log[-7:]
    log += fill(store, 3, start=len(log))
    assert open_s3(s3_url).read("s") == log


def test_compact_limits_are_validated(s3_url: str, open_s3: Any) -> None:
    with pytest.raises(InvalidOption, match="max_chunk_records"):
        open_s3(s3_url).compact("s", max_chunk_records=1)


def test_a_tail_read_of_a_large_chunk_uses_ranged_gets(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    store = open_s3(s3_url, rollover_segments=1000)
    log = []
    for start in range(0, 300, 10):
        batch = recs(10, start=start, size=2000)
        store.append("s", batch)
        log += batch
    store.compact("s")
    store.append("s", recs(1, start=300))
    log += recs(1, start=300)
    reader = open_s3(s3_url, range_threshold=10_000)
    requests = count_requests(reader)
    assert reader.read("s", -30) == log[-30:]
    # The newest segment is read whole. 20 of the chunk's records would span four of its
    # segments, but the 600 kB chunk is read in two ranged GETs: the header, then 40 kB.
    assert requests["ranged"] == 2, dict(requests)
    assert reader.read("s") == log


# -- crashes, races and lost objects -------------------------------------------------------


def _put_of(kind: str) -> Any:
    def when(kwargs: dict[str, Any]) -> bool:
        key = kwargs["Key"]
        return {"chunk": "/chunk/" in key, "toc": key.endswith(".toc")}[kind]

    return when


@pytest.mark.parametrize("crash_point", ["before_chunk", "before_table", "before_cleanup"])
def test_a_crash_at_any_step_leaves_a_readable_log_without_duplicates(
    s3_url: str, open_s3: Any, faulty: Any, crash_type: Any, crash_point: str
) -> None:
    writer = open_s3(s3_url, rollover_segments=4)
    log = fill(writer, 7)  # one table of contents already
    warm = open_s3(s3_url)
    assert warm.read("s") == log
    faults = faulty(writer)
    if crash_point == "before_chunk":
        faults.plan("put_object", faults.crash, when=_put_of("chunk"))
    elif crash_point == "before_table":
        faults.plan("put_object", faults.crash, when=_put_of("toc"))
    else:
        faults.plan("delete_objects", faults.crash)
    with pytest.raises(crash_type):
        writer.append("s", recs(1, start=7))  # the append landed; its roll-over died
    log += recs(1, start=7)

    def check() -> None:
        for reader in (open_s3(s3_url), warm):
            assert reader.read("s") == log
            assert reader.read("s", -3) == log[-3:]
            assert reader.read("s", 2, 9) == log[2:9]

    check()
    other = open_s3(s3_url, rollover_segments=4)
    other.append("s", recs(1, start=7))  # an exact retry: a no-op
    check()
    log += fill(other, 6, start=8)  # the next roll-overs finish the job
    check()
    assert len(kinds(other)["toc"]) == 1


@pytest.mark.parametrize("step", ["chunk", "toc", "cleanup"])
def test_a_second_writer_rolling_over_amid_the_first(
    s3_url: str, open_s3: Any, faulty: Any, step: str
) -> None:
    # moto does not make conditional writes atomic under simultaneous requests, so the race
    # is staged: the second writer appends (and rolls over) just before the first writer's
    # chunk PUT, table PUT or clean-up leaves. Real simultaneous writers run on Azurite.
    one, two = open_s3(s3_url, rollover_segments=3), open_s3(s3_url, rollover_segments=3)
    log = fill(one, 5)  # one table of contents; the next append rolls over again
    assert two.read("s") == log
    theirs: list[Record] = []
    faults = faulty(one)
    hook = faults.first(lambda: theirs.extend(fill(two, 4, start=100, tag="two")))
    if step == "cleanup":
        faults.plan("delete_objects", hook)
    else:
        faults.plan("put_object", hook, when=_put_of(step))
    mine = fill(one, 1, start=5)
    assert len(theirs) == 4  # the staged writer did run in the midst of the roll-over
    log += mine + theirs
    for reader in (open_s3(s3_url), one, two):
        assert reader.read("s") == log
        assert reader.read("s", -5) == log[-5:]
        assert reader.read("s", 3, 8) == log[3:8]
    assert len(kinds(one)["toc"]) <= 2  # the newest, and perhaps one not yet removed
    log += fill(one, 3, start=6)  # the next roll-over tidies what the race left
    assert open_s3(s3_url).read("s") == log
    assert len(kinds(one)["toc"]) == 1


def test_a_lost_chunk_is_read_from_its_segments_and_rebuilt(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url, rollover_segments=4)
    log = fill(store, 9)
    folder = store.layout.folder("s")
    (chunk,) = kinds(store)["chunk"]
    store.bucket.delete([folder + chunk])
    fresh = open_s3(s3_url)
    assert fresh.read("s") == log
    assert fresh.read("s", 1, 5) == log[1:5]
    log += fill(store, 8, start=9)
    assert open_s3(s3_url).read("s") == log
    # A retry of a record held by the lost chunk is still recognised.
    fresh.append("s", recs(1, start=2))
    assert open_s3(s3_url).read("s") == log


def test_a_reader_holding_a_replaced_table_reads_the_new_one(s3_url: str, open_s3: Any) -> None:
    writer = open_s3(s3_url, rollover_segments=4)
    log = fill(writer, 5)
    reader = open_s3(s3_url)
    assert reader.read("s") == log
    log += fill(writer, 8, start=5)  # two roll-overs: the table and chunk it knew are gone
    assert reader.read("s") == log
    assert reader.read("s", 0, 3) == log[:3]


@pytest.mark.parametrize("seed", [7, 11])
def test_reads_match_a_list_model_through_appends_and_rollovers(
    s3_url: str, open_s3: Any, seed: int
) -> None:
    rng = random.Random(seed)
    writer = open_s3(s3_url, rollover_segments=3, max_chunk_records=9)
    warm = open_s3(s3_url, range_threshold=300)
    model: list[Record] = []
    for step in range(40):
        batch = recs(rng.randint(1, 3), f"b{step}", size=rng.choice([0, 50]))
        writer.append("s", batch)
        model += batch
        if step % 13 == 12:
            writer.compact("s", max_chunk_records=rng.choice([4, 10, 1000]))
        for reader in (warm, open_s3(s3_url, range_threshold=300)):
            start = rng.randint(-len(model) - 2, len(model) + 2)
            stop = rng.choice([None, rng.randint(-len(model) - 2, len(model) + 2)])
            assert reader.read("s", start, stop) == model[start:stop], (step, start, stop)
            k = rng.randint(1, 12)
            assert reader.read("s", -k) == model[-k:], (step, k)
    assert open_s3(s3_url).read("s") == model
