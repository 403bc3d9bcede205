"""Per-record idempotency, conditional appends, namespaces, closed handles and the backend
author's kit (CONTRACT additions), on the built-in memory backend and the Store adapter."""

from __future__ import annotations

import asyncio
import threading

import pytest

from chatkeep.core import (
    AppendConflict,
    CapabilityMissing,
    InvalidOption,
    Message,
    Record,
    RecordConflict,
    Store,
    StoreClosed,
    StoreUnavailable,
    encode_records,
    new_id,
    open_store,
    read_view,
    undo,
)
from chatkeep.core import backend as kit
from chatkeep.core.errors import ChatkeepError
from chatkeep.core.memory import MemoryStore
from chatkeep.core.views import fork


def ids(records: list[Record]) -> list[str]:
    return [record.id for record in records]


# -- per-record idempotency -------------------------------------------------------------


def test_a_batch_mixing_stored_and_new_ids_stores_the_new_ones() -> None:
    store = open_store("memory://")
    store.append("s", [Record("a", b"1")])
    store.append("s", [Record("a", b"1"), Record("b", b"2")])
    store.append("s", [Record("c", b"3")])
    assert store.read("s") == [Record("a", b"1"), Record("b", b"2"), Record("c", b"3")]


def test_an_id_reused_with_other_data_refuses_the_whole_batch() -> None:
    store = open_store("memory://")
    store.append("s", [Record("a", b"1")])
    with pytest.raises(RecordConflict) as caught:
        store.append("s", [Record("n", b"new"), Record("a", b"other")])
    assert caught.value.session_id == "s" and caught.value.record_id == "a"
    assert "'a'" in str(caught.value) and "'s'" in str(caught.value)
    assert isinstance(caught.value, ChatkeepError) and isinstance(caught.value, ValueError)
    assert store.read("s") == [Record("a", b"1")]  # "n" was not stored either


def test_record_ids_are_free_again_after_delete() -> None:
    store = open_store("memory://")
    store.append("s", [Record("a", b"1")])
    store.delete("s")
    store.append("s", [Record("a", b"other")])
    assert store.read("s") == [Record("a", b"other")]


# -- conditional append -----------------------------------------------------------------


def test_append_if_appends_when_the_log_ends_where_expected() -> None:
    store = open_store("memory://")
    store.append_if("s", [Record("a", b"1")], after=None)
    store.append_if("s", [Record("b", b"2")], after="a")
    assert ids(store.read("s")) == ["a", "b"]


@pytest.mark.parametrize("after", [None, "a", "zzz"])
def test_append_if_refuses_a_stale_expectation_and_stores_nothing(after: str | None) -> None:
    store = open_store("memory://")
    store.append("s", [Record("a", b"1"), Record("b", b"2")])
    with pytest.raises(AppendConflict) as caught:
        store.append_if("s", [Record("c", b"3")], after=after)
    assert caught.value.session_id == "s" and caught.value.expected == after
    assert ids(store.read("s")) == ["a", "b"]


def test_an_exact_retry_of_a_conditional_append_is_a_no_op() -> None:
    store = open_store("memory://")
    store.append_if("s", [Record("a", b"1")], after=None)
    store.append("s", [Record("b", b"2")])
    store.append_if("s", [Record("a", b"1")], after=None)  # acknowledged before: no-op
    assert ids(store.read("s")) == ["a", "b"]
    with pytest.raises(RecordConflict):
        store.append_if("s", [Record("a", b"changed")], after="b")


def test_append_if_needs_the_capability() -> None:
    class Plain:
        def __init__(self) -> None:
            self.inner = MemoryStore()

        def append(self, session_id: str, records: list[Record]) -> None:
            self.inner.append(session_id, records)

        def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
            return self.inner.read(session_id, start, stop)

    store = Store(Plain())
    with pytest.raises(CapabilityMissing):
        store.append_if("s", [Record("a", b"1")], after=None)
    with pytest.raises(CapabilityMissing):
        asyncio.run(store.aappend_if("s", [Record("a", b"1")], after=None))


def test_a_backend_declaring_conditional_needs_append_if() -> None:
    class Liar(MemoryStore):
        append_if = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match="append_if"):
        Store(Liar())


def test_append_if_checks_its_arguments() -> None:
    store = open_store("memory://")
    with pytest.raises(TypeError):
        store.append_if("s", [Record("a", b"1")], after="")
    with pytest.raises(TypeError):
        store.append_if("s", [Record("a", b"1")], after=3)  # type: ignore[arg-type]
    store.append_if("s", [], after="anything")  # nothing to append: nothing checked
    assert store.read("s") == []


def test_racing_conditional_appends_have_exactly_one_winner_per_round() -> None:
    store = open_store("memory://")
    winners: list[str] = []
    lock = threading.Lock()
    for round_number in range(20):
        last = store.read("race", -1)
        after = last[0].id if last else None
        barrier = threading.Barrier(6)

        def contend(
            worker: int,
            after: str | None = after,
            round_number: int = round_number,
            barrier: threading.Barrier = barrier,
        ) -> None:
            barrier.wait()
            record = Record(f"r{round_number}-w{worker}", b"x")
            try:
                store.append_if("race", [record], after=after)
            except AppendConflict:
                return
            with lock:
                winners.append(record.id)

        threads = [threading.Thread(target=contend, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(winners) == 20
    assert ids(store.read("race")) == winners


def test_async_append_if_on_a_sync_backend() -> None:
    store = open_store("memory://")

    async def main() -> None:
        await store.aappend_if("s", [Record("a", b"1")], after=None)
        with pytest.raises(AppendConflict):
            await store.aappend_if("s", [Record("b", b"2")], after=None)

    asyncio.run(main())
    assert ids(store.read("s")) == ["a"]


# -- conditional views ------------------------------------------------------------------


def _turn(store: Store, session_id: str, text: str) -> None:
    store.append(
        session_id,
        encode_records(
            [
                Message.user(text, message_id=new_id()),
                Message.assistant("re: " + text, message_id=new_id()),
            ]
        ),
    )


class SlowReads(MemoryStore):
    """Reads take a while, so concurrent read-then-append operations interleave."""

    def read(self, session_id: str, start: int = 0, stop: int | None = None) -> list[Record]:
        records = super().read(session_id, start, stop)
        threading.Event().wait(0.02)
        return records


def test_concurrent_undos_never_retract_one_turn_twice() -> None:
    store = Store(SlowReads())
    for n in range(6):
        _turn(store, "chat", f"q{n}")
    barrier = threading.Barrier(3)
    retracted: list[str] = []
    lock = threading.Lock()

    def one_undo() -> None:
        barrier.wait()
        messages = undo(store, "chat")
        with lock:
            retracted.extend(m.text for m in messages if m.role == "user")

    threads = [threading.Thread(target=one_undo) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(retracted) == ["q3", "q4", "q5"]
    assert [m.text for m in read_view(store, "chat") if m.role == "user"] == ["q0", "q1", "q2"]


def test_forks_racing_for_one_new_id_do_not_share_it() -> None:
    store = Store(SlowReads())
    _turn(store, "a", "from a")
    _turn(store, "b", "from b")
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def one_fork(parent: str) -> None:
        barrier.wait()
        try:
            fork(store, parent, new_session_id="child")
        except ChatkeepError as error:
            outcomes.append(type(error).__name__)
        else:
            outcomes.append("ok")

    threads = [threading.Thread(target=one_fork, args=(p,)) for p in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["SessionExists", "ok"]
    assert len(store.read("child")) == 1  # one fork record, not two


# -- namespaces -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("acme", "acme/eu"),
        ("acme", "acmecorp"),
        ("acme/eu", "acme/us"),
        (None, "acme"),
        ("a:b", "a"),
    ],
)
def test_namespaces_are_disjoint(first: str | None, second: str | None) -> None:
    name = f"ns-{new_id()}"
    one = open_store(f"memory://{name}", **({} if first is None else {"namespace": first}))
    two = open_store(f"memory://{name}", namespace=second)
    one.append("s", [Record("a", b"one")])
    two.append("t", [Record("a", b"two")])
    assert one.read("t") == [] and two.read("s") == []
    assert list(one.list_sessions()) == ["s"] and list(two.list_sessions()) == ["t"]
    two.delete("s")
    assert one.read("s") == [Record("a", b"one")]
    two.append("s", [Record("a", b"other data")])  # no conflict: another tenant's log
    assert one.read("s") == [Record("a", b"one")]


def test_one_namespace_is_shared_by_its_handles_and_the_url_query_sets_it() -> None:
    name = f"ns-{new_id()}"
    one = open_store(f"memory://{name}?namespace=acme")
    two = open_store(f"memory://{name}", namespace="acme")
    one.append("s", [Record("a", b"1")])
    assert two.read("s") == [Record("a", b"1")]
    three = open_store(f"memory://{name}?namespace=other", namespace="acme")  # keyword wins
    assert three.read("s") == [Record("a", b"1")]


@pytest.mark.parametrize(
    "bad",
    ["", "/acme", "acme/", "a//b", "..", "a/../b", "./a", "a b", "é", "a%2Fb", "x" * 129, 7],
)
def test_invalid_namespaces_raise_invalid_option(bad: object) -> None:
    with pytest.raises(InvalidOption):
        open_store("memory://", namespace=bad)
    with pytest.raises(InvalidOption):
        kit.check_namespace(bad)


def test_good_namespaces_are_kept_literally() -> None:
    for good in ["acme", "acme/eu", "app:prod", "A.b_c-d", "x" * 128, "a/b/c"]:
        assert kit.check_namespace(good) == good


def test_memory_refuses_unknown_options() -> None:
    with pytest.raises(InvalidOption, match="colour"):
        open_store("memory://", colour="blue")
    with pytest.raises(InvalidOption, match="colour"):
        open_store("memory://?colour=blue")
    with pytest.raises(InvalidOption):
        open_store("memory", colour="blue")


# -- closed handles ---------------------------------------------------------------------


def test_every_hook_of_a_closed_handle_raises_store_closed() -> None:
    name = f"closed-{new_id()}"
    store = open_store(f"memory://{name}")
    other = open_store(f"memory://{name}")
    store.append("s", [Record("a", b"1")])
    store.close()
    store.close()  # idempotent
    assert store.closed
    calls = [
        lambda: store.append("s", [Record("b", b"2")]),
        lambda: store.append_if("s", [Record("b", b"2")], after="a"),
        lambda: store.read("s"),
        lambda: store.delete("s"),
        lambda: list(store.list_sessions()),
    ]
    for call in calls:
        with pytest.raises(StoreClosed):
            call()

    async def async_calls() -> None:
        with pytest.raises(StoreClosed):
            await store.aappend("s", [Record("b", b"2")])
        with pytest.raises(StoreClosed):
            await store.aread("s")
        with pytest.raises(StoreClosed):
            await store.aappend_if("s", [Record("b", b"2")], after="a")
        with pytest.raises(StoreClosed):
            await store.adelete("s")

    asyncio.run(async_calls())
    assert other.read("s") == [Record("a", b"1")]  # other handles are unaffected


# -- the backend author's kit -----------------------------------------------------------


def test_the_kit_exports_what_it_lists() -> None:
    for name in kit.__all__:
        assert getattr(kit, name) is not None
    assert {
        kit.DELETE,
        kit.LIST_SESSIONS,
        kit.CLOSE,
        kit.TTL,
        kit.SHARED,
        kit.DURABLE,
        kit.CONDITIONAL,
        kit.NAMESPACE,
        kit.RECENT,
        kit.FULLTEXT,
    } == kit.CAPABILITIES


@pytest.mark.parametrize(
    ("prefix", "bound"),
    [("ab", "ac"), ("a\U0010ffff", "b"), ("\U0010ffff", None), ("\ud7ff", "\ue000"), ("", None)],
)
def test_prefix_upper_bound(prefix: str, bound: str | None) -> None:
    assert kit.prefix_upper_bound(prefix) == bound


def test_prefix_upper_bound_bounds_exactly_the_prefixed_strings() -> None:
    words = ["a", "ab", "ab\U0010ffff", "abc", "ac", "b", "a%", "a_", "ab%"]
    for prefix in ["a", "ab", "a%"]:
        bound = kit.prefix_upper_bound(prefix)
        assert bound is not None
        selected = sorted(w for w in words if prefix <= w < bound)
        assert selected == sorted(w for w in words if w.startswith(prefix))


class DriverError(Exception):
    pass


class DriverTimeout(DriverError):
    pass


def test_error_map_raises_the_most_specific_match_without_chaining() -> None:
    faults = kit.ErrorMap(
        {
            DriverError: lambda exc: StoreUnavailable("generic " + faults.describe(exc)),
            DriverTimeout: lambda exc: StoreUnavailable("timeout " + faults.describe(exc)),
        }
    )
    with pytest.raises(StoreUnavailable) as caught, faults.mapped():
        raise DriverTimeout("connect to redis://user:hunter2@db:6379 timed out")
    assert str(caught.value).startswith("timeout DriverTimeout:")
    assert "hunter2" not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with pytest.raises(StoreUnavailable, match=r"^generic"), faults.mapped():
        raise DriverError("x")


def test_error_map_lets_chatkeep_errors_and_unknown_errors_through() -> None:
    faults = kit.ErrorMap({Exception: lambda exc: StoreUnavailable(str(exc))})
    with pytest.raises(RecordConflict), faults.mapped():
        raise RecordConflict("s", "a")
    narrow = kit.ErrorMap({DriverError: lambda exc: StoreUnavailable(str(exc))})
    with pytest.raises(KeyError), narrow.mapped():
        raise KeyError("programming error")
    with narrow.mapped():
        pass  # nothing raised, nothing mapped


def test_redact_text_masks_urls_and_secret_pairs_in_free_text() -> None:
    text = kit.redact_text(
        "failed: postgresql://app:s3cret@db/x (password=hunter2, token: abc123) "
        "https://acct.blob.core.windows.net/c?sig=SIGVALUE&sv=1"
    )
    for secret in ["s3cret", "hunter2", "abc123", "SIGVALUE"]:
        assert secret not in text
    assert "postgresql://app:***@db/x" in text and "sv=1" in text
