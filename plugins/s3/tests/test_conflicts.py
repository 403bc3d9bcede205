"""Writers racing for positions, and writes whose outcome is unknown: nothing is lost and
nothing is stored twice.

Faults come in two ways: a stand-in client (``faulty``) that runs an action around the
real call, and botocore's own event hooks (``before-send``), which sit below botocore's
retry handler. moto does not make ``If-None-Match`` atomic under truly simultaneous
requests (see conftest), so races are produced deterministically: another writer's append
is run just before our PUT leaves, and the server answers a real 412.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

import pytest

from chatkeep.core import Record, StoreUnavailable

CONDITIONAL = {"when": lambda kwargs: kwargs.get("IfNoneMatch") == "*"}


def recs(count: int, tag: str = "r", start: int = 0) -> list[Record]:
    return [Record(f"{tag}-{n}", f"{tag}:{n}".encode()) for n in range(start, start + count)]


def segment_count(store: Any, session: str) -> int:
    """How many segments the session's log holds (from a listing, not the store's view)."""
    prefix = store.layout.folder(session) + "log/"
    return sum(1 for item in store.bucket.list_objects(prefix) if item.key.endswith(".seg"))


# -- losing a position --------------------------------------------------------------------


def test_an_injected_412_with_no_real_winner(s3_url: str, open_s3: Any, faulty: Any) -> None:
    store = open_s3(s3_url)
    faults = faulty(store)
    faults.plan("put_object", faults.refused(412, "PreconditionFailed"), **CONDITIONAL)
    store.append("s", recs(2))
    assert open_s3(s3_url).read("s") == recs(2)
    assert faults.calls["put_object"] == 2
    assert segment_count(store, "s") == 1


def test_a_real_conflict_sends_the_loser_to_the_new_end(
    s3_url: str, open_s3: Any, faulty: Any
) -> None:
    one, two = open_s3(s3_url), open_s3(s3_url)
    one.append("s", recs(1, "one"))
    two.read("s")
    faults = faulty(one)
    faults.plan(
        "put_object",
        faults.first(lambda: two.append("s", recs(2, "two"))),
        **CONDITIONAL,
    )
    one.append("s", recs(1, "one", start=1))  # its PUT meets the key `two` just created
    expected = recs(1, "one") + recs(2, "two") + recs(1, "one", start=1)
    assert one.read("s") == expected
    assert two.read("s") == expected
    assert faults.calls["put_object"] == 2


def test_a_stale_writer_catches_up_cheaply(s3_url: str, open_s3: Any, count_requests: Any) -> None:
    # No roll-over in this session: the point is what catching up costs.
    stale, busy = open_s3(s3_url, rollover_segments=1000), open_s3(s3_url, rollover_segments=1000)
    stale.append("s", recs(1, "stale"))
    for n in range(30):
        busy.append("s", recs(1, "busy", start=n))
    requests = count_requests(stale)
    stale.append("s", recs(1, "stale", start=1))
    # PUT (412), one LIST of the newest keys, one GET of the newest segment (its header
    # holds the ids since), PUT: not one GET per segment it missed.
    assert dict(requests) == {"PutObject": 2, "ListObjectsV2": 1, "GetObject": 1}
    assert busy.read("s")[-1] == recs(1, "stale", start=1)[0]


def test_conditional_request_conflict_409_is_retried(
    s3_url: str, open_s3: Any, faulty: Any
) -> None:
    store = open_s3(s3_url)
    faults = faulty(store)
    refusal = faults.refused(409, "ConditionalRequestConflict")
    faults.plan("put_object", refusal, refusal, refusal, **CONDITIONAL)
    store.append("s", recs(3))
    assert open_s3(s3_url).read("s") == recs(3)


def test_endless_conflicts_give_up_with_nothing_stored(
    s3_url: str, open_s3: Any, faulty: Any
) -> None:
    store = open_s3(s3_url, max_conflicts=3)
    faults = faulty(store)
    faults.plan("put_object", *[faults.refused(412, "PreconditionFailed")] * 4, **CONDITIONAL)
    with pytest.raises(StoreUnavailable, match="other writers"):
        store.append("s", recs(1))
    assert open_s3(s3_url).read("s") == []
    store.append("s", recs(1))
    assert open_s3(s3_url).read("s") == recs(1)


# -- writes with an unknown outcome -------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    ["lost_answer", "done_then_500", "done_then_timeout_code", "dropped", "refused_503"],
)
def test_unknown_outcomes_store_the_batch_exactly_once(
    s3_url: str, open_s3: Any, faulty: Any, fault: str
) -> None:
    store = open_s3(s3_url)
    store.append("s", recs(1, "before"))
    faults = faulty(store)
    action = {
        "lost_answer": faults.lost_answer,
        "done_then_500": faults.done_then(500, "InternalError"),
        "done_then_timeout_code": faults.done_then(400, "RequestTimeout"),
        "dropped": faults.dropped,
        "refused_503": faults.refused(503, "ServiceUnavailable"),
    }[fault]
    faults.plan("put_object", action, **CONDITIONAL)
    store.append("s", recs(2))
    assert open_s3(s3_url).read("s") == recs(1, "before") + recs(2)
    assert segment_count(store, "s") == 2


def test_someone_else_took_the_position_while_our_answer_was_lost(
    s3_url: str, open_s3: Any, faulty: Any
) -> None:
    one, two = open_s3(s3_url), open_s3(s3_url)
    one.append("s", recs(1, "one"))
    two.read("s")
    faults = faulty(one)

    def other_writer_then_drop(method: Any, kwargs: dict[str, Any]) -> Any:
        two.append("s", recs(1, "two"))
        return faults.dropped(method, kwargs)

    faults.plan("put_object", other_writer_then_drop, **CONDITIONAL)
    one.append("s", recs(1, "one", start=1))
    assert two.read("s") == recs(1, "one") + recs(1, "two") + recs(1, "one", start=1)


def test_when_even_the_check_fails_the_error_is_raised_and_a_retry_is_safe(
    s3_url: str, open_s3: Any, faulty: Any
) -> None:
    store = open_s3(s3_url)
    faults = faulty(store)
    faults.plan("put_object", faults.lost_answer, **CONDITIONAL)  # it landed...
    unavailable = faults.refused(503, "ServiceUnavailable")
    faults.plan("get_object", unavailable, unavailable, unavailable)  # ...but we cannot tell
    with pytest.raises(StoreUnavailable):
        store.append("s", recs(2))
    store.append("s", recs(2))  # the caller retries: finds its batch, writes nothing
    assert open_s3(s3_url).read("s") == recs(2)
    assert segment_count(store, "s") == 1


def test_unknown_outcomes_that_never_land_end_in_store_unavailable(
    s3_url: str, open_s3: Any, faulty: Any
) -> None:
    store = open_s3(s3_url)
    faults = faulty(store)
    faults.plan("put_object", *[faults.dropped] * 3, **CONDITIONAL)
    with pytest.raises(StoreUnavailable, match="retrying the append is safe"):
        store.append("s", recs(2))
    assert open_s3(s3_url).read("s") == []
    store.append("s", recs(2))
    assert open_s3(s3_url).read("s") == recs(2)


# -- below botocore's retry handler -------------------------------------------------------


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


def _response(request: Any, status: int, code: str) -> Any:
    from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]

    body = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
    return AWSResponse(request.url, status, {"Content-Type": "application/xml"}, _Raw(body))


def test_a_412_injected_through_botocore_events(s3_url: str, open_s3: Any) -> None:
    store = open_s3(s3_url)
    store.append("s", recs(1, "a"))
    sent: Counter[str] = Counter()

    def inject(request: Any, **_: Any) -> Any:
        sent["put"] += 1
        return _response(request, 412, "PreconditionFailed") if sent["put"] == 1 else None

    store.bucket.client.meta.events.register("before-send.s3.PutObject", inject)
    store.append("s", recs(1, "b"))
    assert open_s3(s3_url).read("s") == recs(1, "a") + recs(1, "b")
    assert sent["put"] == 2


def test_a_response_lost_under_botocores_own_retry(s3_url: str, open_s3: Any) -> None:
    """The PUT reaches S3 and lands; the answer is a 500; botocore retries by itself and
    its second attempt meets our own object (412). The store must recognise its batch."""
    import urllib3

    store = open_s3(s3_url)
    store.append("s", recs(1, "a"))
    http = urllib3.PoolManager()
    attempts: Counter[str] = Counter()

    def land_then_fail(request: Any, **_: Any) -> Any:
        attempts["put"] += 1
        if attempts["put"] > 1:
            return None
        body = request.body
        if hasattr(body, "read"):
            position = body.tell()
            data = body.read()
            body.seek(position)
        else:
            data = body
        answer = http.request(request.method, request.url, body=data, headers=dict(request.headers))
        assert answer.status == 200
        return _response(request, 500, "InternalError")

    store.bucket.client.meta.events.register("before-send.s3.PutObject", land_then_fail)
    store.append("s", recs(2, "b"))
    assert attempts["put"] == 2  # botocore's retry, not ours
    assert open_s3(s3_url).read("s") == recs(1, "a") + recs(2, "b")
    assert segment_count(store, "s") == 2


# -- everything at once -------------------------------------------------------------------


def _check(log: list[Record], plans: dict[str, list[list[Record]]], complete: bool) -> None:
    counts = Counter(record.id for record in log)
    assert not [rid for rid, n in counts.items() if n > 1], "a record was stored twice"
    position = {record.id: index for index, record in enumerate(log)}
    for writer, plan in plans.items():
        seen = [batch for batch in plan if batch[0].id in position]
        if complete:
            assert len(seen) == len(plan), f"writer {writer} lost a batch"
        # Each writer's batches land in order, one after another.
        assert seen == plan[: len(seen)], f"writer {writer}'s batches are out of order"
        for batch in seen:
            places = [position.get(record.id, -1) for record in batch]
            assert places == list(range(places[0], places[0] + len(batch))), "batch split"


def test_writers_compactor_and_readers_with_random_faults(
    s3_url: str, open_s3: Any, faulty: Any
) -> None:
    rng = random.Random(20261129)
    writers = {f"w{n}": open_s3(s3_url, max_conflicts=1000) for n in range(3)}
    plans = {name: [recs(rng.randint(1, 3), f"{name}.{b}") for b in range(12)] for name in writers}
    for store in writers.values():
        faults = faulty(store)
        chaos = random.Random(rng.random())

        def pick(
            name: str, kwargs: dict[str, Any], faults: Any = faults, chaos: Any = chaos
        ) -> Any:
            if name != "put_object" or kwargs.get("IfNoneMatch") != "*":
                return None
            roll = chaos.random()
            if roll < 0.15:
                return faults.lost_answer
            if roll < 0.25:
                return faults.dropped
            if roll < 0.32:
                return faults.done_then(500, "InternalError")
            return None

        faults.default = pick

    errors: list[BaseException] = []
    done = threading.Event()

    def write(name: str) -> None:
        try:
            for batch in plans[name]:
                for _ in range(20):  # what a caller does with StoreUnavailable: retry
                    try:
                        writers[name].append("s", batch)
                        break
                    except StoreUnavailable:
                        continue
                else:
                    raise AssertionError("append kept failing")
        except BaseException as exc:
            errors.append(exc)

    def compact() -> None:
        compactor = open_s3(s3_url)
        try:
            while not done.is_set():
                compactor.compact("s", max_chunk_records=7)
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        reader = open_s3(s3_url)
        try:
            while not done.is_set():
                _check(reader.read("s"), plans, complete=False)
                tail = reader.read("s", -4)
                assert len({record.id for record in tail}) == len(tail)
        except BaseException as exc:
            errors.append(exc)

    background = [threading.Thread(target=compact), threading.Thread(target=read)]
    threads = [threading.Thread(target=write, args=(name,)) for name in writers]
    for thread in background + threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    done.set()
    for thread in background:
        thread.join(60)
    assert not errors, repr(errors[0])
    final = open_s3(s3_url).read("s")
    _check(final, plans, complete=True)
    assert len(final) == sum(len(b) for plan in plans.values() for b in plan)
