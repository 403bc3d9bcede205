"""The log algorithm against an in-memory blob service (fast, deterministic, with faults).

Azurite runs the same code in the other test modules; here segments roll every few
appends, oversized batches are a few hundred bytes, and failures strike exactly where
a test wants them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Generator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from chatkeep.azure_blob import _operations as ops
from chatkeep.azure_blob import _write
from chatkeep.azure_blob._state import Limits, Log, Seen
from chatkeep.core import (
    AppendConflict,
    CorruptRecord,
    Record,
    RecordConflict,
    StoreUnavailable,
)
from chatkeep.testing import example_count

SMALL = {"segment_blocks": 4, "max_block_bytes": 1024}


def batch(tag: str, count: int = 2, size: int = 8) -> list[Record]:
    return [Record(f"{tag}-{n}", f"{tag}:{n}:".encode().ljust(size, b".")) for n in range(count)]


def test_append_and_read_back(fake_store: Callable[..., Any]) -> None:
    store = fake_store()
    store.append("s", batch("a", 3))
    store.append("s", batch("b", 1))
    log = batch("a", 3) + batch("b", 1)
    assert store.read("s") == log
    assert store.read("s", -2) == log[-2:]
    assert store.read("s", 1, 3) == log[1:3]
    assert store.read("s", -3, -1) == log[-3:-1]
    assert store.read("missing") == []
    assert store.read("missing", -5) == []


def test_segments_roll_and_every_read_path_agrees(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    writer = fake_store(**SMALL)
    log: list[Record] = []
    for n in range(25):
        records = batch(f"b{n}", n % 3 + 1)
        writer.append("s", records)
        log.extend(records)
    segments = [name for name in fake_service.blobs if name.rsplit("/", 1)[1].isdigit()]
    assert len(segments) >= 8, "segments should roll every few blocks"
    for handle in (writer, fake_store(**SMALL)):  # warm and cold
        assert handle.read("s") == log
        for start, stop in [(-1, None), (-7, None), (-30, -3), (5, 19), (0, 4), (-50, 2)]:
            assert handle.read("s", start, stop) == log[start:stop], (start, stop)


def test_segments_also_roll_by_size(fake_store: Callable[..., Any], fake_service: Any) -> None:
    store = fake_store(segment_bytes=600)
    log: list[Record] = []
    for n in range(12):
        store.append("s", batch(f"b{n}", 2, size=60))
        log += batch(f"b{n}", 2, size=60)
    sizes = [len(blob["data"]) for name, blob in fake_service.blobs.items()]
    assert len(sizes) >= 4 and max(sizes) <= 600
    assert fake_store(segment_bytes=600).read("s") == log
    assert fake_store(segment_bytes=600).read("s", -5) == log[-5:]


def test_cold_tail_read_jumps_to_the_last_segment(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    writer = fake_store(**SMALL)
    for n in range(40):
        writer.append("s", batch(f"b{n}"))
    reader = fake_store(**SMALL)
    fake_service.operations.clear()
    assert reader.read("s", -1) == batch("b39")[-1:]
    # Segment 0 (with the hint), the last segment: not a walk through all twenty.
    assert fake_service.count(ops.Get) <= 3


def test_warm_turn_costs_one_request_each(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    store = fake_store()
    for n in range(300):
        store.append("s", batch(f"t{n}"))
    store.read("s", -50)
    fake_service.operations.clear()
    fake_service.downloaded = 0
    tail = store.read("s", -50)
    store.append("s", batch("next"))
    assert [type(op) for op in fake_service.operations] == [ops.Get, ops.Append]
    assert len(tail) == 50
    # 50 records of ~40 bytes: a small window (the floor is Limits.probe), not the log.
    assert fake_service.downloaded <= 8 * 1024


def test_tail_read_cost_does_not_grow_with_the_log(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    def cost(length: int) -> int:
        store = fake_store()
        session = f"s{length}"
        for n in range(0, length, 50):
            store.append(session, [Record(f"r{n + k}", b"x" * 20) for k in range(50)])
        cold = fake_store()
        fake_service.downloaded = 0
        assert len(cold.read(session, -10)) == 10
        return int(fake_service.downloaded)

    # A cold tail read: the start of segment 0 (where a small session ends) and then the
    # tail. The same bytes at 1,000 and at 10,000 records.
    medium, large = cost(1_000), cost(10_000)
    assert large <= medium + 1024
    assert large <= 3 * 8 * 1024


def test_oversized_batch_is_a_pointer_and_reads_whole(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    store = fake_store(**SMALL)
    big = batch("big", 10, size=200)  # ~2.3 kB > the 1 KiB block limit
    store.append("s", batch("a"))
    store.append("s", big)
    store.append("s", batch("b"))
    assert any("/x/" in name for name in fake_service.blobs)
    assert all(len(op.data) <= 1024 for op in fake_service.operations if isinstance(op, ops.Append))
    expected = batch("a") + big + batch("b")
    assert fake_store(**SMALL).read("s") == expected
    assert fake_store(**SMALL).read("s", -3) == expected[-3:]
    store.append("s", big)  # a retry of the oversized batch: a no-op
    assert store.read("s") == expected
    store.delete("s")
    assert not fake_service.blobs


def test_retries_are_no_ops(fake_store: Callable[..., Any]) -> None:
    store = fake_store(**SMALL)
    store.append("s", batch("a"))
    store.append("s", batch("b"))
    store.append("s", batch("a"))
    store.append("s", batch("a") + batch("c"))  # partly stored: only the new ones land
    assert store.read("s") == batch("a") + batch("b") + batch("c")
    # Another handle learns what is stored from the tail it reads.
    other = fake_store(**SMALL)
    other.append("s", batch("b"))
    assert other.read("s") == batch("a") + batch("b") + batch("c")


def _segment_bytes(fake_service: Any) -> int:
    return sum(len(b["data"]) for name, b in fake_service.blobs.items() if "/x/" not in name)


def test_a_batch_resent_by_a_new_handle_long_after_is_a_no_op(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    writer = fake_store(**SMALL)
    writer.append("s", batch("crashed", 3))
    for n in range(200):  # far past any tail window, across many segment rolls
        writer.append("s", batch(f"later{n}"))
    stored = writer.read("s")
    fake_service.downloaded = 0
    fresh = fake_store(**SMALL)
    fresh.append("s", batch("crashed", 3))  # the crashed process's batch, sent again
    # The first append of a handle to a session reads the session once (and its end)...
    assert fake_service.downloaded <= _segment_bytes(fake_service) + 3 * 8 * 1024
    assert fresh.read("s") == stored
    assert fake_store(**SMALL).read("s") == stored
    with pytest.raises(RecordConflict):  # a stored id with other data is never dropped
        fresh.append("s", [Record("crashed-1", b"other data")])
    # ...and after that the hot path is one request per append again (segments roll
    # every 4 blocks here: a roll adds its own ROLL block, Create and Set Metadata).
    fake_service.operations.clear()
    fresh.append("s", batch("new"))
    kinds = [type(op) for op in fake_service.operations]
    assert ops.Get not in kinds and ops.Head not in kinds, kinds
    assert kinds.count(ops.Append) <= 2, kinds
    fake_service.operations.clear()
    fresh.append("s", batch("later7"))  # re-sent, from the old segments: still a no-op
    # (one ranged read checks that this life of the session is still the one it knows).
    assert [type(op) for op in fake_service.operations] == [ops.Get]
    assert fresh.read("s") == stored + batch("new")


def test_a_full_read_builds_the_index_for_free(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    writer = fake_store(**SMALL)
    for n in range(60):
        writer.append("s", batch(f"a{n}"))
    reader = fake_store(**SMALL)
    stored = reader.read("s")
    fake_service.operations.clear()
    reader.append("s", batch("a3"))  # a re-send, recognised without reading again
    assert reader.read("s", -2) == batch("a59")
    reader.append("s", batch("new"))
    kinds = [type(op) for op in fake_service.operations]
    assert kinds.count(ops.Get) <= 2, kinds  # the re-send's check and the tail read
    assert reader.read("s") == stored + batch("new")


def test_a_conditional_append_resent_by_a_new_handle_long_after_is_a_no_op(
    fake_store: Callable[..., Any],
) -> None:
    writer = fake_store(**SMALL)
    writer.append_if("s", batch("first"), None)
    writer.append_if("s", batch("second"), "first-1")
    for n in range(100):
        writer.append("s", batch(f"later{n}"))
    stored = writer.read("s")
    fresh = fake_store(**SMALL)
    fresh.append_if("s", batch("second"), "first-1")  # landed long ago: a no-op
    assert fresh.read("s") == stored
    with pytest.raises(AppendConflict):
        fresh.append_if("s", batch("third"), "first-1")  # new records, stale end


def test_resend_check_recent_keeps_one_round_trip_but_forgets_old_ids(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    writer = fake_store()
    writer.append("s", batch("crashed", 3))
    for n in range(200):  # about 14 KiB: past the tail window a new handle reads
        writer.append("s", batch(f"later{n}"))
    stored = writer.read("s")
    fake_service.operations.clear()
    fake_service.downloaded = 0
    fresh = fake_store(resend_check="recent")
    fresh.append("s", batch("crashed", 3))
    # The end only (the start of the segment, then its tail), one append: and the old
    # batch is stored a second time.
    assert [type(op) for op in fake_service.operations] == [ops.Get, ops.Get, ops.Append]
    assert fake_service.downloaded <= 2 * 8 * 1024 + 1024
    assert fresh.read("s") == stored + batch("crashed", 3)
    recent = fake_store(resend_check="recent")
    recent.append("s", batch("crashed", 3))  # a re-send of the newest batch is still seen
    assert recent.read("s") == stored + batch("crashed", 3)


def test_the_index_catches_up_on_only_what_others_appended(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    first, second = fake_store(), fake_store()
    for n in range(300):
        first.append("s", [Record(f"a{n}", b"x" * 200)])
    second.append("s", batch("warm"))  # reads the session once
    for n in range(20):
        first.append("s", [Record(f"b{n}", b"y" * 200)])
        fake_service.downloaded = 0
        second.append("s", [Record(f"c{n}", b"z" * 200)])
        # A lost race and a catch-up: the other writer's one frame, not the session.
        assert fake_service.downloaded <= 16 * 1024
    assert len({record.id for record in first.read("s")}) == 300 + 1 * 2 + 40


@pytest.mark.parametrize("mode", ["lost", "failed"])
def test_unknown_outcome_then_retry_stores_once(
    fake_store: Callable[..., Any], fake_service: Any, mode: str
) -> None:
    store = fake_store()
    store.append("s", batch("a"))
    fake_service.fault(ops.Append, mode)
    with pytest.raises(StoreUnavailable, match="Retrying the same append is safe"):
        store.append("s", batch("b"))
    # Others write meanwhile, then the caller retries.
    fake_store().append("s", batch("other"))
    store.append("s", batch("b"))
    landed = batch("a") + (batch("b") + batch("other") if mode == "lost" else batch("other"))
    if mode == "failed":
        landed += batch("b")
    assert fake_store().read("s") == landed


def test_lost_response_retried_by_the_client_is_not_duplicated(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    store = fake_store()
    store.append("s", batch("a"))
    fake_service.fault(ops.Append, "retried")  # landed, but the client saw 412 on its retry
    store.append("s", batch("b"))
    assert fake_store().read("s") == batch("a") + batch("b")


def test_unknown_outcome_far_behind_the_tail_is_still_found(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    store = fake_store()
    store.append("s", batch("a"))
    fake_service.fault(ops.Append, "lost")
    with pytest.raises(StoreUnavailable):
        store.append("s", batch("b"))
    other = fake_store()
    for n in range(400):  # push the lost batch far from the end
        other.append("s", batch(f"o{n}", 1, size=100))
    store.read("s", -1)  # the handle's cursor moves to the end meanwhile
    store.append("s", batch("b"))
    ids = [record.id for record in fake_store().read("s")]
    assert ids.count("b-0") == 1 and ids.count("b-1") == 1


@pytest.mark.parametrize("kind", [ops.Create, ops.Upload, ops.Get])
def test_unknown_outcomes_elsewhere_are_retriable(
    fake_store: Callable[..., Any], fake_service: Any, kind: type
) -> None:
    fake_store(**SMALL).append("s", batch("first"))
    store = fake_store(**SMALL)
    if kind is ops.Create:
        store.append("s", batch("a", 6))  # 3 blocks of 4: the next append rolls
        store.append("s", batch("a6"))
    fake_service.fault(kind, "lost")
    big = batch("big", 10, size=200)
    with pytest.raises(StoreUnavailable):
        store.append("s", big)
    store.append("s", big)
    expected = batch("first") + (batch("a", 6) + batch("a6") if kind is ops.Create else []) + big
    assert fake_store(**SMALL).read("s") == expected


def test_lost_roll_frame(fake_store: Callable[..., Any], fake_service: Any) -> None:
    store = fake_store(**SMALL)
    log: list[Record] = []
    for n in range(2):
        store.append("s", batch(f"a{n}"))
        log += batch(f"a{n}")
    fake_service.fault(ops.Append, "lost")  # the ROLL frame
    with pytest.raises(StoreUnavailable):
        store.append("s", batch("b"))
    store.append("s", batch("b"))
    log += batch("b")
    assert fake_store(**SMALL).read("s") == log


def test_delete_erases_and_a_new_life_forgets_old_ids(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    stale = fake_store()
    stale.append("s", batch("a"))
    deleter = fake_store()
    deleter.delete("s")
    assert not fake_service.blobs
    assert deleter.read("s") == [] and stale.read("s", -1) == []
    stale.append("s", batch("a"))  # ids seen in the old life must be stored again
    assert deleter.read("s") == batch("a")


def test_stale_handle_after_delete_and_recreate(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    stale = fake_store(**SMALL)
    for n in range(6):
        stale.append("s", batch(f"a{n}"))  # the stale cursor points at a later segment
    fresh = fake_store(**SMALL)
    fresh.delete("s")
    fresh.append("s", batch("new"))
    assert stale.read("s", -5) == batch("new")
    stale.append("s", batch("a0"))
    assert fresh.read("s") == batch("new") + batch("a0")


def test_damaged_frame_raises_corrupt_record(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    store = fake_store()
    store.append("s", batch("a"))
    store.append("s", batch("b"))
    (segment,) = fake_service.blobs.values()
    segment["data"][12] ^= 0xFF
    with pytest.raises(CorruptRecord, match="checksum"):
        fake_store().read("s")
    assert fake_store().read("s", -2) == batch("b")  # the damage is outside the tail


def _frame_bounds(data: bytes) -> list[tuple[int, int]]:
    from chatkeep.azure_blob import frames as fmt

    return [(f.start, f.end) for f in fmt.scan_forward(bytes(data), 0, 0).frames]


@pytest.mark.parametrize("kind", ["garbage", "truncated", "missing"])
def test_damage_names_the_first_record_of_a_multi_record_frame(
    fake_store: Callable[..., Any], fake_service: Any, kind: str
) -> None:
    store = fake_store()
    for tag in "abcd":
        store.append("s", batch(tag, 3))  # frames hold records 0-2, 3-5, 6-8, 9-11
    (segment,) = fake_service.blobs.values()
    start, end = _frame_bounds(segment["data"])[2]
    piece = {"garbage": bytes(end - start), "truncated": segment["data"][start : end - 9]}
    segment["data"][start:end] = piece.get(kind, b"")
    for start_at in (0, -12, -7, -1000):
        with pytest.raises(CorruptRecord) as error:
            fake_store().read("s", start_at)
        assert error.value.position == 6, (kind, start_at)
    assert fake_store().read("s", 0, 6) == batch("a", 3) + batch("b", 3)
    assert fake_store().read("s", -3) == batch("d", 3)  # the tail is intact


@pytest.mark.parametrize("kind", ["garbage", "truncated"])
def test_a_damaged_last_frame_leaves_the_session_appendable(
    fake_store: Callable[..., Any], fake_service: Any, kind: str
) -> None:
    store = fake_store()
    for tag in "abc":
        store.append("s", batch(tag, 2))
    (segment,) = fake_service.blobs.values()
    start, end = _frame_bounds(segment["data"])[-1]
    segment["data"][start:end] = bytes(end - start) if kind == "garbage" else b"ck\x01"
    other = fake_store()
    with pytest.raises(CorruptRecord) as error:
        other.read("s", -1)
    assert error.value.position == 4
    other.append("s", batch("after", 1))  # a fresh handle salvages the end once
    store.append("s", batch("later", 1))  # a stale handle catches up past the damage
    for handle in (fake_store(), other, store):
        assert handle.read("s", -2) == batch("after", 1) + batch("later", 1)
        assert handle.read("s", 0, 4) == batch("a") + batch("b")
        with pytest.raises(CorruptRecord) as error:
            handle.read("s")
        assert error.value.position == 4


def test_missing_previous_segment_is_reported(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    store = fake_store(**SMALL)
    for n in range(10):
        store.append("s", batch(f"a{n}"))
    del fake_service.blobs[next(name for name in fake_service.blobs if name.endswith("0000000001"))]
    assert fake_store(**SMALL).read("s", -2) == batch("a9")
    with pytest.raises(CorruptRecord, match="missing"):
        fake_store(**SMALL).read("s", -19)


def test_container_is_created_on_first_append(
    fake_store: Callable[..., Any], fake_service: Any
) -> None:
    fake_service.container = False
    store = fake_store()
    assert store.read("s") == []
    store.append("s", batch("a"))
    assert store.read("s") == batch("a")


def test_async_api_on_the_same_algorithm(fake_store: Callable[..., Any]) -> None:
    store = fake_store(**SMALL)

    async def scenario() -> list[Record]:
        for n in range(9):
            await store.aappend("s", batch(f"a{n}"))
        await store.aappend("s", batch("a3"))
        tail: list[Record] = await store.aread("s", -4)
        return tail

    assert asyncio.run(scenario()) == batch("a7") + batch("a8")
    store.close()


# -- interleaved writers: the generators advanced one operation at a time ---------------


def _drive(service: Any, steps: list[Generator[Any, Any, Any]], seed: int) -> None:
    """Advance several appends in a random interleaving of their operations."""
    rng = random.Random(seed)
    pending: dict[int, tuple[Any, Any]] = {}
    for index, step in enumerate(steps):
        pending[index] = (step, None)
    started: set[int] = set()
    while pending:
        index = rng.choice(sorted(pending))
        step, reply = pending[index]
        try:
            if index not in started:
                started.add(index)
                op = next(step)
            elif isinstance(reply, BaseException):
                op = step.throw(reply)
            else:
                op = step.send(reply)
        except StopIteration:
            del pending[index]
            continue
        try:
            pending[index] = (step, service.execute(op))
        except ops.ServiceError as error:
            pending[index] = (step, error)


@pytest.mark.parametrize("seed", range(40))
def test_interleaved_writers_never_lose_or_duplicate(fake_service: Any, seed: int) -> None:
    limits = Limits(segment_blocks=5, max_block=1024)
    batches = {w: [batch(f"w{w}.{n}", 1 + (n + w) % 3) for n in range(6)] for w in range(4)}

    def writer(w: int) -> Generator[Any, Any, None]:
        log = Log("s", "root/s", Seen(100), limits)
        cursor = None
        for records in batches[w]:
            cursor = yield from _write.append(log, cursor, records)

    _drive(fake_service, [writer(w) for w in range(4)], seed)
    from chatkeep.azure_blob import _read

    log = Log("s", "root/s", Seen(100), limits)
    records, _ = ops.run_sync(_read.read(log, None, 0, None), fake_service.execute)
    position = {record.id: index for index, record in enumerate(records)}
    assert len(position) == len(records) == sum(len(b) for bs in batches.values() for b in bs)
    for bs in batches.values():
        places = [position[record.id] for records_ in bs for record in records_]
        assert places == sorted(places)
        for records_ in bs:
            first = position[records_[0].id]
            assert [position[r.id] for r in records_] == list(range(first, first + len(records_)))
    tail, _ = ops.run_sync(_read.read(log, None, -7, None), fake_service.execute)
    assert tail == records[-7:]


# -- a model: random appends, retries, faults, handles and reads -----------------------

MODEL_SETTINGS = settings(
    max_examples=example_count(60),
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize("limits", [{}, SMALL], ids=["default", "small"])
def test_random_histories_match_a_list(
    fake_store: Callable[..., Any], fake_service: Any, limits: dict[str, int]
) -> None:
    class Machine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            fake_service.blobs.clear()
            fake_service.faults.clear()
            self.session = f"s{random.getrandbits(32)}"
            self.handles = [fake_store(**limits) for _ in range(3)]
            self.model: list[Record] = []
            self.batches: list[tuple[int, list[Record]]] = []
            self.last: list[Record] = []
            self.counter = 0

        @rule(
            handle=st.integers(0, 2),
            sizes=st.lists(st.integers(0, 300), min_size=1, max_size=4),
            fault=st.sampled_from([None, None, None, "lost", "failed", "retried"]),
        )
        def append(self, handle: int, sizes: list[int], fault: str | None) -> None:
            records = [Record(f"m{self.counter + n}", b"d" * size) for n, size in enumerate(sizes)]
            self.counter += len(records)
            if fault is not None:
                fake_service.fault(ops.Append, fault)
            try:
                self.handles[handle].append(self.session, records)
            except StoreUnavailable:
                fake_service.faults.clear()
                self.handles[handle].append(self.session, records)  # the caller retries
            self.model.extend(records)
            self.batches.append((handle, records))
            self.last = records

        @rule(data=st.data())
        def retry_own_batch(self, data: st.DataObject) -> None:
            # The handle that appended a batch re-sends it, however long ago.
            if self.batches:
                handle, records = data.draw(st.sampled_from(self.batches))
                self.handles[handle].append(self.session, records)

        @rule(handle=st.integers(0, 2))
        def retry_last_batch_elsewhere(self, handle: int) -> None:
            # Any handle (a new process, say) re-sends the latest batch.
            if self.last:
                self.handles[handle].append(self.session, self.last)

        @rule(
            handle=st.integers(0, 2),
            start=st.integers(-15, 15),
            stop=st.none() | st.integers(-15, 15),
        )
        def read(self, handle: int, start: int, stop: int | None) -> None:
            assert self.handles[handle].read(self.session, start, stop) == self.model[start:stop]

        @rule(handle=st.integers(0, 2))
        def reopen(self, handle: int) -> None:
            self.handles[handle] = fake_store(**limits)
            self.batches = [(h, b) for h, b in self.batches if h != handle]

        @invariant()
        def tail_matches(self) -> None:
            assert fake_store(**limits).read(self.session, -3) == self.model[-3:]

    run_state_machine_as_test(Machine, settings=MODEL_SETTINGS)
