"""Compaction: fewer objects to read, and at every step a log that reads the same."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from chatkeep.core import Record
from chatkeep.s3 import CompactionResult
from chatkeep.s3.keys import encode_session


def recs(count: int, tag: str = "r", start: int = 0, size: int = 0) -> list[Record]:
    pad = b"." * size
    return [Record(f"{tag}-{n}", f"{tag}:{n}".encode() + pad) for n in range(start, start + count)]


def objects(s3_endpoint: Any, url: str) -> dict[str, int]:
    prefix = url.split("?", maxsplit=1)[0].split("/", 3)[3] + "/"
    listed = s3_endpoint.client().list_objects_v2(Bucket=s3_endpoint.bucket, Prefix=prefix)
    return {item["Key"].split("/", 2)[2]: item["Size"] for item in listed.get("Contents", [])}


def fill(store: Any, count: int, per_batch: int = 1) -> list[Record]:
    log: list[Record] = []
    for start in range(0, count, per_batch):
        batch = recs(min(per_batch, count - start), start=start)
        store.append("s", batch)
        log += batch
    return log


def test_compaction_consolidates_and_guards(
    s3_endpoint: Any, s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    store = open_s3(s3_url)
    log = fill(store, 40)
    result = store.compact("s")
    assert result == CompactionResult(
        chunks_written=1, records_compacted=40, segments_guarded=40, chunks_deleted=0
    )
    stored = objects(s3_endpoint, s3_url)
    assert stored.pop(f"cmp/{0:016d}-{40:016d}") > 0
    assert set(stored.values()) == {0}  # every segment is now a zero-byte guard
    assert len(stored) == 40
    fresh = open_s3(s3_url)
    requests = count_requests(fresh)
    assert fresh.read("s") == log
    assert dict(requests) == {"ListObjectsV2": 1, "GetObject": 1}
    assert open_s3(s3_url).read("s", -5) == log[-5:]
    assert store.compact("s") == CompactionResult()  # nothing left to merge


def test_appends_after_compaction_land_after_it(s3_url: str, open_s3: Any) -> None:
    writer, compactor, staler = open_s3(s3_url), open_s3(s3_url), open_s3(s3_url)
    log = fill(writer, 3)
    assert staler.read("s") == log  # staler now believes the log ends at position 3
    log += fill_more(writer, 3, 7)
    compactor.compact("s")
    # The writer's next PUT goes to a fresh key. The staler's goes to seg/3, consolidated
    # into a chunk: the guard left there refuses it (412) instead of accepting an append
    # that readers would never see.
    writer.append("s", recs(1, "after"))
    staler.append("s", recs(1, "late"))
    expected = log + recs(1, "after") + recs(1, "late")
    assert open_s3(s3_url).read("s") == expected
    assert compactor.read("s") == expected
    assert staler.read("s", -2) == expected[-2:]


def test_chunks_are_bounded_and_later_merged(s3_endpoint: Any, s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    log = fill(store, 25)
    first = store.compact("s", max_chunk_records=10)
    assert first.chunks_written == 3  # [0,10), [10,20), [20,25)
    assert open_s3(s3_url).read("s") == log
    log += fill_more(store, 25, 5)
    second = store.compact("s", max_chunk_records=100)
    assert second.chunks_written == 1 and second.chunks_deleted >= 1
    stored = objects(s3_endpoint, s3_url)
    assert [key for key in stored if key.startswith("cmp/")] == [f"cmp/{0:016d}-{30:016d}"]
    assert open_s3(s3_url).read("s") == log
    assert open_s3(s3_url).read("s", 7, 23) == log[7:23]


def fill_more(store: Any, start: int, count: int) -> list[Record]:
    batch = recs(count, start=start)
    for record in batch:
        store.append("s", [record])
    return batch


def test_a_tail_read_of_a_large_chunk_uses_ranged_gets(
    s3_url: str, open_s3: Any, count_requests: Any
) -> None:
    store = open_s3(s3_url)
    log = []
    for start in range(0, 300, 10):
        batch = recs(10, start=start, size=2000)
        store.append("s", batch)
        log += batch
    store.compact("s")
    reader = open_s3(s3_url, range_threshold=10_000)
    requests = count_requests(reader)
    assert reader.read("s", -5) == log[-5:]
    # One GET for the header, one for the last five records' bytes (about 10 kB of 600).
    assert requests["GetObject"] == 2 and requests["ranged"] == 2
    requests.clear()
    assert reader.read("s", -3) == log[-3:]
    assert requests["GetObject"] == 1  # the header is cached
    assert reader.read("s") == log


def test_a_cold_read_jumps_over_the_guards(s3_url: str, open_s3: Any, count_requests: Any) -> None:
    store = open_s3(s3_url)
    log = fill(store, 150)  # more keys than a cold listing's first page holds
    store.compact("s")
    log += fill_more(store, 150, 3)
    reader = open_s3(s3_url)
    requests = count_requests(reader)
    assert reader.read("s", -5) == log[-5:]
    # A short first page (the chunk and the first guards), then a LIST from where the
    # chunk ends: not four pages of guards.
    assert requests["ListObjectsV2"] == 2
    assert requests["GetObject"] == 4  # the chunk and the three segments after it
    assert open_s3(s3_url).read("s") == log


def test_compaction_skips_over_a_gap(s3_endpoint: Any, s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    fill(store, 12, per_batch=2)
    prefix = s3_url.split("?", maxsplit=1)[0].split("/", 3)[3]
    folder = encode_session("s")
    s3_endpoint.client().delete_object(
        Bucket=s3_endpoint.bucket, Key=f"{prefix}/{folder}/seg/{6:016d}"
    )
    expected = recs(6) + recs(4, start=8)
    fresh = open_s3(s3_url)
    assert fresh.read("s") == expected
    fresh.compact("s")
    assert open_s3(s3_url).read("s") == expected
    assert open_s3(s3_url).read("s", -3) == expected[-3:]


def test_two_compactions_at_once(s3_url: str, open_s3: Any) -> None:
    log = fill(open_s3(s3_url), 30)
    one, two = open_s3(s3_url), open_s3(s3_url)
    errors: list[BaseException] = []

    def run(store: Any, limit: int) -> None:
        try:
            store.compact("s", max_chunk_records=limit)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(one, 7)),
        threading.Thread(target=run, args=(two, 12)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert open_s3(s3_url).read("s") == log
    open_s3(s3_url).compact("s")
    assert open_s3(s3_url).read("s") == log


def test_limits_are_validated(s3_url: str, open_s3: Any) -> None:
    with pytest.raises(ValueError, match="max_chunk_records"):
        open_s3(s3_url).compact("s", max_chunk_records=1)


# -- crashes between steps -----------------------------------------------------------------


def _is_chunk_write(kwargs: dict[str, Any]) -> bool:
    return "/cmp/" in kwargs["Key"] and kwargs.get("IfNoneMatch") == "*"


def _is_guard_write(kwargs: dict[str, Any]) -> bool:
    return "IfMatch" in kwargs


@pytest.mark.parametrize(
    "crash_point",
    ["before_chunk", "after_chunk", "midway_guards", "before_deleting_old_chunks"],
)
def test_a_crash_at_any_step_leaves_a_readable_log_without_duplicates(
    s3_url: str, open_s3: Any, faulty: Any, crash_type: Any, crash_point: str
) -> None:
    writer = open_s3(s3_url)
    log = fill(writer, 12)
    warm_reader = open_s3(s3_url)
    assert warm_reader.read("s") == log
    if crash_point == "before_deleting_old_chunks":
        writer.compact("s", max_chunk_records=4)  # old chunks for the next run to replace
        log += fill_more(writer, 12, 4)
    compactor = open_s3(s3_url)
    faults = faulty(compactor)
    if crash_point == "before_chunk":
        faults.plan("put_object", faults.crash, when=_is_chunk_write)
    elif crash_point == "after_chunk":
        faults.plan("put_object", faults.crash, when=_is_guard_write)
    elif crash_point == "midway_guards":
        guards = {"seen": 0}

        def sixth_guard(name: str, kwargs: dict[str, Any]) -> Any:
            if name == "put_object" and _is_guard_write(kwargs):
                guards["seen"] += 1
                if guards["seen"] == 6:
                    return faults.crash
            return None

        faults.default = sixth_guard
    else:
        faults.plan("delete_objects", faults.crash)
    with pytest.raises(crash_type):
        compactor.compact("s")

    def check() -> None:
        for reader in (open_s3(s3_url), warm_reader, writer):
            assert reader.read("s") == log
            assert reader.read("s", -3) == log[-3:]
            assert reader.read("s", 2, 9) == log[2:9]

    check()
    log += recs(2, "after-crash")
    writer.append("s", recs(2, "after-crash"))
    check()
    open_s3(s3_url).compact("s")  # a later run finishes the job
    check()


@pytest.mark.parametrize("seed", [7, 11])
def test_reads_match_a_list_model_through_appends_and_compactions(
    s3_url: str, open_s3: Any, seed: int
) -> None:
    rng = random.Random(seed)
    writer, warm = open_s3(s3_url), open_s3(s3_url, range_threshold=300)
    model: list[Record] = []
    for step in range(40):
        batch = recs(rng.randint(1, 3), f"b{step}", size=rng.choice([0, 50]))
        writer.append("s", batch)
        model += batch
        if step % 9 == 8:
            writer.compact("s", max_chunk_records=rng.choice([4, 10, 1000]))
        for reader in (warm, open_s3(s3_url, range_threshold=300)):
            start = rng.randint(-len(model) - 2, len(model) + 2)
            stop = rng.choice([None, rng.randint(-len(model) - 2, len(model) + 2)])
            assert reader.read("s", start, stop) == model[start:stop], (step, start, stop)
            k = rng.randint(1, 12)
            assert reader.read("s", -k) == model[-k:], (step, k)
    assert open_s3(s3_url).read("s") == model
